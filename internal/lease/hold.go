package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/scripts"
)

// Hold is the state behind a session.Hold, allocated inside it (see
// Public). Its exported methods are documented on session.Hold.
type Hold struct {
	// Immutable after newHold.
	s        *Session
	res      scripts.Resource
	hid      string
	resource string
	token    int64
	ctx      context.Context
	endCtx   context.CancelCauseFunc // ctx's cancel; see cancel
	// ended runs the hold's end hooks (its metrics) once, after ctx is
	// canceled, in a goroutine that ends it (cancel): context.AfterFunc
	// would start a goroutine for every release.
	ended endHooks

	value atomic.Pointer[string] // election: the value last proclaimed, if any; any goroutine

	// keyed tells whether h has Redis keys that its session's heartbeat
	// keeps alive (scripts.Keys.Kept; all kinds but a pool member's, which
	// is configuration); immutable. The keys are built only when a
	// heartbeat renews them (Hold.keys), not for every grant.
	keyed bool
	// keyUntil is until when h's keys surely exist, on the local monotonic
	// clock, in ns since s.base: written by addHold before h is published
	// and then by the loop (heartbeats, reclaims); read by anyone.
	keyUntil atomic.Int64

	mu       sync.Mutex // serializes Release; guards released and releaseUnknown
	released bool       // guarded by mu: the server confirmed the release
	// releaseUnknown, guarded by mu: a release attempt failed with an
	// unknown outcome: it may have happened (so a NotFound reply is no
	// sign of loss), and the next attempt withdraws the id.
	releaseUnknown bool
	// acquireUnknown: an acquire attempt for this hold id failed with an
	// unknown outcome and may still arrive late: the release withdraws the
	// id. Set before the hold is published (addHold), then only read.
	acquireUnknown bool
}

// newHold returns a new hold and the public hold that wraps it.
func (s *Session) newHold(r scripts.Resource, hid, resource string, token int64) (*Hold, any) {
	h, pub := public.NewHold()
	h.s, h.res, h.hid, h.resource, h.token = s, r, hid, resource, token
	h.keyed = r.Kind != scripts.Pool
	// Not a child of s.ctx: with every hold in s.ctx's children, concurrent
	// grants and releases contend for its lock. The hold table ends the
	// holds when the session ends (holdTable.endAll, called by the loop).
	h.ctx, h.endCtx = context.WithCancelCause(context.Background())
	return h, pub
}

// cancel ends h with cause, then runs its end hooks; called by Release,
// the hold table and the loop. The first cause wins, the hooks run once.
// (A method, not a closure stored in h: one allocation less per hold.)
func (h *Hold) cancel(cause error) {
	h.endCtx(cause)
	h.ended.run()
}

// endHooks runs functions once, when a hold ends: those added before,
// when it ends; one added after, at once. They run in a goroutine that
// ends the hold (Release's caller, the hold table's, or the session's
// loop), so each must be quick and never block: metrics, not a span
// exporter (trace.go keeps context.AfterFunc for those).
type endHooks struct {
	mu    sync.Mutex
	done  bool     // guarded by mu: run has run
	hooks []func() // guarded by mu
}

// add runs f when the hold ends, or now if it has.
func (e *endHooks) add(f func()) {
	e.mu.Lock()
	if e.done {
		e.mu.Unlock()
		f()
		return
	}
	e.hooks = append(e.hooks, f)
	e.mu.Unlock()
}

