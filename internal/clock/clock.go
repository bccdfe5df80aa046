// Package clock is the session's time source and the arithmetic of local
// lease deadlines.
//
// All deadlines are computed from time.Time values that carry Go's monotonic
// clock reading, so wall-clock steps (NTP, manual changes) never move them.
// Tests swap the Clock, or run under testing/synctest where the standard
// time package is itself virtual.
package clock

import "time"

// Clock tells the time. Real is the production implementation.
type Clock interface {
	// Now returns the current time with a monotonic reading.
	Now() time.Time
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

const (
	// DriftPPM is the largest rate difference between the client's and the
	// server's clocks that deadlines tolerate, in parts per million (1%).
	DriftPPM = 10_000
	// Margin is subtracted from every deadline on top of the drift allowance:
	// it covers the time between the deadline timer firing and the hold
	// contexts being canceled.
	Margin = 5 * time.Millisecond
)

// Deadline returns the last instant at which a lease renewed by a request
// sent at sent, with a server-side TTL of ttl, can still be proven alive:
//
//	sent + ttl*(1-drift) - Margin
//
// The server starts its TTL when it receives the request, which is never
// earlier than sent, so the server-side key outlives the returned deadline
// by at least ttl*drift + Margin, provided the clocks' rates differ by less
// than DriftPPM.
func Deadline(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - ttl/1_000_000*DriftPPM - Margin)
}
