package schedule

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/session"
)

// Job is a named job run once per slot of its spec across every process
// that runs it on the same namespace. It is safe for concurrent use and
// starts no goroutines of its own.
type Job struct {
	m    *session.Manager // immutable
	name string           // immutable
	spec string           // immutable
	sl   slots            // immutable
	o    Options          // immutable, with defaults applied

	skipped atomic.Int64 // slots skipped, as this process's claims saw them
}

// Run is one run of a job: the slot it runs for, and its fencing token.
type Run struct {
	// Slot is the time the spec named for this run, the same on every node
	// (the run itself starts at or after it by the Redis server's clock).
	Slot time.Time
	// Token is the fencing token of the run's hold of the job's mutex:
	// strictly increasing per job, across processes and Redis restarts.
	// Pass it to whatever the run writes to (see package fence).
	Token int64
}

// Record is a run of a job as Redis recorded it; times are the Redis
// server's.
type Record struct {
	Slot    time.Time // the slot run
	Start   time.Time // when the slot was claimed
	End     time.Time // when the run ended; zero while it runs, or when its process died
	Owner   string    // the id of the session that ran it
	Token   int64     // the run's fencing token
	Err     string    // the error the run returned; "" for none
	Lost    bool      // the run ended by the loss of its hold, or its process died
	Running bool      // the run holds the job's mutex now
	Skipped int       // slots between the previous run's and this one's that did not run
}

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// New returns job name, run at the slots of spec, on the sessions of
// Manager m. spec is a cron expression of five fields (minute, hour, day of
// month, month, day of week) or a descriptor: @yearly, @monthly, @weekly,
// @daily, @hourly, or @every <duration> (whole seconds, 1s to five years; its
// slots are the multiples of the duration since the zero time, the same on
// every node). A name is what session.CheckName accepts; the job's mutex is
// named "schedule:<name>". Invalid arguments return an error matching
// ErrInvalid (and session.ErrInvalidName for a name); New sends nothing to
// Redis.
func New(m *session.Manager, name, spec string, o Options) (*Job, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil Manager", ErrInvalid)
	}
	if err := session.CheckName(name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if n := len(scripts.JobMutex(name)); n > session.MaxNameLen {
		return nil, fmt.Errorf("%w: %w: \"schedule:<name>\" is %d bytes, longer than %d",
			ErrInvalid, session.ErrInvalidName, n, session.MaxNameLen)
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	sl, err := parse(spec, o.Location)
	if err != nil {
		return nil, err
	}
	return &Job{m: m, name: name, spec: spec, sl: sl, o: o}, nil
}

// maxEvery is the longest @every interval.
const maxEvery = 5 * 365 * 24 * time.Hour

// parse parses spec, in loc unless it names its own zone.
func parse(spec string, loc *time.Location) (slots, error) {
	s, err := parser.Parse(spec)
	if err != nil {
		return slots{}, fmt.Errorf("%w: spec %q: %w", ErrInvalid, spec, err)
	}
	switch s := s.(type) {
	case cron.ConstantDelaySchedule:
		// robfig rounds an @every duration down to whole seconds, and up to
		// 1s: check the one written instead. At most five years, as a cron
		// spec's slots lie within five years: a record is kept three
		// intervals, which a longer one would overflow.
		_, after, _ := strings.Cut(spec, "@every ")
		d, err := time.ParseDuration(strings.TrimSpace(after))
		if err != nil || d < time.Second || d%time.Second != 0 || d > maxEvery {
			return slots{}, fmt.Errorf("%w: spec %q: @every takes whole seconds, from 1s to five years", ErrInvalid, spec)
		}
		return slots{every: s.Delay}, nil
	case *cron.SpecSchedule:
		if !strings.HasPrefix(spec, "TZ=") && !strings.HasPrefix(spec, "CRON_TZ=") {
			s.Location = loc
		}
		if s.Next(time.Now()).IsZero() {
			return slots{}, fmt.Errorf("%w: spec %q names no time in the next five years", ErrInvalid, spec)
		}
		return slots{spec: s}, nil
	}
	return slots{}, fmt.Errorf("%w: spec %q: unknown schedule %T", ErrInvalid, spec, s)
}

// Name returns the job's name.
func (j *Job) Name() string { return j.name }

// Skipped returns how many slots this process found skipped when it
// claimed a slot: slots between the previous run and the one it claimed
// that no process ran (a run outlasted them, or no process could run them
// in time). Record.Skipped counts the same per run, for every process.
func (j *Job) Skipped() int64 { return j.skipped.Load() }

// zone returns the name of the spec's time zone.
func (j *Job) zone() string {
	if s, ok := j.sl.spec.(*cron.SpecSchedule); ok {
		return s.Location.String()
	}
	return ""
}

// History returns up to n records of the job's latest runs, latest first,
// read in one round trip on the Manager's live session (opened if there is
// none). Redis keeps Options.History of them, for a few intervals after
// the last run (see the package doc). n <= 0 returns an error matching
// ErrInvalid.
func (j *Job) History(ctx context.Context, n int) ([]Record, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: History(%d)", ErrInvalid, n)
	}
	s, err := j.m.Session(ctx)
	if err != nil {
		return nil, err
	}
	st, err := hook.Env(s, scripts.JobMutex(j.name)).JobRead(ctx, j.name)
	if err != nil {
		return nil, fmt.Errorf("schedule: job %q: history: %w", j.name, hook.Refusal(err))
	}
	return records(st, j.sl, n), nil
}

// records returns the first n runs of st as Records.
func records(st scripts.JobState, sl slots, n int) []Record {
	out := make([]Record, 0, min(n, len(st.Runs)))
	for _, r := range st.Runs[:min(n, len(st.Runs))] {
		running := r.End.IsZero() && r.HoldID != "" && r.HoldID == st.Holder
		out = append(out, Record{
			Slot: r.Slot, Start: r.Start, End: r.End, Owner: scripts.SessionOf(r.HoldID),
			Token: r.Token, Err: r.Err, Lost: r.Lost || (r.End.IsZero() && !running),
			Running: running, Skipped: sl.between(r.Prev, r.Slot),
		})
	}
	return out
}
