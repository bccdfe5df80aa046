package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/clock"
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
// until Release or loss. A waiting Claim whose ctx has ended returns ctx's
// cause and no hold, also when a grant reaches it at that moment (it gives
// the grant back). Its type is internal: it is for leasehold's own
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
	var w *waitEntry
	if wait {
		w = s.waiters.add(hid, r)
		note = w.ch
		defer s.waiters.remove(hid)
	}
	pause := minRetry       // between attempts that failed on a Redis error
	acquireUnknown := false // an attempt failed with an unknown outcome (see Hold.acquireUnknown)
	// notBefore is a time before which hid was surely not granted: the send
	// time of the last attempt answered with no grant (or start); unsure
	// tells whether an attempt failed with an unknown outcome since.
	notBefore, unsure := start, false
	for {
		recheck := *s.recheck.Load()
		sent := time.Now()
		next, err := s.attempt(ctx, r, hid, wait)
		switch {
		case err == nil && next.Status == scripts.Granted && wait && ctx.Err() != nil:
			return nil, nil, s.giveUp(ctx, r, hid) // granted as ctx ended: give it back
		case err == nil && next.Status == scripts.Granted:
			// Granted by this attempt, or by an earlier one whose outcome
			// was unknown, or handed over to it while it waited (a re-check
			// that wins the race with the notification answers granted).
			granted := sent
			if unsure || wait {
				granted = notBefore
			}
			return s.addHold(r, hid, next.Resource, next.Token, start, s.keysFrom(granted, w), false, acquireUnknown)
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
			acquireUnknown, unsure = true, true
			s.opt.Logger.Warn("acquire failed; retrying", "session", s.id, "kind", r.Kind.String(),
				"name", r.Name, "err", err, "retry_in", pause)
			next = scripts.Grant{Wait: pause}
			pause = min(2*pause, maxRetry)
		case !wait:
			return nil, nil, scripts.ErrBusy
		default:
			pause = minRetry
			notBefore, unsure = sent, false
		}
		// Re-check at least once per TTL: the send time of the last attempt
		// answered "not granted" bounds a hand-off's keys (see keysFrom),
		// also while a restart grace longer than the TTL runs.
		t := time.NewTimer(min(recheckAfter(next.Wait), s.opt.TTL))
		select {
		case n := <-note:
			t.Stop()
			if ctx.Err() != nil {
				return nil, nil, s.giveUp(ctx, r, hid) // handed over as ctx ended: give it back
			}
			if n.token != 0 {
				if err := s.confirm(ctx); err != nil {
					s.withdraw(r, hid)
					return nil, nil, fmt.Errorf("session: acquire %s %q: hand-off rolled back: %w", r.Kind, r.Name, relabel(err))
				}
				return s.addHold(r, hid, n.resource, n.token, start, s.keysFrom(notBefore, w), true, acquireUnknown)
			}
		case <-t.C:
		case <-recheck:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return nil, nil, s.giveUp(ctx, r, hid)
		case <-s.ctx.Done():
			t.Stop()
			return nil, nil, context.Cause(s.ctx)
		}
	}
}

