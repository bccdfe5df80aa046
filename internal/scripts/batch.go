package scripts

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Batching: the mutex acquires (and, apart, the mutex releases) of one
// session that overlap in time can go to Redis as one call of a batch
// script, which runs the single script's fast path for each of them: Redis
// then pays the script call, the read of the caller's lease and the clock
// once per batch instead of once per call, and the client one command, one
// write and one reply. A batch costs its calls latency, though: a call that
// waits for a flight to leave is slower than one sent at once. So a call
// is sent at once, as it always was, while few calls of its kind are on
// the way (batchSiblings, like PostgreSQL's commit_siblings); past that,
// calls queue, and a flight leaves with everything queued when a flight
// comes back or when batchSize calls are queued, with at most batchFlights
// flights on the way. Nothing ever waits for a timer to fill a batch.
// docs/design.md, "Concurrent calls share one script call", has the
// figures behind the numbers.

var (
	mutexAcquireBatch = newScript(fastOnly("mutex_acquire_batch.lua"), false)
	mutexReleaseBatch = newScript(fastOnly("mutex_release_batch.lua"), false)
)

// fastOnly returns the script of Lua file name, which is all fast path:
// fastpath.lua first, without common.lua's helpers (each a closure Redis
// would create on every call, see join), its includes resolved.
func fastOnly(name string) string {
	text := expand("--@include fastpath.lua\n"+luaFile(name), map[string]bool{})
	return protocolLocals(text, map[string]bool{}) + text
}

// The batching policy (see above).
const (
	// batchSiblings: a call is sent at once while at most this many calls
	// of its kind, itself included, are queued or on the way.
	batchSiblings = 6
	// batchSize: past batchSiblings, a flight leaves once this many calls
	// are queued (or when a flight comes back)...
	batchSize = 6
	// batchFlights: ...if fewer than this many flights are on the way.
	batchFlights = 4
	// maxBatch bounds the calls of one flight: a batch script of 64 calls
	// keeps Redis busy for about as long as 10 single calls.
	maxBatch = 64
)

// batches are the batchers of one session's Env (see Env.Prepared).
type batches struct {
	acquire *batcher[acquireCall, attemptResult]
	release *batcher[releaseCall, releaseResult]
	// The semaphore's and the pool's (see batch_kinds.go).
	semAcquire, poolAcquire *batcher[kindCall, attemptResult]
	semRelease, poolRelease *batcher[kindCall, releaseResult]
}

// acquireCall is one mutex acquire attempt (see Env.Acquire).
type acquireCall struct {
	name, hid string
	wait      bool
}

// attemptResult is an attempt's outcome; slow when the batch script's fast
// path did not cover it, and the caller must send the single script.
type attemptResult struct {
	g    Grant
	err  error
	slow bool
}

// releaseCall is one release of a mutex hold (see Env.Release).
type releaseCall struct{ name, hid string }

// releaseResult is a release's outcome; slow as for attemptResult.
type releaseResult struct {
	r    Released
	err  error
	slow bool
}

// batcher combines the calls of one kind into flights (see the policy
// above). A flight runs on a goroutine of its own, which goes on with the
// next flight while calls are queued. Callers wait for their result or
// their ctx's end, whichever comes first, so a flight stuck on a stalled
// server holds nobody past their ctx (as Bound does); a call whose ctx ends
// before its flight leaves is taken out of the queue and never sent.
type batcher[I, R any] struct {
	// send runs one flight: ctx ends at the latest deadline of its
	// callers; it returns one result per item, in order. fail is the
	// result of a call whose flight outlived its deadline (see overdue).
	// Both immutable once the Env is prepared.
	send func(ctx context.Context, items []I) []R
	fail func(err error) R
	// direct runs a flight on the caller's goroutine through the session's
	// client (Bound's, with the lane); lane is the session's lane, nil for
	// none. Immutable once the Env is prepared.
	direct func(ctx context.Context, items []I) []R
	lane   *Lane

	// wake is how a flight starts on an idle flight goroutine: one token
	// per goroutine taken off idle. Immutable once the Env is prepared.
	wake chan struct{}

	// Guarded by mu. A call queues only where a flight goroutine runs or
	// starts, and a flight goroutine stops flying only with the queue
	// empty, so no call is ever left queued with no flight to take it.
	mu      sync.Mutex
	queue   []*queued[I, R] // the calls waiting for a flight
	flying  int             // flight goroutines running flights
	idle    int             // flight goroutines parked, waiting for a token on wake
	aloft   int             // calls on the way, in flights or sent by their callers
	stopped bool            // set by stop: flight goroutines end instead of parking
}

