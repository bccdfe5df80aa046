package lease

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

// Pauses between acquire attempts that failed on a Redis error while waiting.
const (
	minRetry = 10 * time.Millisecond
	maxRetry = time.Second
)

// Claim asks for r on behalf of one of leasehold's primitives and returns the
// hold once granted. Without wait it fails with scripts.ErrBusy when r is
// taken, or with an error matching ErrRestartGrace during a restart grace;
// with wait it queues FIFO in Redis and blocks until granted (the grant is
// handed over by the releasing script and announced on the session's
// channel, so waiting sends no requests), until ctx ends, or until the
// session ends. A Redis error while waiting is retried unless retrying
// cannot fix it (ErrRedisRefused). ctx bounds only the wait: the hold lives
// until Release or loss. Its type is internal: it is for leasehold's own
// packages.
func (s *Session) Claim(ctx context.Context, r scripts.Resource, wait bool) (*Hold, error) {
	h, _, err := s.claim(ctx, r, wait)
	return h, err
}

// ClaimPublic is Claim returning the public hold that wraps the Hold (see
// Public): internal/hook's Claim, so that a Hold need not point back to it.
func (s *Session) ClaimPublic(ctx context.Context, r scripts.Resource, wait bool) (any, error) {
	_, pub, err := s.claim(ctx, r, wait)
	return pub, err
}

func (s *Session) claim(ctx context.Context, r scripts.Resource, wait bool) (*Hold, any, error) {
	if err := CheckName(r.Name); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", r.Kind, err) // err quotes the name
	}
	if err := s.usable(); err != nil {
		return nil, nil, err
	}
	hid := s.newHoldID()
	start := time.Now()
	var note chan notice
	if wait {
		note = s.waiters.add(hid)
		defer s.waiters.remove(hid)
	}
	pause := minRetry  // between attempts that failed on a Redis error
	uncertain := false // an attempt failed with an unknown outcome
	for {
		recheck := *s.recheck.Load()
		next, err := s.attempt(ctx, r, hid, wait)
		switch {
		case err == nil && next.Status == scripts.Granted:
			return s.addHold(r, hid, next.Resource, next.Token, start, false, uncertain)
		case err == nil && next.Status == scripts.Withdrawn:
			// Only a Claim that already gave up withdraws its hold id.
			return nil, nil, fmt.Errorf("session: acquire %s %q: hold id %s was withdrawn", r.Kind, r.Name, hid)
		case err == nil && next.Status == scripts.LeaseGone:
			cause := fmt.Errorf("%w: the lease no longer exists on the server", ErrLeaseLost)
			s.post(func(l *loop) { l.lose(cause) })
			return nil, nil, cause
		case err == nil && next.Status == scripts.Grace && !wait:
			return nil, nil, graceErr(next.Wait)
		case errors.Is(err, scripts.ErrLimitMismatch) || errors.Is(err, scripts.ErrNotMember):
			// The acquire scripts' rule: with these replies they leave no
			// grant and no queue entry for hid (they withdraw it if needed).
			return nil, nil, err
		case errors.Is(err, scripts.ErrNotReplicated):
			s.withdraw(r, hid)
			return nil, nil, fmt.Errorf("session: acquire %s %q: grant rolled back: %w", r.Kind, r.Name, relabel(err))
		case err != nil && (!wait || scripts.Refused(err) || ctx.Err() != nil || s.usable() != nil):
			// The attempt may have queued or granted hid: withdraw it.
			s.withdraw(r, hid)
			if e := s.usable(); e != nil {
				return nil, nil, e
			}
			if ctx.Err() != nil {
				return nil, nil, context.Cause(ctx)
			}
			return nil, nil, redisErr(fmt.Sprintf("acquire %s %q", r.Kind, r.Name), err)
		case err != nil:
			// A Redis error while waiting (a dropped connection, a restarting
			// server) does not end the wait, unless retrying cannot fix it (a
			// permission, a read-only replica: above): retry with the same
			// hold id, which keeps its place in the queue (the scripts are
			// idempotent per id).
			uncertain = true
			s.opt.Logger.Warn("acquire failed; retrying", "session", s.id, "kind", r.Kind.String(),
				"name", r.Name, "err", err, "retry_in", pause)
			next = scripts.Grant{Wait: pause}
			pause = min(2*pause, maxRetry)
		case !wait:
			return nil, nil, scripts.ErrBusy
		default:
			pause = minRetry
		}
		t := time.NewTimer(recheckAfter(next.Wait))
		select {
		case n := <-note:
			t.Stop()
			if n.token != 0 {
				if err := s.confirm(ctx); err != nil {
					s.withdraw(r, hid)
					return nil, nil, fmt.Errorf("session: acquire %s %q: hand-off rolled back: %w", r.Kind, r.Name, relabel(err))
				}
				return s.addHold(r, hid, n.resource, n.token, start, true, uncertain)
			}
		case <-t.C:
		case <-recheck:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			s.withdraw(r, hid)
			return nil, nil, context.Cause(ctx)
		case <-s.ctx.Done():
			t.Stop()
			return nil, nil, context.Cause(s.ctx)
		}
	}
}

// withdraw releases hid, or takes it out of r's queue, from the loop, which
// retries until Redis confirms. The rule of Claim's exits: an exit after an
// attempt that may have queued or granted hid (a grant it will not return,
// a Redis error with an unknown outcome or one that Redis refused, maybe
// inside a script that had queued hid, ctx's end while queued) withdraws
// it; the exits on a reply that leaves nothing for hid (busy or a restart
// grace without wait, withdrawn, limit mismatch, not a member, lease gone)
// do not, nor does the session's end (its lease is gone, so whatever hid
// left is dead).
func (s *Session) withdraw(r scripts.Resource, hid string) {
	s.post(func(l *loop) { l.release(pendingRelease{r: r, hid: hid}) })
}

// attempt runs one acquire attempt; with wait, it first makes sure the
// session's notification channel is subscribed, so no hand-off is missed.
func (s *Session) attempt(ctx context.Context, r scripts.Resource, hid string, wait bool) (scripts.Grant, error) {
	if wait {
		if err := s.subscribe(ctx, s.ownChannel); err != nil {
			return scripts.Grant{}, err
		}
	}
	opctx, cancel := s.opCtx(ctx)
	defer cancel()
	return s.env.Acquire(opctx, r, hid, wait)
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

// addHold registers a granted hold. start is when the caller asked for it;
// handoff tells whether a releasing script handed it over; uncertain whether
// an attempt for it failed with an unknown outcome (see Hold.uncertain).
func (s *Session) addHold(r scripts.Resource, hid, resource string, token int64, start time.Time, handoff, uncertain bool) (*Hold, any, error) {
	h, pub := s.newHold(r, hid, resource, token)
	h.uncertain = uncertain
	if !s.holds.add(h) {
		return nil, nil, h.Err()
	}
	if err := h.Err(); err != nil {
		return nil, nil, err
	}
	if s.met != nil {
		kind := r.Kind.String()
		s.met.holdGranted(kind, time.Since(start), handoff)
		context.AfterFunc(h.ctx, func() { s.met.holdEnded(kind, context.Cause(h.ctx)) })
	}
	return h, pub, nil
}

// notice is a grant handed over by a releasing script.
type notice struct {
	token    int64
	resource string
}

// waiters routes grant notifications to the goroutines waiting in Claim.
type waiters struct {
	mu sync.Mutex             // guards m
	m  map[string]chan notice // guarded by mu: buffer 1, by hold id
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
