package lease

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/scripts"
)

// Tracing: every Claim (mutex.Lock, semaphore.Acquire, election.Campaign,
// ...) is a span of the global OpenTelemetry tracer provider, and every
// hold it grants a span of its own from grant to end, whose last event
// says why the hold ended. With no provider installed (otel's default),
// tracing costs a claim one look at the global provider and nothing else.

// noProvider is the type of otel's global tracer provider until a program
// installs one: with it, a span would record nothing, and the claim skips
// tracing altogether (a non-recording span still costs allocations).
var noProvider = reflect.TypeOf(otel.GetTracerProvider())

// Tracer returns leasehold's tracer from the global provider, and false
// when no provider is installed.
func Tracer() (trace.Tracer, bool) {
	tp := otel.GetTracerProvider()
	if reflect.TypeOf(tp) == noProvider {
		return nil, false
	}
	return tp.Tracer(TracerName), true
}

// TracerName names leasehold's tracer (its instrumentation scope).
const TracerName = "github.com/leasehold/leasehold"

// Span attributes.
const (
	attrNamespace = attribute.Key("leasehold.namespace")
	attrName      = attribute.Key("leasehold.name")
	attrSession   = attribute.Key("leasehold.session")
	attrWait      = attribute.Key("leasehold.wait_seconds")   // from the call to its grant or failure
	attrPosition  = attribute.Key("leasehold.queue_position") // 0-based, when queued
	attrHandoff   = attribute.Key("leasehold.handoff")        // the grant was handed over by a release
	attrToken     = attribute.Key("leasehold.token")
	attrReason    = attribute.Key("leasehold.reason") // why a hold ended: see EndReason
)

// spanName names the span of a claim of r as the call users make.
func spanName(r scripts.Resource, wait bool) string {
	var op string
	switch {
	case r.Kind == scripts.Election:
		op = "Campaign"
	case r.Kind == scripts.Mutex || r.Kind == scripts.RWMutex:
		op = "Lock"
		if r.Shared {
			op = "RLock"
		}
	case r.Kind == scripts.Pool && r.Key != "":
		op = "AcquireKey"
	default:
		op = "Acquire"
	}
	if !wait {
		op = "Try" + op
	}
	return r.Kind.String() + "." + op
}

// tracedClaim is claim in a span of its own (see Tracing).
func (s *Session) tracedClaim(ctx context.Context, r scripts.Resource, wait bool) (*Hold, any, error) {
	t, ok := Tracer()
	if !ok {
		return s.claim(ctx, r, wait)
	}
	ctx, span := t.Start(ctx, spanName(r, wait), trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		h, pub, err := s.claim(ctx, r, wait)
		span.End()
		return h, pub, err
	}
	start := time.Now()
	span.SetAttributes(attrNamespace.String(s.opt.Namespace), attrName.String(r.Name), attrSession.String(s.id))
	h, pub, err := s.claim(ctx, r, wait)
	span.SetAttributes(attrWait.Float64(time.Since(start).Seconds()))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		s.traceHold(ctx, t, h)
	}
	span.End()
	return h, pub, err
}

// traceQueued records on ctx's span that the claim waits at queue
// position pos (-1: not queued).
func traceQueued(ctx context.Context, pos int64) {
	if span := trace.SpanFromContext(ctx); pos >= 0 && span.IsRecording() {
		span.SetAttributes(attrPosition.Int64(pos))
	}
}

// traceGranted records on ctx's span the grant's token and whether it was
// handed over.
func traceGranted(ctx context.Context, token int64, handoff bool) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrToken.Int64(token), attrHandoff.Bool(handoff))
	}
}

// traceHold starts the span of hold h with t, a child of the claim's span
// in ctx, which ends with the hold, its last event saying why.
func (s *Session) traceHold(ctx context.Context, t trace.Tracer, h *Hold) {
	_, span := t.Start(ctx, h.res.Kind.String()+".hold", trace.WithAttributes(
		attrNamespace.String(s.opt.Namespace), attrName.String(h.res.Name), attrSession.String(s.id),
		attrToken.Int64(h.token)))
	context.AfterFunc(h.ctx, func() {
		cause := context.Cause(h.ctx)
		span.AddEvent("hold ended", trace.WithAttributes(attrReason.String(EndReason(cause))))
		if !errors.Is(cause, ErrReleased) {
			span.SetStatus(codes.Error, cause.Error())
		}
		span.End()
	})
}

// The reasons a hold ends for, as EndReason reports them: in tracing's
// "hold ended" events and in the leasehold_holds_lost_total metric.
const (
	ReasonReleased     = "released"       // Hold.Release
	ReasonClosed       = "session_closed" // Session.Close
	ReasonLeaseLost    = "lease_lost"     // the session's lease could no longer be proven alive
	ReasonRevoked      = "revoked"        // taken away: reset, or its member removed from the pool
	ReasonKeysExpired  = "keys_expired"   // its keys could not be kept alive (a slot migrating)
	ReasonNotReclaimed = "not_reclaimed"  // Redis lost its data, and reclaiming it failed
	ReasonFailover     = "failover"       // a failover lost its grant (found by verify)
	ReasonLost         = "lost"           // any other end
)

// EndReason returns why a hold whose context ended with cause ended: one
// of the Reason constants.
func EndReason(cause error) string {
	var l *holdLost
	switch {
	case errors.Is(cause, ErrReleased):
		return ReasonReleased
	case errors.Is(cause, ErrClosed):
		return ReasonClosed
	case errors.Is(cause, ErrLeaseLost):
		return ReasonLeaseLost
	case errors.As(cause, &l):
		return l.reason
	}
	return ReasonLost
}

// holdLost is the cause of a hold taken away while its session lives: it
// matches ErrLost and says why (a Reason constant).
type holdLost struct {
	reason string
	msg    string
}

func (e *holdLost) Error() string        { return ErrLost.Error() + ": " + e.msg }
func (e *holdLost) Is(target error) bool { return target == ErrLost }

// lost returns a holdLost for reason, its text made by format and args.
func lost(reason, format string, args ...any) error {
	return &holdLost{reason: reason, msg: fmt.Sprintf(format, args...)}
}