// queued is one call in a batcher.
type queued[I, R any] struct {
	item   I            // immutable
	dl     time.Time    // immutable: the call's deadline, zero for none
	flight *flightState // guarded by the batcher's mu: the flight that took it, nil until then
	done   chan R       // buffer 1: the result
}

// flightState is what the callers of one flight share: once every one of
// them has left (their ctx ended), the flight's ctx is canceled, so that it
// starts no retry (TRYAGAIN during a slot migration, see Script.Exec) that
// could still grant an attempt whose caller already gave up, as a single
// call bounded by its caller's ctx would not either.
type flightState struct {
	callers int                // guarded by the batcher's mu: the callers still waiting
	cancel  context.CancelFunc // the flight's ctx
}

// do sends item, at once or with a later flight, and returns its result;
// or ctx's error when ctx ends first (the call's outcome is then unknown
// if it was sent). The flight that carries it ends by dl (zero: no
// deadline), which ctx need not carry.
func (b *batcher[I, R]) do(ctx context.Context, dl time.Time, item I) (R, error) {
	if err := ctx.Err(); err != nil {
		var zero R
		return zero, err // not sent, as rueidis does not send a call whose ctx ended
	}
	stop := ctx.Done()
	b.mu.Lock()
	if len(b.queue) == 0 && b.aloft < batchSiblings && b.lane.idle() {
		// The session's lane is idle: the caller sends its call itself,
		// on the lane, which returns at ctx's end (see Lane). Should
		// another call take the lane first, this one is handed over as
		// Bound hands over any call.
		b.aloft++
		b.mu.Unlock()
		cctx, cancel := Until(ctx, dl)
		r := b.direct(cctx, []I{item})[0]
		cancel()
		b.mu.Lock()
		b.aloft--
		b.mu.Unlock()
		return r, nil
	}
	if stop == nil && len(b.queue) == 0 && b.aloft < batchSiblings {
		// A caller whose ctx never ends has nothing to wait for but the
		// result: it sends its call itself, saving the hand-over to a
		// flight goroutine and back (as Direct does for Bound).
		b.aloft++
		b.mu.Unlock()
		r := b.sendOne(dl, item)
		b.mu.Lock()
		b.aloft--
		b.mu.Unlock()
		return r, nil
	}
	q := &queued[I, R]{item: item, dl: dl, done: make(chan R, 1)}
	b.queue = append(b.queue, q)
	spawn := false
	if b.flying == 0 || b.aloft+len(b.queue) <= batchSiblings ||
		(b.flying < batchFlights && len(b.queue) >= batchSize) {
		spawn = b.startFlight()
	}
	b.mu.Unlock()
	if spawn {
		go b.fly()
	}
	if stop == nil {
		return <-q.done, nil
	}
	select {
	case r := <-q.done:
		return r, nil
	case <-stop:
	}
	var abandon context.CancelFunc // the flight's, when q's caller is its last
	b.mu.Lock()
	if f := q.flight; f == nil {
		for i, x := range b.queue {
			if x == q {
				b.queue = append(b.queue[:i], b.queue[i+1:]...)
				break
			}
		}
	} else if f.callers--; f.callers == 0 {
		abandon = f.cancel
	}
	b.mu.Unlock()
	var r R
	var err error
	select {
	case r = <-q.done: // a result ready when ctx ended is still returned
	default:
		err = ctx.Err()
	}
	if abandon != nil {
		abandon() // only now: the flight it settles must not answer this caller instead of ctx
	}
	return r, err
}

// startFlight wakes a parked flight goroutine, or reports that one must be
// started (go b.fly(), once b.mu is unlocked). b.mu is held.
func (b *batcher[I, R]) startFlight() (spawn bool) {
	b.flying++
	if b.idle > 0 {
		select {
		case b.wake <- struct{}{}:
			b.idle--
			return false
		default: // never, with one token per parked goroutine at most
		}
	}
	return true
}

// stop ends the parked flight goroutines and makes the others end once
// idle; calls that come later still work, each flight on a goroutine that
// ends with it.
func (b *batcher[I, R]) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped {
		b.stopped = true
		b.idle = 0
		close(b.wake) // the parked ones see it closed; tokens sent before are taken first
	}
}

// sendOne sends a flight of item alone, on the caller's goroutine.
func (b *batcher[I, R]) sendOne(dl time.Time, item I) R {
	ctx, cancel := flightCtx(dl)
	defer cancel()
	return b.send(ctx, []I{item})[0]
}

