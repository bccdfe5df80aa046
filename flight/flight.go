package flight

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"golang.org/x/sync/singleflight"

	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// DefaultMaxValue is the default of Options.MaxValue: 1 MiB.
const DefaultMaxValue = 1 << 20

// maxMaxValue is the largest Options.MaxValue accepted: Redis' largest
// string (proto-max-bulk-len's default).
const maxMaxValue = 512 << 20

// minKeep is how long a stored outcome is kept at least, fresh or not, so
// that the callers queued for it find it even with a TTL of 0.
const minKeep = 10 * time.Second

// Options configure a Group. The zero value is valid: outcomes are shared
// only with the callers waiting for them, and nothing is cached.
type Options struct {
	// TTL is how long a stored value is fresh: Do returns it at once, without
	// computing, until TTL after it was stored (Redis' clock). 0 (the
	// default) caches nothing: a value goes only to the callers that waited
	// for its computation. Negative is invalid, and so is a TTL above
	// session.MaxDuration (a year).
	TTL time.Duration

	// ErrorTTL is how long a failed computation's error is returned at once
	// instead of computing again. 0 (the default): the error goes to the
	// callers that waited for that computation, and the next Do computes
	// again. Negative is invalid, and so is one above session.MaxDuration.
	ErrorTTL time.Duration

	// ServeStale makes Do return an expired value at once, while one caller
	// (the one that wins TryLock on the key's mutex) recomputes it. A value
	// is kept for 2*TTL (at least 10s), so it is served stale for up to one
	// TTL after it expired. Off by default: callers wait for the new value.
	ServeStale bool

	// MaxValue is the longest value fn may return, in bytes; a longer one
	// fails with ErrValueTooLarge and is not stored. The text of an error
	// fn returns is stored cut to MaxValue bytes. 0 means DefaultMaxValue
	// (1 MiB); at most 512 MiB.
	MaxValue int

	// Metrics registers the leasehold_flight_* collectors (computations,
	// waits, cache hits, stale serves, labelled with the group's name);
	// groups sharing a Registerer share them. nil (the default): none.
	Metrics prometheus.Registerer
}

// Func computes the value of a key. Its ctx ends when the caller's ctx ends
// or when the right to compute is lost (context.Cause says which).
type Func func(ctx context.Context) ([]byte, error)

// Group is a named set of keys whose values are computed once at a time
// across every process sharing a session namespace. It is safe for
// concurrent use and keeps no goroutine of its own; each call of Do runs in
// a goroutine that x/sync/singleflight's DoChan starts, so that callers can
// leave at their ctx's end: it finishes the call (releasing the key's mutex
// within one TTL) after they left, and a panic in fn there is not
// recoverable by the caller and ends the process. Calls of one Group value for one key in
// one process share one call; two Group values of one name are two
// separate callers (within the process too), still computing one at a time.
type Group struct {
	s    *session.Session   // immutable
	name string             // immutable
	o    Options            // immutable, with defaults applied
	err  error              // immutable: invalid name or options, reported by every call
	met  *metrics           // immutable; nil without Options.Metrics
	sf   singleflight.Group // the calls of this process, by key
}

// New returns the group name of session s. A name is what session.CheckName
// accepts, without ':'. Invalid options or names are not reported here: every
// call of the Group then fails with an error matching ErrInvalidOptions or
// session.ErrInvalidName before anything is sent to Redis.
func New(s *session.Session, name string, o Options) *Group {
	g := &Group{s: s, name: name, o: o}
	switch {
	case s == nil:
		g.err = fmt.Errorf("%w: %w", ErrInvalidOptions, session.ErrNilSession)
	case o.TTL < 0 || o.ErrorTTL < 0 || o.TTL > session.MaxDuration || o.ErrorTTL > session.MaxDuration:
		g.err = fmt.Errorf("%w: TTL (%v) or ErrorTTL (%v) outside 0..%v", ErrInvalidOptions, o.TTL, o.ErrorTTL, session.MaxDuration)
	case o.MaxValue < 0 || o.MaxValue > maxMaxValue:
		g.err = fmt.Errorf("%w: MaxValue %d not in [0, %d]", ErrInvalidOptions, o.MaxValue, maxMaxValue)
	}
	if g.err == nil {
		if err := session.CheckName(name); err != nil {
			g.err = fmt.Errorf("flight: group: %w", err)
		} else if strings.Contains(name, ":") {
			g.err = fmt.Errorf("flight: group %q: %w: contains ':'", name, session.ErrInvalidName)
		}
	}
	if g.o.MaxValue == 0 {
		g.o.MaxValue = DefaultMaxValue
	}
	if g.err == nil {
		met, err := newMetrics(o.Metrics, name)
		if err != nil {
			g.err = fmt.Errorf("%w: Metrics: %w", ErrInvalidOptions, err)
		}
		g.met = met
	}
	return g
}

