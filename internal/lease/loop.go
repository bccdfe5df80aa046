package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/clock"
	"github.com/leasehold/leasehold/internal/scripts"
)

// loop is the session's actor: one goroutine that owns the local deadline,
// the heartbeat and deadline timers, the pending releases and the
// notification subscription (the hold table has its own mutex, see
// holdTable). Callers reach it through Session.reqs; its
// helper goroutines (one heartbeat, one release batch, one subscribe at a
// time) report back on buffered channels. Only the loop goroutine cancels the
// session context for a lost lease and closes Session.exited.
type loop struct {
	s *Session // immutable

	// Immutable after newLoop: the helpers' reply channels (buffer 1: at
	// most one helper of each kind is in flight) and the helpers' bound.
	beatDone    chan beatResult
	reclaimDone chan reclaimResult
	cleanDone   chan []pendingRelease // the releases that failed again
	subDone     chan subResult
	bg          context.Context    // canceled when the loop ends; bounds helpers
	stopBg      context.CancelFunc // called by shutdown
	wg          sync.WaitGroup     // the helpers; waited for by shutdown
	closing     sync.WaitGroup     // notification connections being given back (giveBack)
	log         *slog.Logger       // set by run: records go through the logQueue, never the user's handler here

	// Owned by the loop goroutine: everything below.
	acks          map[string]bool // revoked ids to acknowledge in the next heartbeat
	deadline      time.Time       // local lease deadline (published in Session.deadline)
	beatTimer     *time.Timer
	deadlineTimer *time.Timer
	keyTimer      *time.Timer // fires when a hold's keys may expire before the lease (see armKeys)
	beating       bool        // a heartbeat or reclaim helper is in flight
	backoff       *backoff.ExponentialBackOff

	pending    []pendingRelease // releases whose outcome is unknown; retried
	cleaning   bool             // a release batch helper is in flight
	cleanTimer *time.Timer      // retries failed releases
	cleanPause time.Duration

	sub        rueidis.DedicatedClient // the notification connection, nil when none
	subRelease func()
	subErr     <-chan error    // reports the loss of sub
	subDropped <-chan struct{} // the server dropped a subscription of sub
	subChans   map[string]bool // channels subscribed on sub
	subWant    []subWant       // subscribe requests not answered yet
	subbing    bool            // a subscribe helper is in flight

	exit     bool       // set by lose and close: run returns after this request
	closeErr chan error // set by close: the reply of Close

	// replID is the server's replication id as the last heartbeat (or the
	// open) reported it, "" when the server does not tell; until
	// verifyUntil, which a change of it sets, every heartbeat also checks
	// that Redis still records every hold (see verify.lua).
	replID      string
	verifyUntil time.Time
	// The last renewal's send time, round trip and server clock (Unix ms),
	// to notice a step of the server's clock (see noticeClockStep).
	lastSent     time.Time
	lastRTT      time.Duration
	lastServerMs int64
}

type beatResult struct {
	sent  time.Time
	recv  time.Time
	beat  scripts.Beat
	acked []string
	holds []*Hold      // the holds whose keys it kept alive
	nkeys []int        // how many keys of each of holds
	waits []*waitEntry // the waits whose keys it kept alive
	wkeys [][2]int     // per wait: how many keys, of which the first how many a hold will have
	gone  []string     // hold ids Redis no longer records (when it checked, see verify.lua)
	vErr  error        // the check failed (the renewal stands; the next heartbeat checks again)
	err   error
}

type reclaimResult struct {
	sent  time.Time
	holds []*Hold // the holds it reclaimed, or tried to
	lost  []string
	err   error
}

type pendingRelease struct {
	r   scripts.Resource
	hid string
}

type subResult struct {
	dc      rueidis.DedicatedClient // a new connection, or nil
	release func()
	errc    <-chan error
	dropped <-chan struct{}
	chans   []string
	err     error
}

func newLoop(s *Session, sent time.Time) *loop {
	l := &loop{
		s:           s,
		acks:        make(map[string]bool),
		deadline:    clock.Deadline(sent, s.opt.TTL),
		beatDone:    make(chan beatResult, 1),
		reclaimDone: make(chan reclaimResult, 1),
		cleanDone:   make(chan []pendingRelease, 1),
		subDone:     make(chan subResult, 1),
	}
	l.backoff = backoff.NewExponentialBackOff()
	l.backoff.InitialInterval = min(s.opt.Heartbeat/10, 50*time.Millisecond)
	l.backoff.MaxInterval = s.opt.Heartbeat / 2
	l.bg, l.stopBg = context.WithCancel(context.Background())
	l.beatTimer = time.NewTimer(s.nextBeat(sent).Sub(time.Now()))
	l.cleanTimer = time.NewTimer(time.Hour)
	l.cleanTimer.Stop()
	l.deadlineTimer = time.NewTimer(l.deadline.Sub(time.Now()))
	l.keyTimer = time.NewTimer(time.Hour)
	l.keyTimer.Stop()
	return l
}

