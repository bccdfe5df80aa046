package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/scripts"
)

var (
	// ErrClosed is returned by calls on a closed session, and is the cause of
	// every hold context that Close ended.
	ErrClosed = errors.New("session: closed")

	// ErrLost is the cause of a hold that ended without Release: it was taken
	// away (Reset, pool member removed) or its session's lease was lost.
	ErrLost = errors.New("session: hold lost")

	// ErrLeaseLost is the cause of everything a session held when its lease
	// could no longer be proven alive. errors.Is(ErrLeaseLost, ErrLost) is true.
	ErrLeaseLost error = leaseLost{}

	// ErrReleased is the cause of a hold context ended by Hold.Release.
	ErrReleased = errors.New("session: hold released")

	// ErrInvalidOptions reports an invalid Options value.
	ErrInvalidOptions = errors.New("session: invalid options")

	// ErrInvalidName reports an invalid resource name (see CheckName).
	ErrInvalidName = errors.New("session: invalid name")

	// ErrNotReplicated reports that fewer replicas than Options.ReplicaAck
	// acknowledged a grant in time; the grant was rolled back.
	ErrNotReplicated = errors.New("session: not acknowledged by enough replicas")

	// ErrRestartGrace is returned by the calls that do not wait
	// (mutex.TryLock, semaphore.TryAcquire, pool.TryAcquire) during a
	// restart grace: Redis lost the namespace's data, or was started less
	// than Options.RestartGrace ago without it, and nothing is granted until
	// the grace is over, so that the sessions that held something can
	// reclaim it. The error's text says how long is left. The calls that
	// wait (Lock, Acquire, Campaign) wait the grace out instead. A mutex
	// held by a live session (its holder reclaimed it) makes TryLock
	// return mutex.ErrLocked, grace or not.
	ErrRestartGrace = errors.New("session: restart grace")

	// ErrRedisRefused reports that Redis refused a command for a reason that
	// retrying cannot fix: the user lacks a permission (NOPERM), the client
	// is not authenticated (NOAUTH, WRONGPASS), the server does not know the
	// command, or the node is a read-only replica (READONLY). Dial, New and
	// the calls that wait return it at once rather than retrying; every
	// other call that reads or writes Redis (Holder, Stats, Leader, Reset,
	// SetLimit, ...) returns such a refusal as an error matching it too, and
	// an election Observer ends with it. The error also wraps Redis' reply:
	// errors.As finds the *rueidis.RedisError.
	ErrRedisRefused = errors.New("session: refused by Redis")

	// ErrUnsupportedRedis is returned by Dial and New when Redis reports a
	// version older than the oldest one leasehold supports (MinRedis); the
	// error names both, and matches ErrRedisRefused too.
	ErrUnsupportedRedis = errors.New("session: unsupported Redis version")

	// ErrShardsMismatch is session.ErrShardsMismatch.
	ErrShardsMismatch = scripts.ErrShardsMismatch
)

// redisErr returns err, the error of what (a phrase such as "open lease"),
// as an error matching ErrRedisRefused when retrying cannot fix it (see
// scripts.Refused), else as "session: <what>: <err>". Both wrap err.
func redisErr(what string, err error) error {
	if scripts.Refused(err) {
		return fmt.Errorf("%w: %s: %w", ErrRedisRefused, what, err)
	}
	return fmt.Errorf("session: %s: %w", what, err)
}

// Refusal returns err marked as ErrRedisRefused (it matches it, and still
// wraps err) when Redis refused the call for a reason retrying cannot fix
// (see scripts.Refused), else err itself.
func Refusal(err error) error {
	if scripts.Refused(err) && !errors.Is(err, ErrRedisRefused) {
		return fmt.Errorf("%w: %w", ErrRedisRefused, err)
	}
	return err
}

// graceErr is the error of a call that does not wait, refused during a
// restart grace with left to go.
func graceErr(left time.Duration) error {
	if left >= time.Second {
		left = left.Round(100 * time.Millisecond)
	}
	return fmt.Errorf("%w: grants resume in %v (Redis lost its data, or has just started)", ErrRestartGrace, left)
}

// relabel relabels the internal ErrNotReplicated as the session's own.
func relabel(err error) error {
	return scripts.Relabel(err, scripts.ErrNotReplicated, ErrNotReplicated)
}

type leaseLost struct{}

func (leaseLost) Error() string { return "session: lease lost" }

// Is makes ErrLeaseLost match ErrLost.
func (leaseLost) Is(target error) bool { return target == ErrLost }
