package session

import (
	"errors"

	"github.com/leasehold/leasehold/internal/lease"
)

// The session's errors are declared once, by the machinery that returns
// them (internal/lease), and named here, as os.ErrNotExist is fs.ErrNotExist.
var (
	// ErrClosed is returned by calls on a closed session, and is the cause of
	// every hold context that Close ended.
	ErrClosed = lease.ErrClosed

	// ErrLost is the cause of a hold that ended without Release: it was taken
	// away (Reset, pool member removed), its keys could not be kept alive in
	// Redis, or its session's lease was lost.
	ErrLost = lease.ErrLost

	// ErrLeaseLost is the cause of everything a session held when its lease
	// could no longer be proven alive. errors.Is(ErrLeaseLost, ErrLost) is true.
	ErrLeaseLost = lease.ErrLeaseLost

	// ErrReleased is the cause of a hold context ended by Hold.Release.
	ErrReleased = lease.ErrReleased

	// ErrInvalidOptions reports an invalid Options value.
	ErrInvalidOptions = lease.ErrInvalidOptions

	// ErrInvalidName reports an invalid resource name: empty, longer than
	// MaxNameLen bytes, not valid UTF-8, or with a control character (see
	// CheckName).
	ErrInvalidName = lease.ErrInvalidName

	// ErrNotReplicated reports that fewer replicas than Options.ReplicaAck
	// acknowledged a grant in time; the grant was rolled back.
	ErrNotReplicated = lease.ErrNotReplicated

	// ErrRestartGrace is returned by the calls that do not wait
	// (mutex.TryLock, semaphore.TryAcquire, pool.TryAcquire) during a
	// restart grace: Redis lost the namespace's data, or was started less
	// than Options.RestartGrace ago without it, and nothing is granted until
	// the grace is over, so that the sessions that held something can
	// reclaim it. The error's text says how long is left. The calls that
	// wait (Lock, Acquire, Campaign) wait the grace out instead. A mutex
	// held by a live session (its holder reclaimed it) makes TryLock
	// return mutex.ErrLocked, grace or not.
	ErrRestartGrace = lease.ErrRestartGrace

	// ErrRedisRefused reports that Redis refused a command for a reason that
	// retrying cannot fix: the user lacks a permission (NOPERM), the client
	// is not authenticated (NOAUTH, WRONGPASS), the server does not know the
	// command, or the node is a read-only replica (READONLY). Dial, New and
	// the calls that wait return it at once rather than retrying; every
	// other call that reads or writes Redis (Holder, Stats, Leader, Reset,
	// SetLimit, ...) returns such a refusal as an error matching it too, and
	// an election Observer ends with it. The error also wraps Redis' reply:
	// errors.As finds the *rueidis.RedisError.
	ErrRedisRefused = lease.ErrRedisRefused

	// ErrUnsupportedRedis is returned by Dial and New when Redis reports a
	// version older than MinRedis, the oldest one leasehold supports; the
	// error names both, and matches ErrRedisRefused too.
	ErrUnsupportedRedis = lease.ErrUnsupportedRedis

	// ErrShardsMismatch is returned by Dial and New, together with
	// ErrInvalidOptions, when the namespace is laid out with another shard
	// count than Options.Shards (a sharded namespace opened unsharded, or
	// the other way round, or with another count): its names live in
	// other shards, and the session could grant what another holds. The
	// error says which count the namespace has. A sharded session's call
	// that opens the lease copy of a shard can return it too, when the
	// namespace was laid out anew after Redis lost its data.
	ErrShardsMismatch = lease.ErrShardsMismatch

	// ErrNilSession is the error of every call of a primitive made with a
	// nil *Session (mutex.New(nil, name), ...): Session.Err returns it for
	// a nil receiver.
	ErrNilSession = errors.New("session: nil *Session")

	// ErrManagerClosed is returned by a Manager's methods after Close.
	ErrManagerClosed = errors.New("session: manager closed")
)