func (l *loop) run() {
	defer close(l.s.exited)
	l.log = l.s.env.Log
	for !l.exit {
		select {
		case f := <-l.s.reqs:
			f(l)
		case r := <-l.beatDone:
			l.onBeat(r)
		case r := <-l.reclaimDone:
			l.onReclaim(r)
		case <-l.beatTimer.C:
			l.beat()
		case <-l.deadlineTimer.C:
			l.checkDeadline()
		case <-l.keyTimer.C:
			l.armKeys()
		case failed := <-l.cleanDone:
			l.cleaning = false
			l.pending = append(failed, l.pending...)
			l.retryClean(len(failed) > 0)
		case <-l.cleanTimer.C:
			l.clean()
		case r := <-l.subDone:
			l.onSubscribed(r)
		case err := <-l.subErr:
			l.onSubscriptionLost(err)
		case <-l.subDropped:
			l.onSubscriptionLost(errUnsubscribed)
		}
	}
	l.shutdown()
}

// beat starts a heartbeat unless one is in flight. The attempt may run until
// the local deadline: after it, a confirmation could not save the lease.
func (l *loop) beat() {
	if l.beating || l.exit {
		return
	}
	l.beating = true
	s := l.s
	acked := make([]string, 0, len(l.acks))
	for id := range l.acks {
		acked = append(acked, id)
	}
	sent := time.Now()
	// The keys of holds that may expire before the deadline this heartbeat
	// or the next one could confirm, plus the lock delay (so that a crashed
	// holder's keys outlive its lease by that much), and those of every
	// wait: a hold's keys every few heartbeats.
	holds := s.holds.due(sent.Add(s.opt.TTL + s.opt.LockDelay + 2*s.opt.Heartbeat))
	waits := s.waiters.all()
	var keep []string
	nkeys := make([]int, len(holds))
	for i, h := range holds {
		k := h.keys()
		nkeys[i] = len(k)
		keep = append(keep, k...)
	}
	wkeys := make([][2]int, len(waits))
	for i, w := range waits {
		k, held := s.env.K.KeptWaiting(w.res)
		wkeys[i] = [2]int{len(k), held}
		keep = append(keep, k...)
	}
	ctx, cancel := context.WithDeadline(l.bg, l.deadline)
	prev, check := l.replID, sent.Before(l.verifyUntil)
	l.wg.Go(func() {
		defer cancel()
		r := beatResult{sent: sent, acked: acked, holds: holds, nkeys: nkeys, waits: waits, wkeys: wkeys}
		r.beat, r.err = s.beatEnv.Heartbeat(ctx, s.id, s.opt.TTL, acked, keep, s.keepFor())
		r.recv = time.Now()
		id := r.beat.ReplID
		if r.err == nil && r.beat.State == scripts.Renewed && (check || (prev != "" && id != "" && id != prev)) {
			// The holds registered by now: a grant is registered once its
			// reply is in, and replies come in order on a connection.
			r.gone, r.vErr = s.env.Verify(ctx, s.id, held(s.holds.snapshot()))
		}
		l.beatDone <- r
	})
}

