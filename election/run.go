package election

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/session"
)

// Run keeps a process in an election for as long as ctx lasts: it campaigns
// on the Manager's live session, runs lead while it leads, and campaigns
// again when the leadership is lost (also on a new session after a lease
// loss) — the Kubernetes leaderelection pattern with a stronger loss signal:
// lead's context is canceled before anyone else can be elected.
//
// lead's context is derived from the leadership hold's context, so that it is
// canceled in the same instant as the hold; it carries none of ctx's values.
// Leadership(ctx) returns the hold inside lead, for its term (Token).
//
// When lead returns while still leading, Run resigns and returns lead's
// result (nil included). It returns ctx's cause when ctx ends, and the error
// when no session can be opened; a nil lead or m, an error matching
// session.ErrInvalidOptions before anything is sent.
func Run(ctx context.Context, m *session.Manager, name, value string, lead func(ctx context.Context) error) error {
	if lead == nil {
		return fmt.Errorf("election: Run: %w: nil lead", session.ErrInvalidOptions)
	}
	return m.Run(ctx, func(ctx context.Context, s *session.Session) error {
		e := New(s, name)
		for {
			h, err := e.Campaign(ctx, value)
			if err != nil {
				return err
			}
			lctx, cancel := context.WithCancelCause(context.WithValue(h.Context(), leadershipKey{}, h))
			stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
			err = lead(lctx)
			stop()
			cancel(nil)
			lost := h.Err() != nil && errors.Is(h.Err(), session.ErrLost)
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), s.Options().TTL)
			_ = h.Release(rctx) // resigning; a lost hold reports ErrLost, already known
			rcancel()
			switch {
			case ctx.Err() != nil:
				return context.Cause(ctx)
			case !lost:
				return err
			case s.Err() != nil:
				return s.Err() // the Manager runs us again on a new session
			}
			// Leadership taken away while the session lives: campaign again.
		}
	})
}

type leadershipKey struct{}

// Leadership returns the leadership hold that Run passes to lead through its
// context (its Token is the term, to pass to storage that fences writers),
// or nil outside lead.
func Leadership(ctx context.Context) *session.Hold {
	h, _ := ctx.Value(leadershipKey{}).(*session.Hold)
	return h
}
