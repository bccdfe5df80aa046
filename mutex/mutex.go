package mutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/session"
)

// Mutex is a named mutex in a session's namespace. It starts no goroutines
// and is safe for concurrent use; two Lock calls on the same Mutex (or on two
// Mutex values of one name and session) are two different holds that exclude
// each other like holds of different sessions do.
type Mutex struct {
	s    *session.Session
	name string
}

// New returns the mutex name of session s. A name is 1 to
// session.MaxNameLen bytes of UTF-8 without control characters
// (session.CheckName); an invalid name makes every method fail with an error
// matching session.ErrInvalidName before anything is sent to Redis.
func New(s *session.Session, name string) *Mutex {
	return &Mutex{s: s, name: name}
}

func (m *Mutex) res() scripts.Resource { return scripts.Resource{Kind: scripts.Mutex, Name: m.name} }

// Lock blocks until the mutex is granted, ctx ends, or the session ends.
// ctx bounds only the wait: the hold lives until Release or loss. Waiters are
// served in arrival order; during a restart grace Lock waits it out. On
// failure nothing is held: the error is ctx's cause, an error matching
// session.ErrLeaseLost or session.ErrClosed, or session.ErrRedisRefused
// (returned at once: Redis refused a call for a reason retrying cannot fix,
// such as a missing ACL permission; other Redis errors are retried while
// waiting).
func (m *Mutex) Lock(ctx context.Context) (*session.Hold, error) {
	return hook.Claim(ctx, m.s, m.res(), true)
}

// TryLock acquires the mutex if it is free and nobody waits for it, else
// returns ErrLocked at once; during a restart grace, when nothing is
// granted, it returns an error matching session.ErrRestartGrace instead,
// unless a live session holds the mutex (its holder reclaimed it): that
// is ErrLocked, grace or not. ErrLocked also wins over the session's own
// loss (session.ErrLeaseLost, which a free mutex reports): the session's
// deadline and heartbeat report that.
// ctx bounds the one round trip.
func (m *Mutex) TryLock(ctx context.Context) (*session.Hold, error) {
	h, err := hook.Claim(ctx, m.s, m.res(), false)
	if errors.Is(err, scripts.ErrBusy) {
		return nil, ErrLocked
	}
	return h, err
}

// Holder describes the current state of a mutex.
type Holder struct {
	Session string        // holder session id; "" when the mutex is free
	Owner   string        // holder session's Options.Owner
	Token   int64         // fencing token of the current (or last) grant
	TTL     time.Duration // holder lease's remaining TTL on the server
	Waiters int           // live sessions' holds waiting in the queue
}

// Holder returns who holds the mutex now, read in one round trip.
func (m *Mutex) Holder(ctx context.Context) (Holder, error) {
	if err := m.check(); err != nil {
		return Holder{}, err
	}
	in, err := hook.Env(m.s, m.name).MutexInspect(ctx, m.name)
	if err != nil {
		return Holder{}, fmt.Errorf("mutex %q: %w", m.name, hook.Refusal(err))
	}
	sid := scripts.SessionOf(in.HoldID)
	return Holder{Session: sid, Owner: in.Owner, Token: in.Token, TTL: in.TTL, Waiters: in.Waiters}, nil
}

// Reset force-releases the mutex, whoever holds it, and grants it to the
// first live waiter. The old holder's hold ends with an error matching
// session.ErrLost. It reports whether a live hold was taken away.
func (m *Mutex) Reset(ctx context.Context) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	hid, err := hook.Env(m.s, m.name).MutexReset(ctx, m.name)
	if err != nil {
		return false, fmt.Errorf("mutex %q: reset: %w", m.name, hook.Refusal(err))
	}
	return hid != "", nil
}

func (m *Mutex) check() error {
	if err := session.CheckName(m.name); err != nil {
		return fmt.Errorf("mutex: %w", err) // err quotes the name
	}
	if err := m.s.Err(); err != nil {
		return err
	}
	return nil
}