func (l *loop) onBeat(r beatResult) {
	l.beating = false
	s := l.s
	if r.err != nil {
		s.met.heartbeat("error", 0)
		wait := l.backoff.NextBackOff()
		if scripts.Refused(r.err) {
			// Retrying cannot fix it: the lease is lost at its deadline
			// unless someone fixes the cause meanwhile.
			l.log.Error("Redis refuses the heartbeat (check the Redis user's permissions, "+
				"and that the client talks to a master); retrying until the lease is lost",
				"session", s.id, "err", r.err, "retry_in", wait, "deadline_in", l.deadline.Sub(time.Now()))
		} else {
			l.log.Warn("heartbeat failed; retrying", "session", s.id, "err", r.err,
				"retry_in", wait, "deadline_in", l.deadline.Sub(time.Now()))
		}
		l.beatTimer.Reset(wait)
		return
	}
	switch r.beat.State {
	case scripts.Gone:
		s.met.heartbeat("lease_gone", 0)
		l.lose(fmt.Errorf("%w: the lease no longer exists on the server", ErrLeaseLost))
		return
	case scripts.Reclaimable:
		s.met.heartbeat("lease_gone", 0)
		l.reclaim()
		return
	}
	l.backoff.Reset()
	now := time.Now()
	s.met.heartbeat("ok", now.Sub(r.sent))
	l.confirmed(r.sent, now)
	for _, id := range r.acked {
		delete(l.acks, id)
	}
	s.holds.forgetEarly(now, s.opt.TTL)
	for _, id := range r.beat.Revoked {
		l.revoke(id)
	}
	l.noticeServer(r)
	l.kept(r)
	l.beatTimer.Reset(s.nextBeat(r.sent).Sub(now))
	l.clean()
}

// kept records what heartbeat r did with the keys it kept alive, then
// rearms the key timer.
func (l *loop) kept(r beatResult) {
	s := l.s
	until := clock.Deadline(r.sent, s.keepFor())
	i := 0
	keys := r.beat.Keys
	for j, h := range r.holds {
		h.kept(keys[i:i+r.nkeys[j]], until)
		i += r.nkeys[j]
	}
	for j, w := range r.waits {
		ok := true
		for _, st := range keys[i : i+r.wkeys[j][1]] {
			// Only a key kept counts (see keysFrom): one missing here may
			// exist on the other node of a slot migration.
			ok = ok && st == scripts.KeyKept
		}
		i += r.wkeys[j][0]
		if ok {
			w.kept.Store(&r.sent)
		}
	}
	l.armKeys()
}

// armKeys ends the holds whose keys may have expired, and sets the key
// timer to when the next one's may. Their keys normally outlive the lease
// (held_ms, and each heartbeat keeps them keepFor): this only ends holds
// whose keys a heartbeat could not keep (KeyRefused, as on a node the
// namespace's slot is migrating from) or a grant that took longer than a
// TTL.
func (l *loop) armKeys() {
	now := time.Now()
	ended, next := l.s.holds.expireKeys(now)
	for _, h := range ended {
		l.log.Warn("hold lost: its keys could not be kept alive in Redis", "session", l.s.id,
			"kind", h.res.Kind.String(), "resource", h.resource, "token", h.token)
		// Its keys may still exist (kept alive by a wait's heartbeat, or
		// longer-lived than the client could prove): release it, so that
		// no record of a hold nobody holds stays behind.
		l.release(pendingRelease{r: h.res, hid: h.hid})
	}
	if next.IsZero() {
		l.keyTimer.Stop()
		return
	}
	l.keyTimer.Reset(next.Sub(now))
}

// confirmed moves the deadline after a renewal sent at sent was confirmed.
func (l *loop) confirmed(sent, now time.Time) {
	s := l.s
	if d := clock.Deadline(sent, s.opt.TTL); d.After(l.deadline) {
		l.deadline = d
		s.deadline.Store(int64(d.Sub(s.base)))
		l.deadlineTimer.Reset(d.Sub(now))
	}
	s.met.deadline(s.id, l.deadline.Sub(now))
}

// reclaim recreates the lease and every hold after Redis lost its data,
// while the session is still inside its local deadline (nobody else can be
// granted anything during the restart grace). No heartbeat runs meanwhile.
func (l *loop) reclaim() {
	if l.exit {
		return
	}
	l.beating = true
	s := l.s
	live := s.holds.snapshot()
	holds := held(live)
	l.log.Warn("Redis lost its data; reclaiming the lease and holds", "session", s.id, "holds", len(holds))
	sent := time.Now()
	ctx, cancel := context.WithDeadline(l.bg, l.deadline)
	l.wg.Go(func() {
		defer cancel()
		lost, err := s.env.Reclaim(ctx, s.id, s.opt.Owner, s.opt.TTL, s.opt.LockDelay, holds)
		l.reclaimDone <- reclaimResult{sent: sent, holds: live, lost: lost, err: err}
	})
}

