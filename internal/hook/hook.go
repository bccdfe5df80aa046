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

// LeaseFor returns the lease that s's calls for resource name run on: s's
// own, or when s is sharded (Options.Shards) the lease copy of name's shard,
// opened on first use within ctx (see lease.Group.For).
func LeaseFor(ctx context.Context, s *session.Session, name string) (*lease.Session, error) {
	return lease.For(ctx, s, name)
}

// Env returns what s's calls for resource name need to run the scripts
// that need no lease (inspect, reset, stats): the keys of name's shard.
func Env(s *session.Session, name string) scripts.Env { return lease.EnvFor(s, name) }

// Go runs f in a goroutine that s owns (see lease.Session.Go); ctx is
// canceled when s ends.
func Go(s *session.Session, f func(ctx context.Context)) bool {
	if g := lease.GroupOf(s); g != nil {
		return g.Go(f)
	}
	return lease.Of(s).Go(f)
}

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
	var pub any
	var err error
	if g := lease.GroupOf(s); g != nil {
		pub, err = g.ClaimPublic(ctx, r, wait)
	} else {
		pub, err = lease.Of(s).ClaimPublic(ctx, r, wait)
	}
	if err != nil {
		return nil, err
	}
	return pub.(*session.Hold), nil
}

// Tracer returns leasehold's tracer, and false when no OpenTelemetry tracer
// provider is installed (see lease.Tracer).
func Tracer() (trace.Tracer, bool) { return lease.Tracer() }
