// Package hook is how leasehold's primitives (mutex, semaphore, pool,
// election) reach the machinery behind a public session.Session and
// session.Hold, which export nothing internal. Being internal, it is a door
// only leasehold's own packages can open.
package hook

import (
	"context"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/session"
)

// Lease returns the lease behind s.
func Lease(s *session.Session) *lease.Session { return lease.Of(s) }

// Env returns what s's primitives need to run their scripts.
func Env(s *session.Session) scripts.Env { return lease.Of(s).Env() }

// Refusal returns err matching session.ErrRedisRefused when Redis refused
// the call for a reason retrying cannot fix (see lease.Refusal): every
// primitive's call that reads or writes Redis returns its error through it.
func Refusal(err error) error { return lease.Refusal(err) }

// Unwrap returns the hold behind h.
func Unwrap(h *session.Hold) *lease.Hold { return lease.HoldOf(h) }

// Claim asks s for r (see lease.Session.Claim) and returns the public hold.
func Claim(ctx context.Context, s *session.Session, r scripts.Resource, wait bool) (*session.Hold, error) {
	if s == nil {
		return nil, session.ErrNilSession
	}
	pub, err := lease.Of(s).ClaimPublic(ctx, r, wait)
	if err != nil {
		return nil, err
	}
	return pub.(*session.Hold), nil
}

// Tracer returns leasehold's tracer, and false when no OpenTelemetry tracer
// provider is installed (see lease.Tracer).
func Tracer() (trace.Tracer, bool) { return lease.Tracer() }
