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
// taken (a mutex held by a live session: also during a restart grace, or
// with the caller's lease gone, as the script then reads no lease), or
// with an error matching ErrRestartGrace during a restart grace;
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
	h, _, err := s.tracedClaim(ctx, r, wait)
	return h, err
}

// ClaimPublic is Claim returning the public hold that wraps the Hold (see
// Public): internal/hook's Claim, so that a Hold need not point back to it.
func (s *Session) ClaimPublic(ctx context.Context, r scripts.Resource, wait bool) (any, error) {
	_, pub, err := s.tracedClaim(ctx, r, wait)
	return pub, err
}

// claim is Claim and ClaimPublic. It reads top to bottom: attempt, then
// as decide rules on each outcome, wait and attempt again, and end with
// the hold, or with an error after withdrawing what may be left of the
// hold id (the withdraw rule, on decide).
func (s *Session) claim(ctx context.Context, r scripts.Resource, wait bool) (*Hold, any, error) {
	if err := CheckName(r.Name); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", r.Kind, err) // err quotes the name
	}
	if err := s.usable(); err != nil {
		return nil, nil, err
	}
	start := time.Now()
	c := &claimer{s: s, r: r, hid: s.newHoldID(), wait: wait, start: start, notBefore: start, pause: minRetry}
	if wait {
		c.w = s.waiters.add(c.hid, r)
		defer s.waiters.remove(c.hid)
	}
	o := c.try(ctx)
	for {
		st, err := decide(o)
		switch st {
		case stepGrant:
			traceGranted(ctx, o.g.Token, o.ev == handedOff)
			return c.grant(o)
		case stepFail:
			return nil, nil, err
		case stepWithdraw:
			s.withdraw(r, c.hid)
			return nil, nil, err
		case stepLose:
			s.post(func(l *loop) { l.lose(err) })
			return nil, nil, err
		case stepAttempt:
			o = c.try(ctx)
		default: // stepWait, stepRetry
			if st == stepWait {
				traceQueued(ctx, o.g.Position)
			}
			o = c.await(ctx, c.pace(st, o))
		}
	}
}

// step is what a claim does next, as decide rules.
type step int8

const (
	// stepGrant returns the hold granted to the hold id.
	stepGrant step = iota
	// stepWait waits for a hand-off, a re-check (the reply's hint, at
	// most a TTL away), ctx's end or the session's, then rules on it.
	stepWait
	// stepRetry waits out a pause after an attempt that failed with an
	// unknown outcome (as stepWait does), then attempts again with the same
	// hold id, which keeps its place in the queue: the scripts are
	// idempotent per hold id.
	stepRetry
	// stepAttempt sends the next acquire attempt at once.
	stepAttempt
	// stepFail returns the error: nothing of the hold id is left in Redis
	// that it would have to withdraw.
	stepFail
	// stepWithdraw withdraws the hold id (see Session.withdraw), then
	// returns the error: an attempt may have queued or granted it.
	stepWithdraw
	// stepLose ends the session with the error, which says that its lease
	// is gone, and returns it; the lease's end leaves nothing to withdraw.
	stepLose
)

// event is what brought an outcome.
type event int8

const (
	// replied: an acquire attempt answered (g) or failed (err).
	replied event = iota
	// handedOff: a releasing script handed the hold id a grant (g, Status
	// Granted) while the claim waited; err is confirm's, which is not asked
	// once ctx has ended.
	handedOff
	// woke: a wait ended without a grant: its timer, the session's re-check
	// signal or a re-check notice, ctx's end, or the session's.
	woke
)

// outcome is all that decide rules on: what one step of a claim learned,
// with ctx and the session as they were just after it.
type outcome struct {
	r    scripts.Resource // the claim's, for its errors
	hid  string           // the claim's hold id, for its errors
	wait bool             // the claim queues and waits when the resource is taken

	ev   event
	g    scripts.Grant // replied: the reply; handedOff: the grant
	err  error         // replied: the attempt's error; handedOff: confirm's
	sent time.Time     // replied: when the attempt was sent

	canceled error // ctx's cause once ctx has ended, else nil
	ended    error // the session's end (see usable) once it has ended, else nil
}