// flightCtx returns the ctx of a flight that must end by dl (zero: only
// when canceled).
func flightCtx(dl time.Time) (context.Context, context.CancelFunc) {
	if dl.IsZero() {
		return context.WithCancel(context.Background())
	}
	return context.WithDeadline(context.Background(), dl)
}

// fly sends flights while calls are queued, then parks until a call wakes
// it (a goroutine that stays keeps the stack it grew: a new one per flight
// cost the serial lock+release 6% of its client CPU in stack growth), or
// ends once the batcher is stopped.
func (b *batcher[I, R]) fly() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxBatch)
		if n == 0 {
			b.flying--
			if b.stopped {
				b.mu.Unlock()
				return
			}
			b.idle++
			b.mu.Unlock()
			if _, ok := <-b.wake; !ok {
				return // stopped while parked
			}
			continue // the waker counted this goroutine as flying
		}
		flight := make([]*queued[I, R], n)
		copy(flight, b.queue)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.aloft += n
		var dl time.Time // the latest deadline; zero when a call has none
		items := make([]I, n)
		for i, q := range flight {
			items[i] = q.item
			if i == 0 || q.dl.IsZero() || (!dl.IsZero() && q.dl.After(dl)) {
				dl = q.dl
			}
		}
		ctx, cancel := flightCtx(dl)
		fs := &flightState{callers: n, cancel: cancel}
		for _, q := range flight {
			q.flight = fs
		}
		b.mu.Unlock()
		var settled atomic.Bool // by this goroutine's results or by overdue
		late := context.AfterFunc(ctx, func() { b.overdue(flight, &settled) })
		rs := b.send(ctx, items)
		late()
		cancel()
		if settled.CompareAndSwap(false, true) {
			b.mu.Lock()
			b.aloft -= len(flight)
			b.mu.Unlock()
			for i, q := range flight {
				q.done <- rs[i]
			}
		}
	}
}

// overdue settles a flight still on the way at its deadline (or once all
// its callers left, see flightState): rueidis returns by a call's
// deadline, but not while it waits for a redial that another goroutine
// started (see Bound). Its callers get a deadline error, as rueidis would
// have given them, its calls no longer count as on the way, and calls
// queued behind it get a flight of their own.
func (b *batcher[I, R]) overdue(flight []*queued[I, R], settled *atomic.Bool) {
	if !settled.CompareAndSwap(false, true) {
		return
	}
	for _, q := range flight {
		q.done <- b.fail(context.DeadlineExceeded)
	}
	b.mu.Lock()
	b.aloft -= len(flight)
	spawn := len(b.queue) > 0 && b.startFlight()
	b.mu.Unlock()
	if spawn {
		go b.fly()
	}
}

// newBatches returns the batchers of e. Their flights run on e's client
// without Bound: the callers wait on their own ctx (see batcher).
func newBatches(e Env) *batches {
	f, g := e, e
	f.C, f.batch = unbound(e.C), nil
	g.batch = nil
	lane := laneOf(e.C)
	failAcquire := func(err error) attemptResult { return attemptResult{err: err} }
	failRelease := func(err error) releaseResult { return releaseResult{err: err} }
	return &batches{
		acquire:    newBatcher(f.acquireFlight, g.acquireFlight, lane, failAcquire),
		release:    newBatcher(f.releaseFlight, g.releaseFlight, lane, failRelease),
		semAcquire: newBatcher(f.semAcquireFlight, g.semAcquireFlight, lane, failAcquire),
		semRelease: newBatcher(f.semReleaseFlight, g.semReleaseFlight, lane, failRelease),

		poolAcquire: newBatcher(f.poolAcquireFlight, g.poolAcquireFlight, lane, failAcquire),
		poolRelease: newBatcher(f.poolReleaseFlight, g.poolReleaseFlight, lane, failRelease),
	}
}

// newBatcher returns a batcher whose flights run send, and its callers
// direct on lane (see batcher).
func newBatcher[I, R any](send, direct func(ctx context.Context, items []I) []R, lane *Lane, fail func(error) R) *batcher[I, R] {
	return &batcher[I, R]{send: send, direct: direct, lane: lane, fail: fail, wake: make(chan struct{}, maxBatch)}
}

// Stop ends the goroutines that e's batchers keep for their next flights;
// the session calls it as it ends. e still works afterwards.
func (e Env) Stop() {
	if e.batch != nil {
		e.batch.acquire.stop()
		e.batch.release.stop()
		e.batch.semAcquire.stop()
		e.batch.semRelease.stop()
		e.batch.poolAcquire.stop()
		e.batch.poolRelease.stop()
	}
}

