// Package batch sends the overlapping calls of one kind as one request
// (a flight) when that costs no call any time: see Batcher for the policy.
// It schedules and nothing else; what a flight sends, and how its reply is
// split into the calls' results, is the caller's (internal/scripts' batch
// scripts).
package batch

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/conn"
)

// The policy. Calls of one kind that overlap in time (a session's mutex
// acquires, its mutex releases, ...) can go to Redis as one request, a
// flight: Redis then pays the script call, the read of the caller's lease
// and the clock once per flight instead of once per call, and the client
// one command, one write and one reply. A flight costs its calls latency,
// though: a call that waits for a flight to leave is slower than one sent
// at once. So a call is sent at once while few calls of its kind are on
// the way (batchSiblings, like PostgreSQL's commit_siblings); past that,
// calls queue, and a flight leaves with everything queued when a flight
// comes back or when batchSize calls are queued, with at most batchFlights
// flights on the way. Nothing ever waits for a timer to fill a flight.
// docs/design.md, "Concurrent calls share one script call", says why these
// numbers.

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

// Batcher combines the calls of one kind into flights (see the policy
// above). A flight runs on a goroutine of its own, which goes on with the
// next flight while calls are queued. Callers wait for their result or
// their ctx's end, whichever comes first, so a flight stuck on a stalled
// server holds nobody past their ctx (as conn.Bound does); a call whose ctx ends
// before its flight leaves is taken out of the queue and never sent.
type Batcher[I, R any] struct {
	// send runs one flight: ctx ends at the latest deadline of its
	// callers; it returns one result per item, in order. fail is the
	// result of a call whose flight outlived its deadline (see overdue).
	// Both immutable.
	send func(ctx context.Context, items []I) []R
	fail func(err error) R
	// direct runs a flight on the caller's goroutine through the session's
	// client (conn.BoundLane's); lane is the session's lane, nil for
	// none. Immutable.
	direct func(ctx context.Context, items []I) []R
	lane   *conn.Lane

	// wake is how a flight starts on an idle flight goroutine: one token
	// per goroutine taken off idle. Immutable.
	wake chan struct{}

	// Guarded by mu. A call queues only where a flight goroutine runs or
	// starts, and a flight goroutine stops flying only with the queue
	// empty, so no call is ever left queued with no flight to take it.
	mu      sync.Mutex
	queue   []*queued[I, R] // the calls waiting for a flight
	flying  int             // flight goroutines running flights
	idle    int             // flight goroutines parked, waiting for a token on wake
	aloft   int             // calls on the way, in flights or sent by their callers
	stopped bool            // set by Stop: flight goroutines end instead of parking
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

// Do sends item, at once or with a later flight, and returns its result;
// or ctx's error when ctx ends first (the call's outcome is then unknown
// if it was sent). The flight that carries it ends by dl (zero: no
// deadline), which ctx need not carry.
func (b *Batcher[I, R]) Do(ctx context.Context, dl time.Time, item I) (R, error) {
	if err := ctx.Err(); err != nil {
		var zero R
		return zero, err // not sent, as rueidis does not send a call whose ctx ended
	}
	b.mu.Lock()
	if len(b.queue) == 0 && b.aloft < batchSiblings {
		switch {
		case b.lane.Idle():
			// The session's lane is idle: the caller sends its call
			// itself, on the lane, which returns at ctx's end (see
			// conn.Lane). Should another call take the lane first, this
			// one is handed over as conn.Bound hands over any call.
			return b.sendAlone(func() R {
				cctx, cancel := conn.Until(ctx, dl)
				defer cancel()
				return b.direct(cctx, []I{item})[0]
			}), nil
		case ctx.Done() == nil:
			// A caller whose ctx never ends has nothing to wait for but
			// the result: it sends its call itself, saving the hand-over
			// to a flight goroutine and back (as conn.Bound does for such
			// a ctx).
			return b.sendAlone(func() R { return b.sendOne(dl, item) }), nil
		}
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
	select {
	case r := <-q.done:
		return r, nil
	case <-ctx.Done():
		return b.leave(ctx, q)
	}
}

// sendAlone runs send, a call sent by its caller alone, counted as on the
// way. b.mu is held, and unlocked when sendAlone returns.
func (b *Batcher[I, R]) sendAlone(send func() R) R {
	b.aloft++
	b.mu.Unlock()
	r := send()
	b.mu.Lock()
	b.aloft--
	b.mu.Unlock()
	return r
}

// leave takes q, whose caller's ctx ended, out of the queue, or out of its
// flight's callers (the flight's ctx is canceled once none is left, see
// flightState), and returns its result if one is ready, else ctx's error.
func (b *Batcher[I, R]) leave(ctx context.Context, q *queued[I, R]) (R, error) {
	var abandon context.CancelFunc // the flight's, when q's caller is its last
	b.mu.Lock()
	if f := q.flight; f == nil {
		if i := slices.Index(b.queue, q); i >= 0 {
			b.queue = slices.Delete(b.queue, i, i+1)
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
func (b *Batcher[I, R]) startFlight() (spawn bool) {
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

// Stop ends the parked flight goroutines and makes the others end once
// idle; calls that come later still work, each flight on a goroutine that
// ends with it.
func (b *Batcher[I, R]) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped {
		b.stopped = true
		b.idle = 0
		close(b.wake) // the parked ones see it closed; tokens sent before are taken first
	}
}

// sendOne sends a flight of item alone, on the caller's goroutine.
func (b *Batcher[I, R]) sendOne(dl time.Time, item I) R {
	ctx, cancel := conn.Until(context.Background(), dl) // no timer: nothing waits on it (see conn.Until)
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
// it (a goroutine that stays keeps the stack it grew, which a new one per
// flight would grow again: see docs/performance.md), or
// ends once the batcher is stopped.
func (b *Batcher[I, R]) fly() {
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
// started (see conn.Bound). Its callers get a deadline error, as rueidis would
// have given them, its calls no longer count as on the way, and calls
// queued behind it get a flight of their own.
func (b *Batcher[I, R]) overdue(flight []*queued[I, R], settled *atomic.Bool) {
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

// New returns a batcher whose flights run send, and its callers
// direct on lane (see batcher).
func New[I, R any](send, direct func(ctx context.Context, items []I) []R, lane *conn.Lane, fail func(error) R) *Batcher[I, R] {
	return &Batcher[I, R]{send: send, direct: direct, lane: lane, fail: fail, wake: make(chan struct{}, maxBatch)}
}