func (l *loop) onReclaim(r reclaimResult) {
	l.beating = false
	s := l.s
	switch {
	case errors.Is(r.err, scripts.ErrNotReclaimable):
		l.lose(fmt.Errorf("%w: the lease no longer exists on the server", ErrLeaseLost))
		return
	case r.err != nil:
		wait := l.backoff.NextBackOff()
		l.log.Warn("reclaim failed; retrying", "session", s.id, "err", r.err, "retry_in", wait)
		l.beatTimer.Reset(wait)
		return
	}
	l.backoff.Reset()
	now := time.Now()
	l.confirmed(r.sent, now)
	for _, id := range r.lost {
		s.holds.end(id, func(h *Hold) error {
			return lost(ReasonNotReclaimed, "%s could not be reclaimed after Redis lost its data", h.describe())
		})
	}
	// The reclaim recreated the holds' keys to live held_ms (see
	// reclaim.lua): after Redis lost its data, that is all they have.
	keysRecreated(r.holds, clock.Deadline(r.sent, s.heldFor()))
	l.armKeys()
	kept := s.holds.len()
	s.met.reclaimed(kept, len(r.lost))
	l.log.Warn("reclaimed after Redis lost its data", "session", s.id, "reclaimed", kept, "lost", len(r.lost))
	l.beatTimer.Reset(s.nextBeat(r.sent).Sub(now))
}

// held describes holds for the scripts that reclaim and verify them.
func held(holds []*Hold) []scripts.Held {
	out := make([]scripts.Held, 0, len(holds))
	for _, h := range holds {
		out = append(out, scripts.Held{R: h.reclaimed(), HoldID: h.hid, Token: h.token, Member: h.resource})
	}
	return out
}

// noticeServer handles what renewal r tells of the server beyond the
// lease: a changed replication id (a replica was promoted, or the server
// restarted) makes the heartbeats of the next TTL check that Redis still
// records every hold, and ends those it does not (a failover without
// ReplicaAck lost their grants, and the new master may grant them again);
// a step of the server's clock is logged.
func (l *loop) noticeServer(r beatResult) {
	s := l.s
	if id := r.beat.ReplID; id != "" {
		if l.replID != "" && id != l.replID {
			l.verifyUntil = r.recv.Add(s.opt.TTL)
			l.log.Warn("Redis replication id changed (failover or restart): checking that Redis still records every hold",
				"session", s.id)
		}
		l.replID = id
	}
	if r.vErr != nil {
		l.verifyUntil = r.recv.Add(s.opt.TTL) // check again at the next heartbeat
		l.log.Warn("checking the holds after a change of the Redis replication id failed; the next heartbeat checks again",
			"session", s.id, "err", r.vErr)
	}
	for _, id := range r.gone {
		s.holds.end(id, func(h *Hold) error {
			l.log.Warn("hold lost: Redis no longer records it (a failover lost its grant)", "session", s.id,
				"kind", h.res.Kind.String(), "resource", h.resource, "token", h.token)
			return lost(ReasonFailover, "Redis no longer records %s (a failover without ReplicaAck lost its grant)", h.describe())
		})
	}
	l.noticeClockStep(r)
}

// noticeClockStep logs a step of the server's clock between two renewals:
// Redis keeps key expiry as an absolute time of its own wall clock, so a
// forward step ends leases and held keys early (see docs/guarantees.md,
// "Clocks"). The server read its clock between a renewal's send and its
// reply, so the two readings differ from the local monotonic interval by
// at most the two round trips, plus a rate difference allowed at 5%.
func (l *loop) noticeClockStep(r beatResult) {
	rtt := r.recv.Sub(r.sent)
	if l.lastServerMs != 0 && r.beat.ServerMs != 0 {
		local := r.sent.Sub(l.lastSent)
		step := time.Duration(r.beat.ServerMs-l.lastServerMs)*time.Millisecond - local
		if tol := rtt + l.lastRTT + 50*time.Millisecond + local/20; step > tol || step < -tol {
			l.log.Warn("the Redis server's clock stepped between two heartbeats: a forward step ends leases and held keys early",
				"session", l.s.id, "step", step, "interval", local)
		}
	}
	l.lastSent, l.lastRTT, l.lastServerMs = r.sent, rtt, r.beat.ServerMs
}

// revoke ends hold id with ErrLost: the server says it was taken away.
func (l *loop) revoke(id string) {
	l.acks[id] = true
	if h := l.s.holds.revoke(id, time.Now()); h != nil {
		l.log.Warn("hold lost", "session", l.s.id, "kind", h.res.Kind.String(), "resource", h.resource, "token", h.token)
	}
}

func takenAway(h *Hold) error {
	return lost(ReasonRevoked, "%s was taken away (reset, or removed from its pool)", h.describe())
}

