package schedule

import "time"

// WithClock returns o with the local clock now: tests skew it.
func WithClock(o Options, now func() time.Time) Options {
	o.now = now
	return o
}