// giveUp is the exit of a waiting Claim whose ctx has ended: it withdraws
// hid and returns ctx's cause. A grant that reaches the wait as ctx ends (a
// hand-off ready in the same select as ctx.Done, or a re-check answered
// granted) is given back this way too, so that a Claim whose ctx ended
// never returns a hold (as in golang.org/x/sync/semaphore, go.dev/issue/63615):
// the release hands the resource on to the next waiter.
func (s *Session) giveUp(ctx context.Context, r scripts.Resource, hid string) error {
	s.withdraw(r, hid)
	return context.Cause(ctx)
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
	return s.env.AcquireUntil(ctx, s.Deadline(), r, hid, wait)
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

// keysFrom returns the time from which a grant surely keeps the keys of
// its hold for heldFor: the grant's keys expire at least held_ms (see
// common.lua) after it, and granted is no later than it. A hold that
// waited (w) may have been handed over long after granted: its keys are
// kept from the last heartbeat that kept the wait's hold keys, if later (a
// hand-off after that heartbeat keeps them held_ms from the hand-off; one
// before it, from the heartbeat's keep, which is longer).
func (s *Session) keysFrom(granted time.Time, w *waitEntry) time.Time {
	if w != nil {
		if k := w.keptAt(); k.After(granted) {
			return k
		}
	}
	return granted
}

// heldFor is how long a grant keeps the keys of a hold of this session at
// least: held_ms in common.lua, 2 * TTL + LockDelay.
func (s *Session) heldFor() time.Duration { return 2*s.opt.TTL + s.opt.LockDelay }

// keepFor is how long each heartbeat that keeps a hold's keys alive keeps
// them: 3 * TTL + LockDelay (see heartbeat.lua). A session that crashed
// leaves keys that expire at most 2 * TTL + LockDelay after its lease.
func (s *Session) keepFor() time.Duration { return 3*s.opt.TTL + s.opt.LockDelay }

// addHold registers a granted hold. start is when the caller asked for it;
// keysFrom when its keys were surely kept for heldFor (see keysFrom);
// handoff tells whether a releasing script handed it over; acquireUnknown
// whether an acquire attempt for it failed with an unknown outcome (see
// Hold.acquireUnknown).
func (s *Session) addHold(r scripts.Resource, hid, resource string, token int64, start, keysFrom time.Time, handoff, acquireUnknown bool) (*Hold, any, error) {
	h, pub := s.newHold(r, hid, resource, token)
	h.acquireUnknown = acquireUnknown
	until := clock.Deadline(keysFrom, s.heldFor())
	h.setKeysUntil(until)
	if !s.holds.add(h) {
		return nil, nil, h.Err()
	}
	if h.keyed && h.endsAt().Before(s.Deadline()) {
		// Its keys may expire before the lease: end it then, unless a
		// heartbeat keeps them first (a grant that took longer than a TTL).
		s.post(func(l *loop) { l.armKeys() })
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

// waiters routes grant notifications to the goroutines waiting in Claim,
// and tells the heartbeat which keys the waits need kept alive.
type waiters struct {
	mu sync.Mutex            // guards m
	m  map[string]*waitEntry // guarded by mu: by hold id
}

// waitEntry is one Claim waiting for a grant.
type waitEntry struct {
	ch  chan notice      // buffer 1: the hand-off
	res scripts.Resource // immutable: what it waits for; the heartbeat builds the keys to keep from it
	// kept is the send time of the last heartbeat that kept the keys a hold
	// of res will have; nil before the first. Written by the loop, which
	// handles one heartbeat at a time, so each is later than the one before.
	kept atomic.Pointer[time.Time]
}

// keptAt returns when the last heartbeat that kept w's keys was sent (zero
// before the first).
func (w *waitEntry) keptAt() time.Time {
	if k := w.kept.Load(); k != nil {
		return *k
	}
	return time.Time{}
}

func (w *waiters) add(hid string, r scripts.Resource) *waitEntry {
	e := &waitEntry{ch: make(chan notice, 1), res: r}
	w.mu.Lock()
	w.m[hid] = e
	w.mu.Unlock()
	return e
}

// all returns the waits.
func (w *waiters) all() []*waitEntry {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*waitEntry, 0, len(w.m))
	for _, e := range w.m {
		out = append(out, e)
	}
	return out
}

func (w *waiters) remove(hid string) {
	w.mu.Lock()
	delete(w.m, hid)
	w.mu.Unlock()
}

func (w *waiters) deliver(hid string, n notice) {
	w.mu.Lock()
	e := w.m[hid]
	w.mu.Unlock()
	if e != nil {
		select {
		case e.ch <- n:
		default:
		}
	}
}