// Do returns the value of key: a fresh cached one at once, else the one
// computed by fn, run by exactly one caller at a time across all processes
// sharing the namespace. The other callers wait without sending requests
// (FIFO on the key's mutex) and get the outcome the computing caller stored:
// its value, or its error wrapped in ErrFailed; they compute themselves only
// if no outcome was stored (its process died, its lease was lost, its ctx
// ended, or its value was too large). Concurrent calls for key in this
// process share one call.
//
// fn runs under the key's mutex hold: its ctx is canceled when the lease can
// no longer be proven, before any other caller can start computing; a late
// outcome is then discarded (Do returns an error matching ErrDiscarded and
// session.ErrLost), as is one whose store Redis refuses because the hold
// was no longer valid there (a process paused past its lease).
//
// ctx bounds this call: when it ends Do returns its cause, and fn, if this
// call runs it, sees it canceled (the other callers of the process then run
// their own call). The returned slice is shared by the callers of the
// process and must not be modified. Do fails at once with ErrNilFunc,
// ErrInvalidOptions, session.ErrInvalidName (also when "flight:<group>:<key>"
// is longer than session.MaxNameLen) or the session's error, sending
// nothing. A panic in fn is not recovered.
func (g *Group) Do(ctx context.Context, key string, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	t, ok := hook.Tracer()
	if !ok {
		return g.doKey(ctx, key, fn)
	}
	ctx, span := t.Start(ctx, "flight.Do")
	defer span.End()
	v, err := g.doKey(ctx, key, fn)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("leasehold.name", g.name), attribute.String("leasehold.key", key))
		if g.s != nil {
			span.SetAttributes(attribute.String("leasehold.namespace", g.s.Options().Namespace))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	return v, err
}

