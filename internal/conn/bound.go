package conn

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Bound returns c with Do and DoMulti that return when their ctx ends, even
// when rueidis would keep them waiting: a call that finds its connection
// being redialled by another goroutine waits for that dial (rueidis'
// singleconnect wait ignores the caller's ctx), and a dial to a stalled
// server takes up to ConnWriteTimeout. The abandoned call finishes in its
// own goroutine: rueidis checks ctx again before writing, and a call that
// was already on the wire has an unknown outcome, which callers handle as
// for any other error (Claim withdraws the hold id). The error is ctx.Err(),
// as rueidis itself reports a ctx that ended, and a reply that is ready when
// ctx ends is still returned.
func Bound(c rueidis.Client) rueidis.Client { return bounded{Client: c} }

// BoundLane is Bound, with a Do that runs a call whose ctx can be canceled
// on lane when the lane is idle (see Lane), on the caller's goroutine. A
// nil lane is none.
func BoundLane(c rueidis.Client, lane *Lane) rueidis.Client { return bounded{Client: c, lane: lane} }

type bounded struct {
	rueidis.Client
	lane *Lane // nil: none
}

func (c bounded) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if canLane(ctx, cmd) && c.lane.take() {
		return c.lane.do(ctx, cmd)
	}
	return Within(ctx, func() rueidis.RedisResult { return c.Client.Do(ctx, cmd) },
		func(err error) rueidis.RedisResult { return rueidis.NewErrorResult(err) })
}

func (c bounded) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	return Within(ctx, func() []rueidis.RedisResult { return c.Client.DoMulti(ctx, multi...) },
		func(err error) []rueidis.RedisResult { return Failed(len(multi), err) })
}

// Until is context.WithDeadline(ctx, dl) for one call (ctx itself when dl
// is zero or ctx already ends by dl: no deadline of its own then), without
// WithDeadline's timer until something waits on its Done: rueidis'
// synchronous mode, which the session's lane and a caller whose ctx never
// ends use, only reads the deadline (for a socket deadline) and Err, and
// the lane watches ctx's own cancellation (see Lane.do). The timer and
// ctx's bookkeeping of a child were a measurable share of a serial
// lock+release's client CPU (docs/performance.md). When ctx never ends, the
// result's only end is its deadline (see inline).
func Until(ctx context.Context, dl time.Time) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); dl.IsZero() || (ok && !d.After(dl)) {
		return ctx, func() {}
	}
	u := &until{parent: ctx, dl: dl}
	return u, u.stop
}

// until is Until's ctx: it ends at parent's end or at dl, and becomes
// context.WithDeadline(parent, dl) (c) the first time Done is asked for.
type until struct {
	parent context.Context
	dl     time.Time

	mu      sync.Mutex
	c       context.Context // nil until Done is asked for
	cancel  context.CancelFunc
	stopped bool // its CancelFunc ran
}

func (u *until) Deadline() (time.Time, bool) { return u.dl, true }

func (u *until) Done() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.c == nil {
		u.c, u.cancel = context.WithDeadline(u.parent, u.dl)
		if u.stopped {
			u.cancel()
		}
	}
	return u.c.Done()
}

func (u *until) Err() error {
	u.mu.Lock()
	c, stopped := u.c, u.stopped
	u.mu.Unlock()
	switch {
	case c != nil:
		return c.Err()
	case u.parent.Err() != nil:
		return u.parent.Err()
	case !time.Now().Before(u.dl):
		return context.DeadlineExceeded
	case stopped:
		return context.Canceled
	}
	return nil
}

func (u *until) Value(key any) any {
	u.mu.Lock()
	c := u.c
	u.mu.Unlock()
	if c != nil {
		return c.Value(key) // context.Cause finds c's cause
	}
	return u.parent.Value(key)
}

func (u *until) stop() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.stopped = true
	if u.cancel != nil {
		u.cancel()
	}
}

// inline reports whether ctx ends only at its deadline (or never), which
// rueidis honours by itself: a socket deadline on a synchronous call, a
// select on Done in pipelined mode. Bound's Do and DoMulti then run the
// call on the caller's goroutine, saving the hand-over to another goroutine
// and back (a large share of an uncontended lock+release's client CPU:
// docs/performance.md), and the lane has no cancellation to watch. What
// rueidis does not bound is the wait for a redial that another goroutine
// started (see Bound); that wait has its own bound (the dialer's ctx,
// ConnWriteTimeout), and a caller whose ctx never ends has no earlier end
// to be held to. It asks no Done of an Until ctx.
func inline(ctx context.Context) bool {
	if u, ok := ctx.(*until); ok {
		return u.parent.Done() == nil
	}
	return ctx.Done() == nil
}

// cancelOf returns what ends ctx other than its own deadline: an Until
// ctx's parent, ctx itself otherwise. It asks no Done of an Until ctx.
func cancelOf(ctx context.Context) context.Context {
	if u, ok := ctx.(*until); ok {
		return u.parent
	}
	return ctx
}

// Within runs call, returning its result, or failed(ctx.Err()) when ctx ends
// first (call then finishes in its goroutine).
func Within[T any](ctx context.Context, call func() T, failed func(error) T) T {
	if inline(ctx) {
		return call()
	}
	ch := make(chan T, 1)
	go func() { ch <- call() }()
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		select {
		case r := <-ch:
			return r
		default:
			return failed(ctx.Err())
		}
	}
}

// Failed returns n results that report err.
func Failed(n int, err error) []rueidis.RedisResult {
	rs := make([]rueidis.RedisResult, n)
	for i := range rs {
		rs[i] = rueidis.NewErrorResult(err)
	}
	return rs
}

// LaneOf returns the lane of c if c is BoundLane's, else nil.
func LaneOf(c rueidis.Client) *Lane {
	if b, ok := c.(bounded); ok {
		return b.lane
	}
	return nil
}

// Unbound returns the client c wraps if c is Bound's, else c.
func Unbound(c rueidis.Client) rueidis.Client {
	if b, ok := c.(bounded); ok {
		return b.Client
	}
	return c
}