// laneOf returns the lane of c if c is BoundLane's, else nil.
func laneOf(c rueidis.Client) *Lane {
	if b, ok := c.(bounded); ok {
		return b.lane
	}
	return nil
}

// unbound returns the client c wraps if c is Bound's, else c.
func unbound(c rueidis.Client) rueidis.Client {
	if b, ok := c.(bounded); ok {
		return b.Client
	}
	return c
}

// acquireFlight sends one flight of mutex acquire attempts: alone, the
// single script as Env.Acquire sends it; together, mutex_acquire_batch.lua.
func (e Env) acquireFlight(ctx context.Context, as []acquireCall) []attemptResult {
	out := make([]attemptResult, len(as))
	if len(as) == 1 {
		a := as[0]
		out[0].g, out[0].err = e.acquire(ctx, Resource{Kind: Mutex, Name: a.name}, a.hid, a.wait)
		return out
	}
	keys := make([]string, len(as)+1)
	args := make([]string, len(as)+1)
	keys[0], args[0] = e.K.Lease(SessionOf(as[0].hid)), e.mutexOpts()
	for i, a := range as {
		keys[i+1] = e.K.Mutex(a.name)
		w := "0"
		if a.wait {
			w = "1"
		}
		args[i+1] = w + a.hid
	}
	res, werr := e.execWait(ctx, mutexAcquireBatch, keys, args)
	return batchGrants(res, werr, len(as), func(i int) string { return as[i].name })
}

// batchGrants reads the replies of a batch acquire script for n attempts
// (name(i) is the resource name of the i-th); werr is the batch's WAIT
// outcome.
func batchGrants(res rueidis.RedisResult, werr error, n int, name func(i int) string) []attemptResult {
	out := make([]attemptResult, n)
	v, err := res.ToArray()
	if err == nil && len(v) != n {
		err = fmt.Errorf("%w: %d replies for %d attempts", errReply, len(v), n)
	}
	for i := range out {
		if err != nil {
			out[i].err = err
			continue
		}
		out[i] = batchGrant(v[i], name(i), werr)
	}
	return out
}

// batchGrant reads one attempt's reply of a batch acquire script: a grant
// as parseGrant reads it, or slow; werr is the batch's WAIT outcome.
func batchGrant(m rueidis.RedisMessage, name string, werr error) (out attemptResult) {
	r, err := m.ToArray()
	if err != nil {
		return attemptResult{err: err}
	}
	if len(r) == 1 {
		if c, err := r[0].AsInt64(); err == nil && c == replySlow {
			return attemptResult{slow: true}
		}
	}
	out.g, out.err = parseGrant(r, name)
	if out.err == nil && out.g.Status == Granted && werr != nil {
		out.err = werr // not replicated: the caller rolls the grant back
	}
	return out
}

// releaseFlight sends one flight of mutex releases: alone, the single
// script as Env.Release sends it; together, mutex_release_batch.lua.
func (e Env) releaseFlight(ctx context.Context, rs []releaseCall) []releaseResult {
	out := make([]releaseResult, len(rs))
	if len(rs) == 1 {
		out[0].r, out[0].err = e.release(ctx, Resource{Kind: Mutex, Name: rs[0].name}, rs[0].hid, false)
		return out
	}
	keys := make([]string, len(rs))
	args := make([]string, len(rs)+1)
	args[0] = e.sharded()
	for i, r := range rs {
		keys[i], args[i+1] = e.K.Mutex(r.name), r.hid
	}
	res, werr := e.execWait(ctx, mutexReleaseBatch, keys, args)
	return batchReleased(res, werr, len(rs))
}

// batchReleased reads the replies of a batch release script for n
// releases: each released, or slow; werr is the batch's WAIT outcome.
func batchReleased(res rueidis.RedisResult, werr error, n int) []releaseResult {
	out := make([]releaseResult, n)
	v, err := res.ToArray()
	if err == nil && len(v) != n {
		err = fmt.Errorf("%w: %d replies for %d releases", errReply, len(v), n)
	}
	for i := range out {
		if err != nil {
			out[i].err = err
			continue
		}
		c, err := v[i].AsInt64()
		switch {
		case err != nil:
			out[i].err = err
		case c == replySlow:
			out[i].slow = true
		default:
			out[i].r, out[i].err = Released(c), werr
		}
	}
	return out
}