// doKey is Do without its span.
func (g *Group) doKey(ctx context.Context, key string, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	name, err := g.check(key)
	if err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, ErrNilFunc
	}
	for {
		ch := g.sf.DoChan(key, func() (any, error) { return g.do(ctx, name, fn) })
		select {
		case r := <-ch:
			var left leftError
			if errors.As(r.Err, &left) {
				if ctx.Err() == nil {
					continue // the caller whose call ran has left: run one for this caller
				}
				return nil, context.Cause(ctx)
			}
			v, _ := r.Val.([]byte)
			return v, r.Err
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// Forget drops the cached outcome of key in every process: the next Do
// computes again. A computation running when Forget is called cannot store
// its outcome afterwards (for 2*TTL, at least 10s; one running longer
// still can): its callers get it, uncached. Calls of this process that
// start after Forget do not join a call that started before. ctx bounds the
// one round trip.
func (g *Group) Forget(ctx context.Context, key string) error {
	name, err := g.check(key)
	if err != nil {
		return err
	}
	g.sf.Forget(key)
	if _, err := hook.Env(g.s, scripts.FlightMutex(name)).FlightForget(ctx, name, g.keep(2*g.o.TTL)); err != nil {
		return fmt.Errorf("flight: forget %q: %w", name, hook.Refusal(err))
	}
	return nil
}

// check validates the group and key and returns the key's flight name
// "<group>:<key>".
func (g *Group) check(key string) (string, error) {
	if g.err != nil {
		return "", g.err
	}
	if err := session.CheckName(key); err != nil {
		return "", fmt.Errorf("flight: key: %w", err)
	}
	name := g.name + ":" + key
	if n := len(scripts.FlightMutex(name)); n > session.MaxNameLen {
		return "", fmt.Errorf("flight: key %.32q...: %w: \"flight:<group>:<key>\" is %d bytes, longer than %d",
			key, session.ErrInvalidName, n, session.MaxNameLen)
	}
	if err := g.s.Err(); err != nil {
		return "", err
	}
	return name, nil
}

// leftError marks the failure of a shared call caused by the end of the ctx
// of the caller that ran it: the other callers of the process run again.
type leftError struct{ err error }

func (e leftError) Error() string { return e.err.Error() }
func (e leftError) Unwrap() error { return e.err }

// left returns err, marked as leftError when ctx has ended.
func left(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return leftError{context.Cause(ctx)}
	}
	return err
}

// do is one call of this process for flight key name: read the cache; on a
// miss, take the key's mutex, read again, compute and store, release.
func (g *Group) do(ctx context.Context, name string, fn Func) ([]byte, error) {
	env := hook.Env(g.s, scripts.FlightMutex(name))
	e, err := env.FlightGet(ctx, name)
	if err != nil {
		return nil, left(ctx, fmt.Errorf("flight: read %q: %w", name, hook.Refusal(err)))
	}
	if v, err, ok := cached(e); ok {
		g.met.hit()
		return v, err
	}
	seen := e.Latest()
	m := mutex.New(g.s, scripts.FlightMutex(name))
	var h *session.Hold
	if g.o.ServeStale && e.HasValue() {
		h, err = m.TryLock(ctx)
		if errors.Is(err, mutex.ErrLocked) || errors.Is(err, session.ErrRestartGrace) {
			g.met.staleServe()
			return e.Value, nil // another caller recomputes it
		}
	} else {
		h, err = m.Lock(ctx) // FIFO; waiting sends no requests
	}
	if err != nil {
		return nil, left(ctx, fmt.Errorf("flight: %q: %w", name, err))
	}
	defer g.release(ctx, h)

	// Whoever held the mutex before may have stored an outcome meanwhile.
	if e, err = env.FlightGet(ctx, name); err != nil {
		return nil, left(ctx, fmt.Errorf("flight: read %q: %w", name, err))
	}
	if e.Latest() > seen {
		g.met.waited()
		return latest(e)
	}
	if v, err, ok := cached(e); ok {
		g.met.waited()
		return v, err
	}
	return g.compute(ctx, h, name, fn)
}

// compute runs fn under hold h and stores its outcome, fenced by h.
func (g *Group) compute(ctx context.Context, h *session.Hold, name string, fn Func) ([]byte, error) {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(h.Context(), func() { cancel(context.Cause(h.Context())) })
	defer stop()

	v, ferr := fn(fctx)
	if herr := h.Err(); herr != nil {
		g.met.computed("discarded")
		return nil, fmt.Errorf("%w: %w", ErrDiscarded, herr)
	}
	if ferr != nil && ctx.Err() != nil {
		g.met.computed("unstored") // the caller left: not the computation's failure
		return nil, leftError{context.Cause(ctx)}
	}
	if ferr == nil && len(v) > g.o.MaxValue {
		g.met.computed("unstored")
		return nil, fmt.Errorf("%w: %d bytes, MaxValue is %d", ErrValueTooLarge, len(v), g.o.MaxValue)
	}
	data, fresh, isErr := v, g.o.TTL, false
	if ferr != nil {
		// The error's text is stored as a value is, within MaxValue (the
		// callers of this process get ferr itself).
		msg := ferr.Error()
		if len(msg) > g.o.MaxValue {
			msg = strings.ToValidUTF8(msg[:g.o.MaxValue], "")
		}
		data, fresh, isErr = []byte(msg), g.o.ErrorTTL, true
	}
	// The store is bounded by the hold: past its deadline it would be refused.
	res, err := hook.Env(g.s, scripts.FlightMutex(name)).FlightStore(h.Context(), name, h.ID(), h.Token(), isErr, data, fresh, g.keep(fresh))
	switch {
	case h.Err() != nil && (err != nil || res != scripts.FlightSaved):
		g.met.computed("discarded")
		return nil, fmt.Errorf("%w: %w", ErrDiscarded, h.Err())
	case err != nil:
		// Unknown whether it was stored: the callers of this process get
		// the outcome; the others compute again if it was not.
		g.met.computed("unstored")
	case res == scripts.FlightNotHolder || res == scripts.FlightStale:
		g.met.computed("discarded")
		return nil, fmt.Errorf("%w: %w: Redis no longer records this hold as the key's computer",
			ErrDiscarded, session.ErrLost)
	case res == scripts.FlightForgotten:
		g.met.computed("unstored")
	case isErr:
		g.met.computed("failed")
	default:
		g.met.computed("stored")
	}
	if ferr != nil {
		return nil, fmt.Errorf("%w: %w", ErrFailed, ferr)
	}
	return v, nil
}

// release releases h, bounded by the session's TTL rather than by ctx, which
// may have ended: a release that fails is retried by the session.
func (g *Group) release(ctx context.Context, h *session.Hold) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.s.Options().TTL)
	defer cancel()
	_ = h.Release(rctx)
}

// keep is how long an outcome fresh for fresh is kept in Redis.
func (g *Group) keep(fresh time.Duration) time.Duration {
	if g.o.ServeStale {
		fresh = max(fresh, 2*g.o.TTL) // a value stays to be served stale
	}
	return max(fresh, minKeep)
}

// cached returns the outcome of e that is fresh, if any.
func cached(e scripts.FlightEntry) ([]byte, error, bool) {
	switch {
	case e.ErrFresh && e.ErrToken > e.ValueToken:
		return nil, fmt.Errorf("%w: %s", ErrFailed, e.Err), true
	case e.ValueFresh:
		return e.Value, nil, true
	}
	return nil, nil, false
}

// latest returns the newest outcome of e, fresh or not.
func latest(e scripts.FlightEntry) ([]byte, error) {
	if e.ErrToken > e.ValueToken {
		return nil, fmt.Errorf("%w: %s", ErrFailed, e.Err)
	}
	return e.Value, nil
}
