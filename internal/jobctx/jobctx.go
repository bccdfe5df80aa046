// Package jobctx carries a scheduled job's run (its session and its hold
// of the job's mutex) in the context package schedule gives fn, for the
// leasehold command, which supervises a CMD under that hold as 'lock' does.
// Users of package schedule cannot reach it: a run's hold is released by
// schedule, not by fn.
package jobctx

import (
	"context"

	"github.com/leasehold/leasehold/session"
)

type key struct{}

type run struct {
	s *session.Session
	h *session.Hold
}

// With returns ctx carrying the run's session s and hold h.
func With(ctx context.Context, s *session.Session, h *session.Hold) context.Context {
	return context.WithValue(ctx, key{}, run{s, h})
}

// From returns the session and hold With put in ctx, or nils.
func From(ctx context.Context) (*session.Session, *session.Hold) {
	r, _ := ctx.Value(key{}).(run)
	return r.s, r.h
}
