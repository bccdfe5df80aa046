package semaphore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/session"
)

// Semaphore is a named semaphore in a session's namespace. It starts no
// goroutines and is safe for concurrent use.
type Semaphore struct {
	s     *session.Session
	name  string
	limit atomic.Int64
}

// New returns semaphore name of session s with the given limit. Invalid
// names (see session.CheckName) or limits make every method fail with an
// error matching session.ErrInvalidName or ErrInvalidLimit before anything is
// sent to Redis.
func New(s *session.Session, name string, limit int64) *Semaphore {
	sem := &Semaphore{s: s, name: name}
	sem.limit.Store(limit)
	return sem
}

// Acquire blocks until n permits are granted, ctx ends, or the session ends.
// ctx bounds only the wait: the permits are held until Release or loss.
// Requests are served in arrival order. On failure nothing is held; the
// error matches ErrInvalidWeight, ErrLimitMismatch (also when SetLimit
// shrinks the limit below n while it waits), ctx's cause,
// session.ErrLeaseLost or session.ErrClosed, or session.ErrRedisRefused
// (returned at once: Redis refused a call for a reason retrying cannot fix;
// other Redis errors are retried while waiting).
func (sem *Semaphore) Acquire(ctx context.Context, n int64) (*session.Hold, error) {
	return sem.claim(ctx, n, true)
}

// TryAcquire acquires n permits if they are free now and nobody waits
// before, else returns ErrNoPermits at once; during a restart grace, when
// nothing is granted, it returns an error matching session.ErrRestartGrace
// instead. ctx bounds the one round trip.
func (sem *Semaphore) TryAcquire(ctx context.Context, n int64) (*session.Hold, error) {
	h, err := sem.claim(ctx, n, false)
	if errors.Is(err, scripts.ErrBusy) {
		return nil, ErrNoPermits
	}
	return h, err
}

func (sem *Semaphore) claim(ctx context.Context, n int64, wait bool) (*session.Hold, error) {
	limit := sem.limit.Load()
	if err := sem.check(limit); err != nil {
		return nil, err
	}
	if n <= 0 || n > limit {
		return nil, fmt.Errorf("semaphore %q: n=%d, limit=%d: %w", sem.name, n, limit, ErrInvalidWeight)
	}
	h, err := hook.Claim(ctx, sem.s, scripts.Resource{Kind: scripts.Semaphore, Name: sem.name, N: n, Limit: limit}, wait)
	return h, scripts.Relabel(err, scripts.ErrLimitMismatch, ErrLimitMismatch)
}

// SetLimit stores limit in Redis as set by an operator, and makes it this
// Semaphore's limit. An operator's limit overrides the limit every client
// passes to New (no client gets ErrLimitMismatch while it stands) and is
// configuration: it stays in Redis while the semaphore is idle, until
// ClearLimit. Current holders keep their permits, so a smaller limit only
// makes new grants wait until use drops below it; waiters that now fit are
// served at once, and waiters asking for more than the new limit fail with
// ErrLimitMismatch. See the package doc for a rolling deploy.
func (sem *Semaphore) SetLimit(ctx context.Context, limit int64) error {
	if err := sem.check(limit); err != nil {
		return err
	}
	if _, err := sem.setLimit(ctx, limit); err != nil {
		return fmt.Errorf("semaphore %q: set limit: %w", sem.name, hook.Refusal(err))
	}
	sem.limit.Store(limit)
	return nil
}

// ClearLimit withdraws an operator's limit (see SetLimit): the stored limit
// stays while the semaphore is in use, but clients passing another limit get
// ErrLimitMismatch again, and once idle the semaphore's keys expire as usual;
// the next user then stores its own limit. Clearing a semaphore with no
// stored limit changes nothing.
func (sem *Semaphore) ClearLimit(ctx context.Context) error {
	if err := sem.check(sem.limit.Load()); err != nil {
		return err
	}
	if _, err := sem.setLimit(ctx, 0); err != nil {
		return fmt.Errorf("semaphore %q: clear limit: %w", sem.name, hook.Refusal(err))
	}
	return nil
}

func (sem *Semaphore) setLimit(ctx context.Context, limit int64) (int64, error) {
	idle := 2 * sem.s.Options().TTL
	return hook.Env(sem.s, sem.name).SemaphoreSetLimit(ctx, sem.name, limit, idle)
}

// Holder is one live holder of a semaphore.
type Holder struct {
	Session string        // holder session id
	Owner   string        // holder session's Options.Owner
	N       int64         // permits held
	Token   int64         // fencing token of the grant
	TTL     time.Duration // holder lease's remaining TTL
}

// Stats describes a semaphore.
type Stats struct {
	Limit   int64 // stored limit (0 when never used)
	Set     bool  // an operator set the limit (SetLimit): it overrides clients' limits
	InUse   int64 // permits held by live holders
	Holders []Holder
	Waiters int // live requests waiting
}

// Stats reads the semaphore's state in one round trip.
func (sem *Semaphore) Stats(ctx context.Context) (Stats, error) {
	if err := sem.checkName(); err != nil {
		return Stats{}, err
	}
	st, err := hook.Env(sem.s, sem.name).SemaphoreStats(ctx, sem.name)
	if err != nil {
		return Stats{}, fmt.Errorf("semaphore %q: stats: %w", sem.name, hook.Refusal(err))
	}
	out := Stats{Limit: st.Limit, Set: st.Set, Waiters: st.Waiters}
	for _, h := range st.Holders {
		sid := scripts.SessionOf(h.HoldID)
		out.Holders = append(out.Holders, Holder{Session: sid, Owner: h.Owner, N: h.N, Token: h.Token, TTL: h.TTL})
		out.InUse += h.N
	}
	return out, nil
}

// Reset force-releases every permit of the semaphore, whoever holds it
// (an operator's override: no lock delay applies). The holds taken away end
// with an error matching session.ErrLost, at once when their session's
// notification connection is up, else at its next heartbeat; until then
// only fencing tokens protect the resource. The queue is then served as
// after a release. Reset does not check the limit given to New. It returns
// how many live holds were taken away.
func (sem *Semaphore) Reset(ctx context.Context) (int, error) {
	if err := sem.checkName(); err != nil {
		return 0, err
	}
	n, err := hook.Env(sem.s, sem.name).SemaphoreReset(ctx, sem.name)
	if err != nil {
		return 0, fmt.Errorf("semaphore %q: reset: %w", sem.name, hook.Refusal(err))
	}
	return n, nil
}

func (sem *Semaphore) check(limit int64) error {
	if err := session.CheckName(sem.name); err != nil {
		return fmt.Errorf("semaphore: %w", err) // err quotes the name
	}
	if limit <= 0 || limit > MaxLimit {
		return fmt.Errorf("semaphore %q: limit %d: %w", sem.name, limit, ErrInvalidLimit)
	}
	return sem.s.Err()
}

// checkName is check for the calls that do not use the limit.
func (sem *Semaphore) checkName() error {
	if err := session.CheckName(sem.name); err != nil {
		return fmt.Errorf("semaphore: %w", err) // err quotes the name
	}
	return sem.s.Err()
}