func (l *loop) checkDeadline() {
	now := time.Now()
	if now.Before(l.deadline) {
		l.deadlineTimer.Reset(l.deadline.Sub(now))
		return
	}
	l.lose(fmt.Errorf("%w: no heartbeat confirmed within the TTL (%v)", ErrLeaseLost, l.s.opt.TTL))
}

// lose ends the session with cause: every hold context is canceled at once.
// The loop then exits, releasing what it can in Redis on the way out.
func (l *loop) lose(cause error) {
	if l.exit {
		return
	}
	l.s.end(cause)
	l.log.Error("lease lost", "session", l.s.id, "holds", l.s.holds.len(), "cause", cause)
	l.exit = true
}

// close handles Session.Close.
func (l *loop) close(reply chan error) {
	l.closeErr = reply
	if !l.exit {
		l.s.end(ErrClosed)
		l.exit = true
	}
}

// release queues a release whose outcome is unknown and starts the retries.
func (l *loop) release(p pendingRelease) {
	l.s.holds.remove(p.hid)
	l.pending = append(l.pending, p)
	l.clean()
}

// clean runs the pending releases in one round trip, unless a batch is in flight.
func (l *loop) clean() {
	if l.cleaning || len(l.pending) == 0 || l.exit {
		return
	}
	l.cleaning = true
	batch := l.pending
	l.pending = nil
	s := l.s
	ctx, cancel := context.WithDeadline(l.bg, l.deadline)
	l.wg.Go(func() {
		defer cancel()
		var failed []pendingRelease
		for i, err := range releaseAll(ctx, s.env, batch) {
			if err != nil {
				failed = append(failed, batch[i])
			}
		}
		l.cleanDone <- failed
	})
}

// retryClean schedules the next attempt at the pending releases: soon after
// a failure (doubling up to half a heartbeat interval), at once when more
// were queued while a batch was in flight.
func (l *loop) retryClean(failed bool) {
	switch {
	case failed:
		l.cleanPause = min(max(2*l.cleanPause, 20*time.Millisecond), l.s.opt.Heartbeat/2)
		l.cleanTimer.Reset(l.cleanPause)
	case len(l.pending) > 0:
		l.cleanPause = 0
		l.clean()
	default:
		l.cleanPause = 0
	}
}

func releaseAll(ctx context.Context, env scripts.Env, ps []pendingRelease) []error {
	rs := make([]scripts.Resource, len(ps))
	hids := make([]string, len(ps))
	for i, p := range ps {
		rs[i], hids[i] = p.r, p.hid
	}
	return env.ReleaseMulti(ctx, rs, hids)
}

// cleanup releases ps (handing each to its next waiter) and deletes the lease.
//
// Both are idempotent, so a failure that is not Redis' reply (a
// connection that broke, as every idle one of a client does when Redis
// restarts, each found dead only by the call that uses it) is tried again,
// a few times (cleanupTries) within ctx.
func cleanup(ctx context.Context, s *Session, ps []pendingRelease) error {
	pause := 10 * time.Millisecond
	for try := 1; ; try++ {
		err := cleanupOnce(ctx, s, ps)
		if _, reply := rueidis.IsRedisErr(err); err == nil || reply || try == cleanupTries || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		pause *= 2
	}
}

// cleanupTries bounds the attempts of cleanup: a client has 4 connections
// to one Redis by default (rueidis' PipelineMultiplex 2), and each call
// picks one at random; with Redis down, every attempt fails at once, and
// the pauses between them add 150 ms to Close.
const cleanupTries = 5

func cleanupOnce(ctx context.Context, s *Session, ps []pendingRelease) error {
	var err error
	if len(ps) > 0 {
		for _, e := range releaseAll(ctx, s.env, ps) {
			if e != nil {
				err = e
				break
			}
		}
	}
	if ctx.Err() != nil {
		return cmp.Or(err, ctx.Err())
	}
	if e := s.env.CloseLease(ctx, s.id); e != nil && err == nil {
		err = e
	}
	return err
}

// shutdown runs when the loop exits: it stops the helpers, then releases every
// hold and deletes the lease (best effort, bounded by the TTL), and replies to
// Close. One cutoff bounds all of it: Close takes at most about one TTL even
// when Redis hangs. Helpers in flight end by the local deadline, which is
// never later than the cutoff.
func (l *loop) shutdown() {
	s := l.s
	s.met.sessionEnded(s.id, context.Cause(s.ctx))
	ctx, cancel := context.WithTimeout(context.Background(), s.opt.TTL)
	defer cancel()
	l.stopHelpers()
	l.drainRequests()
	done := l.startCleanup(ctx)
	l.dropNotifications()
	err := l.awaitCleanup(ctx, done)
	s.env.Stop() // the goroutines kept for the next batch of calls, before Close returns
	l.reply(err)
	s.logq.close() // the loop logs nothing after this
}

