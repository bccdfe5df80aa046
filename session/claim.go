package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/scripts"
)

// Fallback re-check bounds while waiting: a lost notification delays a
// waiter by at most about the holder's remaining TTL.
const (
	minRecheck  = 10 * time.Millisecond
	idleRecheck = time.Second
)

// Claim asks for r on behalf of one of leasehold's primitives and returns the
// hold once granted. Without wait it fails with scripts.ErrBusy when r is
// taken; with wait it queues FIFO in Redis and blocks until granted (the
// grant is handed over by the releasing script and announced on the
// session's channel, so waiting sends no requests), until ctx ends, or until
// the session ends. ctx bounds only the wait: the hold lives until Release
// or loss. Its type is internal: it is for leasehold's own packages.
func (s *Session) Claim(ctx context.Context, r scripts.Resource, wait bool) (*Hold, error) {
	if err := CheckName(r.Name); err != nil {
		return nil, fmt.Errorf("%s %q: %w", r.Kind, r.Name, err)
	}
	if err := s.usable(); err != nil {
		return nil, err
	}
	hid := s.newHoldID()
	start := time.Now()
	var note chan notice
	if wait {
		note = s.waiters.add(hid)
		defer s.waiters.remove(hid)
	}
	for {
		if wait {
			if err := s.subscribe(ctx, s.ownChannel); err != nil {
				return nil, err
			}
		}
		recheck := *s.recheck.Load()
		opctx, cancel := s.opCtx(ctx)
		g, err := s.env.Acquire(opctx, r, hid, wait)
		cancel()
		if errors.Is(err, scripts.ErrLimitMismatch) || errors.Is(err, scripts.ErrNotMember) {
			// The acquire scripts' rule: with these replies they leave no
			// grant and no queue entry for hid (they withdraw it if needed).
			return nil, err
		}
		if errors.Is(err, scripts.ErrNotReplicated) {
			s.post(func(l *loop) { l.release(pendingRelease{r: r, hid: hid}) })
			return nil, fmt.Errorf("session: acquire %s %q: grant rolled back: %w", r.Kind, r.Name, err)
		}
		if err != nil {
			// The attempt may have queued or granted hid: withdraw it.
			s.post(func(l *loop) { l.release(pendingRelease{r: r, hid: hid}) })
			if e := s.usable(); e != nil {
				return nil, e
			}
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, fmt.Errorf("session: acquire %s %q: %w", r.Kind, r.Name, err)
		}
		switch g.Status {
		case scripts.Granted:
			return s.addHold(r, hid, g.Resource, g.Token, start, false)
		case scripts.LeaseGone:
			cause := fmt.Errorf("%w: the lease no longer exists on the server", ErrLeaseLost)
			s.post(func(l *loop) { l.lose(cause) })
			return nil, cause
		}
		if !wait {
			return nil, scripts.ErrBusy
		}
		t := time.NewTimer(recheckAfter(g.Wait))
		select {
		case n := <-note:
			t.Stop()
			if n.token != 0 {
				if err := s.confirm(ctx); err != nil {
					s.post(func(l *loop) { l.release(pendingRelease{r: r, hid: hid}) })
					return nil, fmt.Errorf("session: acquire %s %q: hand-off rolled back: %w", r.Kind, r.Name, err)
				}
				return s.addHold(r, hid, n.resource, n.token, start, true)
			}
		case <-t.C:
		case <-recheck:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			s.post(func(l *loop) { l.release(pendingRelease{r: r, hid: hid}) })
			return nil, context.Cause(ctx)
		case <-s.ctx.Done():
			t.Stop()
			return nil, context.Cause(s.ctx)
		}
	}
}

// confirm makes sure a grant handed over by another client has reached
// Options.ReplicaAck replicas (nothing to do without ReplicaAck).
func (s *Session) confirm(ctx context.Context) error {
	if s.env.Acks <= 0 {
		return nil
	}
	opctx, cancel := s.opCtx(ctx)
	defer cancel()
	ok, err := s.env.Confirm(opctx, s.id, s.opt.TTL)
	if err == nil && !ok {
		err = fmt.Errorf("%w: the lease no longer exists on the server", ErrLeaseLost)
	}
	return err
}

func recheckAfter(hint time.Duration) time.Duration {
	if hint <= 0 {
		return idleRecheck
	}
	return max(hint+minRecheck/2, minRecheck)
}

// addHold registers a granted hold with the loop. start is when the caller
// asked for it; handoff tells whether a releasing script handed it over.
func (s *Session) addHold(r scripts.Resource, hid, resource string, token int64, start time.Time, handoff bool) (*Hold, error) {
	h := s.newHold(r, hid, resource, token)
	if !s.call(func(l *loop) { l.addHold(h) }) {
		h.cancel(s.Err())
		return nil, s.Err()
	}
	if err := h.Err(); err != nil {
		return nil, err
	}
	if s.met != nil {
		kind := r.Kind.String()
		s.met.holdGranted(kind, time.Since(start), handoff)
		context.AfterFunc(h.ctx, func() { s.met.holdEnded(kind, context.Cause(h.ctx)) })
	}
	return h, nil
}

// CheckName returns an error matching ErrInvalidName unless name is a valid
// resource name: 1 to MaxNameLen bytes.
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidName, MaxNameLen)
	}
	return nil
}

// notice is a grant handed over by a releasing script.
type notice struct {
	token    int64
	resource string
}

// waiters routes grant notifications to the goroutines waiting in Claim.
type waiters struct {
	mu sync.Mutex
	m  map[string]chan notice
}

func (w *waiters) add(hid string) chan notice {
	ch := make(chan notice, 1)
	w.mu.Lock()
	w.m[hid] = ch
	w.mu.Unlock()
	return ch
}

func (w *waiters) remove(hid string) {
	w.mu.Lock()
	delete(w.m, hid)
	w.mu.Unlock()
}

func (w *waiters) deliver(hid string, n notice) {
	w.mu.Lock()
	ch := w.m[hid]
	w.mu.Unlock()
	if ch != nil {
		select {
		case ch <- n:
		default:
		}
	}
}