// run runs the hooks added so far, the first time it is called.
func (e *endHooks) run() {
	e.mu.Lock()
	if e.done {
		e.mu.Unlock()
		return
	}
	e.done = true
	hooks := e.hooks
	e.hooks = nil
	e.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// SetValue records the election value a reclaim recreates for h after Redis
// lost its data; election.Proclaim calls it before it sends the new value,
// so that a reclaimed leader keeps its latest value, not its Campaign's.
// Other kinds of hold ignore it.
// Concurrent Proclaims may record their values in another order than Redis
// applied them, so a reclaim may bring back either.
func (h *Hold) SetValue(v scripts.Value) {
	s := string(v)
	h.value.Store(&s)
}

// reclaimed is h's resource as a reclaim recreates it.
func (h *Hold) reclaimed() scripts.Resource {
	r := h.res
	if v := h.value.Load(); v != nil {
		r.Value = *v
	}
	return r
}

// describe names the resource for messages: `mutex "m"`, `pool "p" member "k"`.
func (h *Hold) describe() string {
	if h.res.Kind == scripts.Pool {
		return fmt.Sprintf("%s %q member %q", h.res.Kind, h.res.Name, h.resource)
	}
	return fmt.Sprintf("%s %q", h.res.Kind, h.res.Name)
}

// Resource is session.Hold.Resource.
func (h *Hold) Resource() string { return h.resource }

// ID is session.Hold.ID.
func (h *Hold) ID() string { return h.hid }

// Token is session.Hold.Token.
func (h *Hold) Token() int64 { return h.token }

// Context is session.Hold.Context.
func (h *Hold) Context() context.Context { return h.ctx }

// Done is session.Hold.Done.
func (h *Hold) Done() <-chan struct{} { return h.ctx.Done() }

// Err is session.Hold.Err.
func (h *Hold) Err() error {
	if h.ctx.Err() != nil {
		return context.Cause(h.ctx)
	}
	if err := h.s.pastDeadline(); err != nil {
		return err
	}
	if h.keyed && !time.Now().Before(h.endsAt()) {
		return keysLost(h)
	}
	return nil
}

// keys returns the Redis keys that record h (see keyed).
func (h *Hold) keys() []string { return h.s.env.K.Kept(h.res) }

// keysUntil returns until when h's keys surely exist.
func (h *Hold) keysUntil() time.Time {
	return h.s.base.Add(time.Duration(h.keyUntil.Load()))
}

// endsAt returns when h ends unless a heartbeat keeps its keys first: a
// lock delay before they could expire, so that the lock delay still keeps
// the next holder out after it (the keys that record it go with them).
func (h *Hold) endsAt() time.Time {
	return h.keysUntil().Add(-h.s.opt.LockDelay)
}

// setKeysUntil records that h's keys surely exist until t.
func (h *Hold) setKeysUntil(t time.Time) {
	h.keyUntil.Store(int64(t.Sub(h.s.base)))
}

// keysLost is the cause of a hold whose keys the heartbeat could not keep
// alive before they could expire: someone else could be granted it then.
func keysLost(h *Hold) error {
	return lost(ReasonKeysExpired, "%s: its keys could not be kept alive in Redis (is its slot migrating?)", h.describe())
}

// Release is session.Hold.Release.
func (h *Hold) Release(ctx context.Context) error {
	if err := lockCtx(ctx, &h.mu); err != nil {
		return fmt.Errorf("session: release %s: %w", h.describe(), err)
	}
	defer h.mu.Unlock()
	if h.released {
		return nil
	}
	h.s.enter() // a Group does not retire the copy under a release
	defer h.s.leave()
	if h.ctx.Err() == nil && h.s.opt.LockDelay > 0 && !time.Now().Before(h.s.Deadline()) {
		// Past the lease's local deadline the hold is lost, though the
		// loop may not have ended it yet: a release now would hand the
		// resource on at once, where the lock delay must keep it from
		// others (see startCleanup).
		return fmt.Errorf("session: release %s: %w: the session's deadline passed before the release (%v)",
			h.describe(), ErrLeaseLost, h.s.opt.TTL)
	}
	if h.ctx.Err() == nil {
		h.cancel(ErrReleased)
		h.s.holds.remove(h.hid)
	}
	switch cause := context.Cause(h.ctx); {
	case errors.Is(cause, ErrClosed):
		return nil
	case !errors.Is(cause, ErrReleased):
		return fmt.Errorf("session: release %s: %w", h.describe(), cause)
	}
	dl := time.Now().Add(h.s.opt.TTL)
	r, err := h.s.env.ReleaseUntil(ctx, dl, h.res, h.hid, h.acquireUnknown || h.releaseUnknown)
	for try := 0; err != nil && connLost(err) && ctx.Err() == nil && time.Now().Before(dl) && try < 2; try++ {
		// A pooled connection that died with the server (a restart) fails
		// the first request sent on it: rueidis reports EOF and redials.
		// The release is idempotent per hold id, so send it again at once,
		// as one whose outcome is unknown, rather than report an error
		// for a release that the next attempt completes.
		h.releaseUnknown = true
		r, err = h.s.env.ReleaseUntil(ctx, dl, h.res, h.hid, true)
	}
	if err != nil {
		h.releaseUnknown = true
		h.s.post(func(l *loop) { l.release(pendingRelease{r: h.res, hid: h.hid}) })
		return fmt.Errorf("session: release %s: %w", h.describe(), relabel(err))
	}
	h.released = true
	if r == scripts.NotFound && !h.releaseUnknown {
		// Taken away on the server before the session heard of it.
		return fmt.Errorf("session: release %s: %w: it was no longer held", h.describe(), ErrLost)
	}
	return nil
}

// connLost reports an error of the connection rather than of Redis or of
// the call's ctx: the request may not have reached Redis at all.
func connLost(err error) bool {
	if _, ok := rueidis.IsRedisErr(err); ok {
		return false
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// lockCtx locks mu, or returns ctx's cause if ctx ends first: a Release
// waiting for another one in flight (up to a TTL on a stalled Redis) must
// still return at its own ctx's end. Uncontended, it is mu.TryLock.
func lockCtx(ctx context.Context, mu *sync.Mutex) error {
	if mu.TryLock() {
		return nil
	}
	locked := make(chan struct{})
	go func() {
		mu.Lock()
		close(locked)
	}()
	select {
	case <-locked:
		return nil
	case <-ctx.Done():
		go func() {
			<-locked
			mu.Unlock()
		}()
		return context.Cause(ctx)
	}
}
