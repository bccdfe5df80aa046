// Package clock is the arithmetic of local lease deadlines.
//
// All deadlines are computed from time.Time values that carry Go's monotonic
// clock reading (time.Now), so wall-clock steps (NTP, manual changes) never
// move them. There is no Clock interface to swap: the timing tests run under
// testing/synctest, where time.Now, timers and sleeps are virtual together,
// which a swapped Now alone could not give the loop's timers.
package clock

import "time"

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