// stopHelpers stops the timers and waits for the helpers in flight, which
// their bound (bg) ends at once.
func (l *loop) stopHelpers() {
	l.beatTimer.Stop()
	l.deadlineTimer.Stop()
	l.keyTimer.Stop()
	l.cleanTimer.Stop()
	l.stopBg()
	l.wg.Wait()
	l.s.dropDedicate() // no subscribe helper is left to take it
}

// drainRequests runs what was posted after the loop decided to exit: a
// Claim that rolls back a grant it could not confirm posts its release at
// that moment, and dropping it would leave the grant recorded until the
// lease expires (longer, if an unacknowledged renewal reached Redis). With
// l.exit set these only queue: releases join l.pending. A post racing this
// drain can still be left in the buffer. It also takes back the releases of
// a batch that failed meanwhile.
func (l *loop) drainRequests() {
	for drained := false; !drained; {
		select {
		case f := <-l.s.reqs:
			f(l)
		default:
			drained = true
		}
	}
	select {
	case failed := <-l.cleanDone:
		l.pending = append(failed, l.pending...)
	default:
	}
}

// startCleanup releases the pending releases and every live hold and
// deletes the lease, apart: rueidis can block past a context on a hung
// server (its reconnect handshake has its own timeouts), and Close must
// not. Left behind at the cutoff, the cleanup ends when the client gives up
// on its requests (at once when Close closes the session's client).
//
// A session that has a LockDelay and ended other than by a Close within
// its lease (its lease lost, or closed past the lease's local deadline)
// leaves its holds as they are: they were lost, not released, and a
// release would hand them on at once, where the lock delay must keep them
// from others from when a script notices the loss (the lease, gone or
// deleted below, is how it notices). Without a LockDelay the release is
// what noticing would do anyway, and it hands over to a waiter at once.
func (l *loop) startCleanup(ctx context.Context) <-chan error {
	ps := l.pending
	closed := errors.Is(context.Cause(l.s.ctx), ErrClosed) && time.Now().Before(l.s.Deadline())
	if l.s.opt.LockDelay == 0 || closed {
		for _, h := range l.s.holds.snapshot() {
			ps = append(ps, pendingRelease{r: h.res, hid: h.hid})
		}
	}
	done := make(chan error, 1)
	go func() { done <- cleanup(ctx, l.s, ps) }()
	return done
}

// dropNotifications gives back the notification connection, also one a
// subscribe helper brought back (see giveBack), and answers the waiting
// subscribe requests with the session's end.
func (l *loop) dropNotifications() {
	select {
	case r := <-l.subDone:
		if r.dc != nil { // failed or not, the connection goes back
			l.giveBack(r.release)
		}
	default:
	}
	for _, w := range l.subWant {
		w.reply <- context.Cause(l.s.ctx)
	}
	l.dropSubscription()
}

// awaitCleanup returns the cleanup's result, or an error at the cutoff; it
// then waits for the connections being given back, within the same cutoff.
func (l *loop) awaitCleanup(ctx context.Context, done <-chan error) error {
	var err error
	select {
	case err = <-done: // first, if the cutoff also passed meanwhile
	default:
		select {
		case err = <-done:
		case <-ctx.Done():
			err = fmt.Errorf("cleanup still waiting for Redis after %v", l.s.opt.TTL)
		}
	}
	l.waitClosing(ctx)
	if err != nil {
		l.log.Warn("cleanup after session end failed; the lease will expire", "session", l.s.id, "err", err)
		err = fmt.Errorf("session: close: %w", relabel(err))
	}
	return err
}

// reply answers Close, if it asked: with the cleanup's error when Close
// ended the session, with nil when it had been lost before (nothing Close
// could do).
func (l *loop) reply(err error) {
	if l.closeErr == nil {
		return
	}
	if context.Cause(l.s.ctx) != ErrClosed {
		err = nil
	}
	l.closeErr <- err
}

// waitClosing waits for the notification connections being given back, at
// most until ctx ends; the rest finish on their own within about a second.
func (l *loop) waitClosing(ctx context.Context) {
	closed := make(chan struct{})
	go func() {
		l.closing.Wait()
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
}
