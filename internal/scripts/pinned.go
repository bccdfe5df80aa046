package scripts

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Pinned is the client a session runs its scripts through. Its Do and
// DoMulti go over a connection of its own, dedicated from the user's client
// (the "pinned" connection), in rueidis' pipelining mode, where a call
// waits for its reply or for its ctx to end, whichever comes first: no
// goroutine per call is needed to honour ctx. Without a pinned connection
// they go through Bound(c), which runs each call in a goroutine of its own
// on top of rueidis' own pipelining goroutines: one more hand-over per
// call, which cost 32 goroutines locking in parallel on one session 12-16%
// of their throughput in interleaved A/B runs (docs/design.md).
//
// Why the shared connection cannot be called directly: a call that finds
// it being redialled by another goroutine waits for that dial whatever its
// own ctx (see Bound). A dedicated connection is never redialled: Pinned
// drops it as soon as rueidis reports it closed, and after any call on it
// that did not end with a Redis reply (a ctx that ended included: in
// rueidis the abandoned call keeps its slot in the connection's ring until
// the reply, and a full ring would make later calls wait whatever their
// ctx), or with a reply saying the node is no writable primary (READONLY,
// MOVED...). Calls then go through Bound while a new connection is dialled
// in the background and checked before use. A call that was already on its
// way to a dropped connection fails, as on a broken shared connection.
// Calls beyond maxPinned in flight also go through Bound, for the same
// ring.
//
// A lone call (no other call of the session in flight) goes through Bound
// too: there rueidis writes and reads it on the calling goroutine when the
// shared connection is idle, so Bound's goroutine is the only hand-over,
// where the pinned connection's pipelining goroutines would be two. Pinning
// pays off only when calls overlap.
//
// Only standalone clients speaking RESP3 are pinned: a sentinel or cluster
// client's dedicated connection does not follow a failover or a slot move,
// which its shared connections do, and RESP2 has no push messages to learn
// of a closed connection from. Each pinned connection takes one connection
// of the client's dedicated pool (BlockingPoolSize), as the session's
// subscription does.
type Pinned struct {
	rueidis.Client // Bound(c): every method but Do and DoMulti, and their fallback

	c        rueidis.Client
	cur      atomic.Pointer[pin] // nil while no connection is pinned
	calls    atomic.Int64        // calls in flight through Do and DoMulti
	inflight atomic.Int64        // those on pinned connections

	pinLone bool // tests: pin lone calls too

	mu      sync.Mutex
	off     bool          // Unpin was called, or c cannot be pinned
	dialing bool          // a dial goroutine runs
	last    time.Time     // when the last dial started
	pause   time.Duration // wait after last before the next dial
}

type pin struct {
	d    rueidis.DedicatedClient
	once sync.Once
}

// close closes the connection, once, in the background: rueidis' Close
// waits up to a second for calls still in flight on it.
func (p *pin) close() { p.once.Do(func() { go p.d.Close() }) }

const (
	// maxPinned caps the calls in flight on a pinned connection, well under
	// the 1,024 slots of a rueidis connection's ring (RingScaleEachConn 10).
	maxPinned = 256
	// pinCheck bounds the HELLO that checks a new pinned connection.
	pinCheck = time.Second
	// Pauses between failed dials.
	pinPauseMin = 100 * time.Millisecond
	pinPauseMax = 5 * time.Second
)

// Pin returns the scripts' client on top of c and starts dialling its
// pinned connection when c is a standalone client. Unpin stops it.
func Pin(c rueidis.Client) *Pinned {
	p := &Pinned{Client: Bound(c), c: c, off: c.Mode() != rueidis.ClientModeStandalone}
	p.redial()
	return p
}

// Unpin closes the pinned connection, if any, and dials no more: later
// calls go through Bound. It does not close c.
func (p *Pinned) Unpin() {
	p.mu.Lock()
	p.off = true
	p.mu.Unlock()
	if d := p.cur.Swap(nil); d != nil {
		d.close()
	}
}