// decide rules on the outcome of one step of a claim: what to do next,
// and the error to return for the steps that end the claim. It has no side
// effects: the claim's loop performs the step.
//
// The withdraw rule: an exit after a step that may have left the hold id
// queued or granted in Redis withdraws it (stepWithdraw), so that no grant
// is ever left to a Claim that did not return it, and an attempt for it
// that arrives late (delayed in the network, or resent on a new connection)
// can neither queue nor be granted. That is:
//   - a grant that reaches a waiting claim whose ctx has ended, by its
//     attempt's reply or by a hand-off (both can be ready in the wait's
//     select as ctx ends): it is given back, so that a Claim whose ctx
//     ended never returns a hold (as in golang.org/x/sync/semaphore,
//     go.dev/issue/63615) and the release hands the resource on;
//   - a grant rolled back because too few replicas acknowledged it
//     (ErrNotReplicated), or a hand-off that confirm could not confirm;
//   - an attempt that failed and will not be retried: without wait, on a
//     refusal, on ctx's end or the session's. Its outcome is unknown (it
//     may have run), and a refused call inside a script may come after the
//     script queued the hold id. (After the session's end a withdrawal is
//     not needed, as below, but costs nothing.)
//   - ctx's end while the claim waits (queued, or retrying an attempt whose
//     outcome was unknown).
//
// The exits on a reply that leaves nothing of the hold id do not withdraw
// it (stepFail): busy or a restart grace without wait, withdrawn (only a
// claim that already gave up withdraws its hold id), a limit mismatch or a
// non-member (the scripts leave no grant and no queue entry then, and
// withdraw the hold id themselves if needed), the lease gone (stepLose);
// nor does the session's end seen while waiting: its lease is gone, and
// with it whatever the hold id left.
//
// The other rows: a reply that grants, to a claim without wait or with ctx
// alive, is the grant (stepGrant; a claim that does not wait returns the
// grant although its ctx has ended: its attempt is over); busy or a restart
// grace with wait waits (stepWait; ctx's end is seen in the wait); any
// other error while waiting (a dropped connection, a restarting server, a
// timeout) does not end the wait: it is retried (stepRetry); a wait that
// woke without a grant attempts again (stepAttempt).
func decide(o outcome) (step, error) {
	switch {
	case o.ev == woke:
		return decideWoke(o)
	case o.err != nil:
		return decideFailed(o)
	}
	return decideAnswered(o)
}

// decideWoke is decide for a wait that ended without a grant. The
// session's end comes first: it needs no withdrawal.
func decideWoke(o outcome) (step, error) {
	switch {
	case o.ended != nil:
		return stepFail, o.ended
	case o.canceled != nil:
		return stepWithdraw, o.canceled
	}
	return stepAttempt, nil
}

// decideFailed is decide for an attempt, or a hand-off's confirmation,
// that failed with o.err.
func decideFailed(o outcome) (step, error) {
	what := fmt.Sprintf("acquire %s %q", o.r.Kind, o.r.Name)
	switch {
	case o.ev == handedOff:
		return stepWithdraw, fmt.Errorf("session: %s: hand-off rolled back: %w", what, relabel(o.err))
	case errors.Is(o.err, scripts.ErrLimitMismatch) || errors.Is(o.err, scripts.ErrNotMember):
		return stepFail, o.err
	case errors.Is(o.err, scripts.ErrNotReplicated):
		return stepWithdraw, fmt.Errorf("session: %s: grant rolled back: %w", what, relabel(o.err))
	case o.ended != nil:
		return stepWithdraw, o.ended
	case o.canceled != nil:
		return stepWithdraw, o.canceled
	case !o.wait || scripts.Refused(o.err):
		return stepWithdraw, redisErr(what, o.err)
	}
	return stepRetry, nil
}

// decideAnswered is decide for an attempt answered with o.g, or a
// confirmed hand-off.
func decideAnswered(o outcome) (step, error) {
	switch o.g.Status {
	case scripts.Granted:
		if o.wait && o.canceled != nil {
			return stepWithdraw, o.canceled
		}
		return stepGrant, nil
	case scripts.Withdrawn:
		return stepFail, fmt.Errorf("session: acquire %s %q: hold id %s was withdrawn", o.r.Kind, o.r.Name, o.hid)
	case scripts.LeaseGone:
		return stepLose, fmt.Errorf("%w: the lease no longer exists on the server", ErrLeaseLost)
	case scripts.Grace:
		if !o.wait {
			return stepFail, graceErr(o.g.Wait)
		}
	}
	if !o.wait {
		return stepFail, scripts.ErrBusy
	}
	return stepWait, nil
}

// claimer is one Claim in progress. Only the goroutine of the Claim uses
// it.
type claimer struct {
	// Immutable after claim sets them.
	s     *Session
	r     scripts.Resource
	hid   string
	wait  bool
	w     *waitEntry // with wait: where hand-offs arrive; else nil
	start time.Time  // when the caller asked

	recheck <-chan struct{} // the session's re-check signal as the last attempt was sent
	pause   time.Duration   // the wait after the next attempt that fails with an unknown outcome
	// notBefore is a time before which the hold id was surely not granted:
	// the send time of the last attempt answered not granted (or start).
	notBefore time.Time
	// acquireUnknown tells whether an attempt failed with an unknown
	// outcome (see Hold.acquireUnknown).
	acquireUnknown bool
	// tried tells whether an attempt of hid was sent, or may have been:
	// only the first may tell the script that no queue holds hid yet.
	tried bool
}

