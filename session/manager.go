package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/redis/rueidis"
)

// Manager supervises sessions on one client: it hands out the live session,
// and opens a new one after a loss, retrying while Redis is down. It is safe
// for concurrent use.
type Manager struct {
	c rueidis.Client
	o Options

	lock chan struct{} // held while a session is being opened

	mu     sync.Mutex
	cur    *Session
	closed bool

	ended sync.WaitGroup // closes of ended sessions, waited for by Close
}

// NewManager returns a Manager that opens sessions with options o on client
// c, which the caller owns and keeps open until after Close. Invalid options
// are reported by Session and Run. Build c as New asks: with DisableCache set
// and a ConnWriteTimeout below o.TTL (TTL/2, as Dial sets for its own
// client).
func NewManager(c rueidis.Client, o Options) *Manager {
	return &Manager{c: c, o: o, lock: make(chan struct{}, 1)}
}

// Session returns the live session, opening a new one if there is none or
// the last one ended. While Redis cannot be reached it retries with
// exponential backoff until ctx ends. Invalid options return an error
// matching ErrInvalidOptions at once.
func (m *Manager) Session(ctx context.Context) (*Session, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: Session on a nil *Manager", ErrInvalidOptions)
	}
	if s, err := m.current(); s != nil || err != nil {
		return s, err
	}
	select {
	case m.lock <- struct{}{}:
		defer func() { <-m.lock }()
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if s, err := m.current(); s != nil || err != nil {
		return s, err
	}
	if _, err := m.o.withDefaults(); err != nil {
		return nil, err
	}
	if m.c == nil {
		return nil, fmt.Errorf("%w: NewManager was given a nil client", ErrInvalidOptions)
	}
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 50 * time.Millisecond
	bo.MaxInterval = 2 * time.Second
	s, err := backoff.Retry(ctx, func() (*Session, error) {
		actx, cancel := context.WithTimeout(ctx, max(m.o.TTL, time.Second))
		defer cancel()
		s, err := New(actx, m.c, m.o)
		if errors.Is(err, ErrInvalidOptions) {
			// The namespace's restart grace refuses these options: only
			// changing them can fix that.
			return nil, backoff.Permanent(err)
		}
		if err != nil {
			m.o.logger().Warn("opening a session failed; retrying", "err", err)
		}
		return s, err
	}, backoff.WithBackOff(bo), backoff.WithMaxElapsedTime(0))
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		s.Close()
		return nil, ErrManagerClosed
	}
	m.cur = s
	return s, nil
}

func (m *Manager) current() (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrManagerClosed
	}
	if m.cur != nil && m.cur.Err() == nil {
		return m.cur, nil
	}
	if old := m.cur; old != nil {
		// Ended: release what is left and wait for its goroutines, apart.
		// After a loss to an unreachable Redis its cleanup can take up to
		// a TTL, which must hold up neither this call (it honours ctx)
		// nor the other callers waiting for m.mu.
		m.cur = nil
		m.ended.Go(func() { _ = old.Close() })
	}
	return nil, nil
}

// Run runs fn with the live session and a context canceled when ctx ends or
// the session ends. A nil fn (or Manager) returns an error matching
// ErrInvalidOptions at once. When fn returns after the session's lease was
// lost, Run runs fn again on a new session; otherwise it returns fn's
// result. It also returns when ctx ends (with ctx's cause), or when no
// session can be opened (invalid options, Close).
func (m *Manager) Run(ctx context.Context, fn func(ctx context.Context, s *Session) error) error {
	if fn == nil {
		return fmt.Errorf("%w: Run was given a nil function", ErrInvalidOptions)
	}
	for {
		s, err := m.Session(ctx)
		if err != nil {
			return err
		}
		rctx, cancel := context.WithCancelCause(ctx)
		stop := context.AfterFunc(s.Context(), func() { cancel(context.Cause(s.Context())) })
		err = fn(rctx, s)
		stop()
		cancel(nil)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if !errors.Is(s.Err(), ErrLost) {
			return err
		}
		m.o.logger().Warn("session lost; running again on a new session", "session", s.ID(), "cause", s.Err(), "fn_err", err)
	}
}

// Close closes the current session and makes every later call fail with
// ErrManagerClosed. It waits for the goroutines of every session it opened.
func (m *Manager) Close() error {
	m.mu.Lock()
	s := m.cur
	m.cur, m.closed = nil, true
	m.mu.Unlock()
	defer m.ended.Wait()
	if s != nil {
		if err := s.Close(); err != nil {
			return fmt.Errorf("session: manager close: %w", err)
		}
	}
	return nil
}