func (p *Pinned) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	defer p.calls.Add(-1)
	if d := p.acquire(p.calls.Add(1)); d != nil {
		defer p.inflight.Add(-1)
		r := d.d.Do(ctx, cmd)
		if broken(r.Error()) {
			p.drop(d)
		}
		return r
	}
	return p.Client.Do(ctx, cmd)
}

func (p *Pinned) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	defer p.calls.Add(-1)
	if d := p.acquire(p.calls.Add(1)); d != nil {
		defer p.inflight.Add(-1)
		rs := d.d.DoMulti(ctx, multi...)
		for _, r := range rs {
			if broken(r.Error()) {
				p.drop(d)
				break
			}
		}
		return rs
	}
	return p.Client.DoMulti(ctx, multi...)
}

// acquire returns the pinned connection, counted in flight, or nil (and
// then starts a dial if none is pinned). calls counts this call and the
// others in flight: a lone call is not pinned (see Pinned).
func (p *Pinned) acquire(calls int64) *pin {
	d := p.cur.Load()
	if d == nil {
		p.redial()
		return nil
	}
	if calls == 1 && !p.pinLone {
		return nil
	}
	if p.inflight.Add(1) > maxPinned {
		p.inflight.Add(-1)
		return nil
	}
	return d
}

// drop unpins d (once) and dials a replacement.
func (p *Pinned) drop(d *pin) {
	if p.cur.CompareAndSwap(d, nil) {
		d.close()
		p.redial()
	}
}

// redial starts a dial unless one runs, pinning is off, or the pause after
// a failed dial has not passed.
func (p *Pinned) redial() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.off || p.dialing || time.Since(p.last) < p.pause {
		return
	}
	p.dialing, p.last = true, time.Now()
	go p.dial()
}

// dial dedicates a connection, checks it and pins it. rueidis' Dedicate
// takes no ctx: with a stalled server it returns after ConnWriteTimeout, and
// Unpin does not wait for it (the connection is then closed here).
func (p *Pinned) dial() {
	d, _ := p.c.Dedicate()
	n := &pin{d: d}
	// The check's ctx has no deadline, so rueidis starts the connection's
	// pipelining goroutines (a call with a deadline on an idle connection
	// would be written and read on the caller's goroutine, where only the
	// deadline and not a cancellation can end it), and they stay.
	ctx, cancel := context.WithCancel(context.Background())
	t := time.AfterFunc(pinCheck, cancel)
	proto, err := d.Do(ctx, d.B().Hello().Build()).AsMap()
	t.Stop()
	cancel()
	resp3 := false
	if err == nil {
		v := proto["proto"]
		n, _ := v.AsInt64()
		resp3 = n == 3
	}
	var closed <-chan error
	if resp3 {
		// Push messages need RESP3; a subscription never comes: the hooks
		// are there for the channel, closed when the connection is.
		closed = d.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(rueidis.PubSubMessage) {}})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dialing = false
	var re *rueidis.RedisError
	switch {
	case err == nil && !resp3, errors.As(err, &re):
		p.off = true // RESP2, or a server without HELLO: never pinned
		n.close()
	case err != nil || p.off:
		p.pause = min(max(2*p.pause, pinPauseMin), pinPauseMax)
		n.close()
	default:
		p.pause = 0
		p.cur.Store(n)
		go func() {
			<-closed
			p.drop(n)
		}()
	}
}

// broken reports whether err, the reply to a call on a pinned connection,
// means that the connection must not be used again: anything but a Redis
// reply, or a reply saying its node takes no writes.
func broken(err error) bool {
	if err == nil || rueidis.IsRedisNil(err) {
		return false
	}
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return true
	}
	msg := re.Error()
	for _, p := range []string{"READONLY", "MOVED", "ASK", "MASTERDOWN", "LOADING", "CLUSTERDOWN", "TRYAGAIN"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