// try sends an acquire attempt and returns its outcome.
func (c *claimer) try(ctx context.Context) outcome {
	c.recheck = *c.s.recheck.Load() // before sending: a re-check signalled meanwhile is not missed
	sent := time.Now()
	first := !c.tried
	c.tried = true
	g, err := c.s.attempt(ctx, c.r, c.hid, c.wait, first)
	return c.observe(ctx, outcome{ev: replied, g: g, err: err, sent: sent})
}

// observe returns o completed with the claim and with the state of ctx and
// of the session now.
func (c *claimer) observe(ctx context.Context, o outcome) outcome {
	o.r, o.hid, o.wait = c.r, c.hid, c.wait
	if ctx.Err() != nil {
		o.canceled = context.Cause(ctx)
	}
	o.ended = c.s.usable()
	return o
}

// pace keeps the claim's account of a wait (stepWait) or a retry
// (stepRetry) after outcome o, and returns how long to wait for a hand-off
// before the next attempt.
func (c *claimer) pace(st step, o outcome) time.Duration {
	if st == stepRetry {
		c.acquireUnknown = true
		c.s.opt.Logger.Warn("acquire failed; retrying", "session", c.s.id, "kind", c.r.Kind.String(),
			"name", c.r.Name, "err", o.err, "retry_in", c.pause)
		d := c.pause
		c.pause = min(2*c.pause, maxRetry)
		return recheckAfter(d)
	}
	c.pause = minRetry
	c.notBefore = o.sent
	return recheckAfter(o.g.Wait)
}

// await waits up to d for a hand-off, and returns its outcome, or that of
// what ended the wait first: the timer, the session's re-check signal,
// ctx's end or the session's. Only a claim with wait waits.
func (c *claimer) await(ctx context.Context, d time.Duration) outcome {
	// Re-check at least once per TTL: the send time of the last attempt
	// answered "not granted" bounds a hand-off's keys (see keysFrom), also
	// while a restart grace longer than the TTL runs.
	t := time.NewTimer(min(d, c.s.opt.TTL))
	defer t.Stop()
	o := outcome{ev: woke}
	select {
	case n := <-c.w.ch:
		if n.token != 0 { // else a re-check notice
			o.ev = handedOff
			o.g = scripts.Grant{Status: scripts.Granted, Token: n.token, Resource: n.resource}
		}
	case <-t.C:
	case <-c.recheck:
	case <-ctx.Done():
	case <-c.s.ctx.Done():
	}
	o = c.observe(ctx, o)
	if o.ev == handedOff && o.canceled == nil {
		o.err = c.s.confirm(ctx) // a grant that will be given back needs no confirmation
	}
	return o
}

// grant registers the hold that o granted. A claim without wait made one
// attempt: it was granted when it was sent. A waiting claim's grant may
// come from an earlier attempt whose outcome was unknown, or have been
// handed over while it waited (a re-check that wins the race with the
// notification answers granted): it counts from notBefore.
func (c *claimer) grant(o outcome) (*Hold, any, error) {
	granted := o.sent
	if c.wait {
		granted = c.notBefore
	}
	return c.s.addHold(c.r, c.hid, o.g.Resource, o.g.Token, c.start, c.s.keysFrom(granted, c.w),
		o.ev == handedOff, c.acquireUnknown)
}

// withdraw releases hid, or takes it out of r's queue, from the loop, which
// retries until Redis confirms. Claim withdraws by decide's withdraw rule.
func (s *Session) withdraw(r scripts.Resource, hid string) {
	s.post(func(l *loop) { l.release(pendingRelease{r: r, hid: hid}) })
}

// attempt runs one acquire attempt (first: hid's first; see
// scripts.Env.AcquireUntil); with wait, it first makes sure the session's
// notification channel is subscribed, so no hand-off is missed.
func (s *Session) attempt(ctx context.Context, r scripts.Resource, hid string, wait, first bool) (scripts.Grant, error) {
	if wait {
		if err := s.subscribe(ctx, s.ownChannel); err != nil {
			return scripts.Grant{}, err
		}
	}
	return s.env.AcquireUntil(ctx, s.Deadline(), r, hid, wait, first)
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
		h.ended.add(func() { s.met.holdEnded(kind, context.Cause(h.ctx)) })
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
