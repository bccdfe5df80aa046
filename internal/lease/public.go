package lease

import (
	"context"

	"github.com/leasehold/leasehold/internal/scripts"
)

// Package session's public Session and Hold wrap this package's types. Its
// init lends the machinery the three conversions below (Register), and
// internal/hook gives leasehold's primitives typed versions of them: so the
// public types expose no internal type, and the primitives still reach the
// machinery without a door any user could open.

// Public is what package session registers.
type Public struct {
	// NewHold allocates a public hold with the Hold it wraps inside it (one
	// allocation per grant) and returns both.
	NewHold func() (h *Hold, pub any)
	// Session returns the Session a public session wraps, nil for a
	// sharded one.
	Session func(pub any) *Session
	// Group returns the Group a sharded public session wraps, nil for an
	// unsharded one.
	Group func(pub any) *Group
	// Hold returns the Hold a public hold wraps.
	Hold func(pub any) *Hold
}

// public is set by Register; without it (this package's own tests) a hold is
// its own public face.
var public = Public{
	NewHold: func() (*Hold, any) { h := new(Hold); return h, h },
	Session: func(pub any) *Session { return pub.(*Session) },
	Group:   func(any) *Group { return nil },
	Hold:    func(pub any) *Hold { return pub.(*Hold) },
}

// Register installs package session's conversions. Only session's init calls it.
func Register(p Public) { public = p }

// Of returns the Session behind public session pub, nil when it is sharded.
func Of(pub any) *Session { return public.Session(pub) }

// GroupOf returns the Group behind sharded public session pub, nil when it
// is unsharded.
func GroupOf(pub any) *Group { return public.Group(pub) }

// For returns the lease that the calls for resource name of public session
// pub run on: its own, or in a sharded session the copy of name's shard
// (see Group.For).
func For(ctx context.Context, pub any, name string) (*Session, error) {
	if g := public.Group(pub); g != nil {
		return g.For(ctx, name)
	}
	return public.Session(pub), nil
}

// EnvFor returns the Env of the calls for resource name of public session
// pub that need no lease (see Group.Env).
func EnvFor(pub any, name string) scripts.Env {
	if g := public.Group(pub); g != nil {
		return g.Env(name)
	}
	return public.Session(pub).Env()
}

// HoldOf returns the Hold behind public hold pub.
func HoldOf(pub any) *Hold { return public.Hold(pub) }
