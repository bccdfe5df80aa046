package chaos

import (
	"time"

	"golang.org/x/sys/unix"
)

// Mono returns CLOCK_MONOTONIC in nanoseconds. Unlike time.Now's monotonic
// reading, its values are comparable across the processes of one machine, so
// that holders in different processes and the test put their events on one
// time line.
func Mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("chaos: clock_gettime: " + err.Error())
	}
	return ts.Nano()
}

// monoOf converts t (which must carry a monotonic reading, as time.Now and
// Session.Deadline do) to the Mono time line. Go's monotonic clock is
// CLOCK_MONOTONIC on Linux, so the conversion only adds the few ns between
// the two readings.
func monoOf(t time.Time) int64 {
	return Mono() + int64(time.Until(t))
}

// ms formats a Mono duration in milliseconds.
func ms(d int64) float64 { return float64(d) / 1e6 }
