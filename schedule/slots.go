package schedule

import (
	"time"

	"github.com/robfig/cron/v3"
)

// maxSteps bounds the slots a computation walks through.
const maxSteps = 100_000

// slots are the times a job's spec names, the same on every node.
type slots struct {
	// every is the interval of an @every spec, whose slots are multiples of
	// it (robfig's own @every counts from whenever it is asked, which
	// differs between nodes); 0 for a cron spec.
	every time.Duration
	spec  cron.Schedule // a cron spec, in its location
}

// next returns the first slot after t.
func (sl slots) next(t time.Time) time.Time {
	if sl.every > 0 {
		return t.Truncate(sl.every).Add(sl.every)
	}
	return sl.spec.Next(t)
}

// latest returns the latest slot in (after, t], if any.
func (sl slots) latest(after, t time.Time) (time.Time, bool) {
	if sl.every > 0 {
		s := t.Truncate(sl.every)
		return s, s.After(after)
	}
	// Find a start from which the walk forward to t is short: step back
	// from t, doubling, until a slot lies between there and t.
	from := after
	for d := time.Minute; d < 200*365*24*time.Hour; d *= 2 {
		if back := t.Add(-d); !back.Before(after) && sl.spec.Next(back).After(t) {
			continue
		} else if back.After(after) {
			from = back
		}
		break
	}
	var last time.Time
	for s, i := sl.spec.Next(from), 0; !s.IsZero() && !s.After(t) && i < maxSteps; s, i = sl.spec.Next(s), i+1 {
		last = s
	}
	return last, !last.IsZero() && last.After(after)
}

// between returns the number of slots in (a, b), at most maxSteps; 0 when
// a is zero (no slot was run before b).
func (sl slots) between(a, b time.Time) int {
	if a.IsZero() {
		return 0
	}
	if sl.every > 0 {
		return max(0, int(b.Sub(a.Truncate(sl.every))/sl.every)-1)
	}
	n := 0
	for s := sl.next(a); s.Before(b) && n < maxSteps; s = sl.next(s) {
		n++
	}
	return n
}

// interval returns the time from slot s to the next one.
func (sl slots) interval(s time.Time) time.Duration {
	return sl.next(s).Sub(s)
}

// keptInterval is interval for Job.keep: at most maxEvery, which a cron
// spec's next slot past robfig's five-year search (Next's zero time, a
// negative interval) counts as.
func (sl slots) keptInterval(s time.Time) time.Duration {
	if iv := sl.interval(s); iv > 0 && iv <= maxEvery {
		return iv
	}
	return maxEvery
}
