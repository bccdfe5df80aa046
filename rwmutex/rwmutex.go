package rwmutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/session"
)

// RWMutex is a named read-write mutex in a session's namespace. It starts no
// goroutines and is safe for concurrent use. Every RLock and Lock call is a
// hold of its own: two read holds of one session are two readers, and a
// Lock while the same session holds a read hold waits for that read hold
// like for any other (see the package doc: there is no upgrade).
type RWMutex struct {
	s    *session.Session
	name string
}

// New returns the read-write mutex name of session s. A name is 1 to
// session.MaxNameLen bytes of UTF-8 without control characters
// (session.CheckName); an invalid name makes every method fail with an error
// matching session.ErrInvalidName before anything is sent to Redis. The
// name space of read-write mutexes is apart from that of mutexes: a
// mutex.New(s, "x") and a rwmutex.New(s, "x") do not exclude each other.
func New(s *session.Session, name string) *RWMutex {
	return &RWMutex{s: s, name: name}
}

func (m *RWMutex) res(shared bool) scripts.Resource {
	return scripts.Resource{Kind: scripts.RWMutex, Name: m.name, Shared: shared}
}

// RLock blocks until a read (shared) hold is granted, ctx ends, or the
// session ends. Readers share the mutex with each other, in any session,
// but a reader that arrives while anyone waits queues behind them: a waiting
// writer is never overtaken. ctx bounds only the wait: the hold lives until
// Release or loss. During a restart grace RLock waits it out. On failure
// nothing is held: the error is ctx's cause, an error matching
// session.ErrLeaseLost or session.ErrClosed, or session.ErrRedisRefused
// (returned at once; other Redis errors are retried while waiting).
func (m *RWMutex) RLock(ctx context.Context) (*session.Hold, error) {
	return hook.Claim(ctx, m.s, m.res(true), true)
}

// Lock blocks until a write (exclusive) hold is granted: when no writer and
// no reader holds the mutex and every earlier waiter has been served. It
// fails as RLock does; ctx bounds only the wait.
func (m *RWMutex) Lock(ctx context.Context) (*session.Hold, error) {
	return hook.Claim(ctx, m.s, m.res(false), true)
}

// TryRLock takes a read hold if no writer holds the mutex and nobody waits
// for it, else returns ErrLocked at once; during a restart grace, when
// nothing is granted, it returns an error matching session.ErrRestartGrace
// instead. ctx bounds the one round trip.
func (m *RWMutex) TryRLock(ctx context.Context) (*session.Hold, error) {
	return m.try(ctx, true)
}

// TryLock takes a write hold if nobody holds the mutex and nobody waits for
// it, else returns ErrLocked at once (or an error matching
// session.ErrRestartGrace, as TryRLock). ctx bounds the one round trip.
func (m *RWMutex) TryLock(ctx context.Context) (*session.Hold, error) {
	return m.try(ctx, false)
}

func (m *RWMutex) try(ctx context.Context, shared bool) (*session.Hold, error) {
	h, err := hook.Claim(ctx, m.s, m.res(shared), false)
	if errors.Is(err, scripts.ErrBusy) {
		return nil, ErrLocked
	}
	return h, err
}

// Holder is a live hold of, or a live waiter for, a read-write mutex.
type Holder struct {
	Session string        // the holder's (or waiter's) session id
	Owner   string        // that session's Options.Owner
	Shared  bool          // a read hold (or a waiting reader)
	Token   int64         // holders: the hold's fencing token
	TTL     time.Duration // holders: the session lease's remaining TTL on the server
}

// Status describes a read-write mutex at one moment.
type Status struct {
	Writer  *Holder  // the writer, nil when none holds
	Readers []Holder // the readers, in no particular order
	Queue   []Holder // waiters, first served first; Token and TTL are 0
	Token   int64    // the last token granted (0 when none is recorded)
}

// QueuedReaders returns how many of st.Queue wait to read.
func (st Status) QueuedReaders() int {
	n := 0
	for _, w := range st.Queue {
		if w.Shared {
			n++
		}
	}
	return n
}

// QueuedWriters returns how many of st.Queue wait to write.
func (st Status) QueuedWriters() int { return len(st.Queue) - st.QueuedReaders() }

// Holders returns who holds the mutex and who waits for it, read in one
// round trip. Holds and waiters of sessions whose lease is gone are left
// out.
func (m *RWMutex) Holders(ctx context.Context) (Status, error) {
	if err := m.check(); err != nil {
		return Status{}, err
	}
	in, err := hook.Env(m.s, m.name).RWMutexInspect(ctx, m.name)
	if err != nil {
		return Status{}, fmt.Errorf("rwmutex %q: %w", m.name, hook.Refusal(err))
	}
	st := Status{Token: in.Token}
	conv := func(h scripts.RWHolder) Holder {
		return Holder{Session: scripts.SessionOf(h.HoldID), Owner: h.Owner, Shared: h.Shared, Token: h.Token, TTL: h.TTL}
	}
	for _, h := range in.Holders {
		if h.Shared {
			st.Readers = append(st.Readers, conv(h))
		} else {
			w := conv(h)
			st.Writer = &w
		}
	}
	for _, h := range in.Queue {
		st.Queue = append(st.Queue, conv(h))
	}
	return st, nil
}

// Reset force-releases the mutex: its writer, or all its readers. Their
// holds end with an error matching session.ErrLost, and the queue is served
// as by a release. It returns how many live holds were taken away.
func (m *RWMutex) Reset(ctx context.Context) (int, error) {
	if err := m.check(); err != nil {
		return 0, err
	}
	n, err := hook.Env(m.s, m.name).RWMutexReset(ctx, m.name)
	if err != nil {
		return 0, fmt.Errorf("rwmutex %q: reset: %w", m.name, hook.Refusal(err))
	}
	return n, nil
}

func (m *RWMutex) check() error {
	if err := session.CheckName(m.name); err != nil {
		return fmt.Errorf("rwmutex: %w", err) // err quotes the name
	}
	return m.s.Err()
}
