package lease

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
	// Session returns the Session a public session wraps.
	Session func(pub any) *Session
	// Hold returns the Hold a public hold wraps.
	Hold func(pub any) *Hold
}

// public is set by Register; without it (this package's own tests) a hold is
// its own public face.
var public = Public{
	NewHold: func() (*Hold, any) { h := new(Hold); return h, h },
	Session: func(pub any) *Session { return pub.(*Session) },
	Hold:    func(pub any) *Hold { return pub.(*Hold) },
}

// Register installs package session's conversions. Only session's init calls it.
func Register(p Public) { public = p }

// Of returns the Session behind public session pub.
func Of(pub any) *Session { return public.Session(pub) }

// HoldOf returns the Hold behind public hold pub.
func HoldOf(pub any) *Hold { return public.Hold(pub) }
