package schedule

import (
	"fmt"
	"time"

	"github.com/leasehold/leasehold/session"
)

// Misfire says what a job does with a slot whose time passed while nobody
// could run it: every process was down, or the previous run outlasted it.
type Misfire int

const (
	// Skip runs a slot only if it starts at most Options.Grace after its
	// time; later slots are skipped (the default).
	Skip Misfire = iota
	// RunLatest runs the latest missed slot once, however late, and skips
	// the ones before it. A job with no record (new, or idle longer than its
	// record lives) still runs a slot only within Options.Grace.
	RunLatest
)

// Defaults and bounds of Options.
const (
	DefaultGrace   = time.Minute
	DefaultHistory = 10
	MaxHistory     = 1000
)

// Options configure a Job. The zero value is valid.
type Options struct {
	// Location is the time zone of the spec's fields (minutes, hours, days):
	// "0 9 * * *" runs at 9:00 there. nil (the default) means UTC, so that
	// every node agrees whatever its local zone. A spec that starts with
	// CRON_TZ=<zone> (or TZ=<zone>) uses that zone instead. @every specs
	// do not depend on it: their slots are multiples of the interval.
	Location *time.Location

	// Misfire is what to do with a slot whose time passed while it could
	// not run: Skip (the default) or RunLatest.
	Misfire Misfire

	// Grace is how late after its time a slot may still start: a slot that
	// cannot start within Grace is skipped (with RunLatest, only when the
	// job has no record). 0 means DefaultGrace (1 minute); else 1ms (Redis
	// counts it in ms) to session.MaxDuration.
	Grace time.Duration

	// History is how many records of past runs Redis keeps for History and
	// the `leasehold jobs` command. 0 means DefaultHistory (10); at most
	// MaxHistory; negative is invalid.
	History int

	now func() time.Time // the local clock; tests skew it (export_test.go)
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Misfire != Skip && o.Misfire != RunLatest:
		return o, fmt.Errorf("%w: Misfire %d is neither Skip nor RunLatest", ErrInvalid, o.Misfire)
	case o.Grace < 0 || (o.Grace > 0 && o.Grace < time.Millisecond) || o.Grace > session.MaxDuration:
		// Redis counts it in ms: under 1ms no slot could start in time.
		return o, fmt.Errorf("%w: Grace %v: 0 for the default, or 1ms..%v", ErrInvalid, o.Grace, session.MaxDuration)
	case o.History < 0 || o.History > MaxHistory:
		return o, fmt.Errorf("%w: History %d not in [0, %d]", ErrInvalid, o.History, MaxHistory)
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if o.History == 0 {
		o.History = DefaultHistory
	}
	if o.now == nil {
		o.now = time.Now
	}
	return o, nil
}
