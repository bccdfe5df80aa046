package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/jobctx"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// Run runs fn once for each slot of the job that this process wins, until
// ctx ends; it then returns ctx's cause. Across every process running the
// job on the namespace, each slot runs at most once, and runs never
// overlap: a run holds the job's mutex, and fn's ctx is canceled when that
// hold ends (its loss included, before any other process can start a run)
// or when ctx ends. fn's ctx carries none of ctx's values. fn's error is
// recorded in the run's Record and does not stop Run; a panic in fn is not
// recovered.
//
// Run keeps going across lost sessions (on the Manager's next one) and
// Redis errors. It returns early only with an error matching ErrInvalid
// (nil fn), session.ErrRedisRefused (Redis refused a call, e.g. for a
// missing ACL permission), or the Manager's error once it is closed.
// Several calls of Run for one job, in one process or many, share its
// slots the same way.
func (j *Job) Run(ctx context.Context, fn func(ctx context.Context, r Run) error) error {
	if fn == nil {
		return fmt.Errorf("%w: nil func", ErrInvalid)
	}
	return j.m.Run(ctx, func(ctx context.Context, s *session.Session) error {
		r := &runner{j: j, s: s, fn: fn, log: s.Options().Logger}
		if r.log == nil {
			r.log = slog.New(slog.DiscardHandler)
		}
		return r.loop(ctx)
	})
}

// runner runs a job on one session; it lives in Run's goroutine only.
type runner struct {
	j   *Job
	s   *session.Session
	fn  func(ctx context.Context, r Run) error
	log *slog.Logger

	// offset is the Redis server's clock minus the local one, learned from
	// every claim's reply; the server's clock decides, the local one only
	// says when to ask.
	offset time.Duration
	// done is the latest slot known run or given up: slots up to it are
	// not proposed again.
	done  time.Time
	timer *time.Timer // see wait; nil until the first wait
}

// Pauses after a failed attempt, doubling.
const (
	minPause = 50 * time.Millisecond
	maxPause = 2 * time.Second
)

// loop proposes slots and claims them until ctx or the session ends.
func (r *runner) loop(ctx context.Context) error {
	pause := minPause
	for {
		if _, wait := r.propose(); wait > 0 {
			if err := r.wait(ctx, wait); err != nil {
				return err
			}
			continue
		}
		slot, err := r.attempt(ctx)
		switch {
		case err == nil:
			pause = minPause
			continue
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case r.s.Err() != nil:
			return r.s.Err() // the Manager runs us again on a new session
		case errors.Is(err, session.ErrRedisRefused):
			return fmt.Errorf("schedule: job %q: %w", r.j.name, err)
		}
		r.log.Warn("schedule: claiming a slot failed; retrying", "job", r.j.name, "slot", slot, "err", err)
		if err := r.wait(ctx, pause); err != nil {
			return err
		}
		pause = min(2*pause, maxPause)
	}
}

// propose returns the slot to claim now, or the time to wait before the
// next one comes (by the server's clock as last learned).
func (r *runner) propose() (time.Time, time.Duration) {
	now := r.j.o.now().Add(r.offset)
	if s, ok := r.j.sl.latest(r.done, now); ok {
		if g := r.grace(); g < 0 || now.Sub(s) <= g {
			return s, 0
		}
	}
	next := r.j.sl.next(later(now, r.done))
	return next, next.Sub(now)
}

// grace is how late a slot may start when the job has a record (-1: no
// limit).
func (r *runner) grace() time.Duration {
	if r.j.o.Misfire == RunLatest && !r.done.IsZero() {
		return -1
	}
	return r.j.o.Grace
}

// config is what a claim stores and applies besides the slot.
func (r *runner) config(slot time.Time) scripts.JobConfig {
	c := scripts.JobConfig{Spec: r.j.spec, Zone: r.j.zone(), Grace: r.j.o.Grace, FirstGrace: r.j.o.Grace,
		Keep: r.j.keep(r.s, slot), History: r.j.o.History}
	if r.j.o.Misfire == RunLatest {
		c.Grace = -1
	}
	return c
}

// keep is how long a job's record and history live after a write for slot
// s: three intervals and two TTLs. More than the slot's interval is what
// exactly-once needs (see the package doc); the rest keeps History.
func (j *Job) keep(s *session.Session, slot time.Time) time.Duration {
	return 3*j.sl.keptInterval(slot) + 2*s.Options().TTL
}

// attempt takes the job's mutex, asks Redis whether the slot due now is
// this process's to run, and runs it if so. It returns the slot it asked
// for.
func (r *runner) attempt(ctx context.Context) (time.Time, error) {
	h, err := mutex.New(r.s, scripts.JobMutex(r.j.name)).Lock(ctx) // waits while another process runs
	if err != nil {
		return time.Time{}, err
	}
	defer r.release(ctx, h)
	// Proposed again now that the mutex is ours: a wait for it may have
	// outlasted slots, and a run overlapping them makes them skip.
	slot, wait := r.propose()
	if wait > 0 {
		return slot, nil
	}
	return slot, r.claim(ctx, h, slot)
}

// claim asks Redis whether slot is this process's to run, under hold h of
// the job's mutex, and runs it if so.
func (r *runner) claim(ctx context.Context, h *session.Hold, slot time.Time) error {
	c, err := hook.Env(r.s, scripts.JobMutex(r.j.name)).JobClaim(h.Context(), r.j.name, h.ID(), h.Token(), slot, r.config(slot))
	if err != nil && !errors.Is(err, scripts.ErrNotReplicated) {
		return hook.Refusal(err)
	}
	r.offset = c.Now.Sub(r.j.o.now())
	r.done = later(r.done, c.Last)
	switch c.Code {
	case scripts.JobClaimed:
		if err != nil { // recorded on the master only: a failover could lose it, so it must not run
			r.done = later(r.done, slot)
			r.finish(ctx, h, true, "not run: "+err.Error())
			return err
		}
	case scripts.JobLate, scripts.JobLostData:
		r.log.Warn("schedule: slot skipped", "job", r.j.name, "slot", slot, "late", c.Code == scripts.JobLate)
		r.done = later(r.done, slot)
		return nil
	default: // done, early (wait for it), or the hold is gone (try again)
		return nil
	}
	r.done = slot
	if n := r.j.sl.between(c.Last, slot); n > 0 {
		r.j.skipped.Add(int64(n))
		r.log.Warn("schedule: slots skipped", "job", r.j.name, "skipped", n, "after", c.Last, "slot", slot)
	}
	fctx, cancel := context.WithCancelCause(jobctx.With(h.Context(), r.s, h))
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	ferr := r.fn(fctx, Run{Slot: slot, Token: h.Token()})
	stop()
	cancel(nil)
	text := ""
	if ferr != nil {
		text = ferr.Error()
	}
	r.finish(ctx, h, h.Err() != nil && errors.Is(h.Err(), session.ErrLost), text)
	return nil
}

// finish records the end of the run under h, bounded by the session's TTL
// rather than by ctx, which may have ended.
func (r *runner) finish(ctx context.Context, h *session.Hold, lost bool, errText string) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.s.Options().TTL)
	defer cancel()
	if _, err := hook.Env(r.s, scripts.JobMutex(r.j.name)).JobFinish(fctx, r.j.name, h.Token(), lost, errText, r.j.keep(r.s, r.done)); err != nil {
		r.log.Warn("schedule: recording the end of a run failed", "job", r.j.name, "token", h.Token(), "err", err)
	}
}

// release releases h, bounded by the session's TTL rather than by ctx: a
// release that fails is retried by the session.
func (r *runner) release(ctx context.Context, h *session.Hold) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.s.Options().TTL)
	defer cancel()
	_ = h.Release(rctx)
}

// wait waits d, or until ctx ends (returning its cause), on the runner's
// one timer.
func (r *runner) wait(ctx context.Context, d time.Duration) error {
	if r.timer == nil {
		r.timer = time.NewTimer(d)
	} else {
		r.timer.Reset(d) // since Go 1.23 no stale tick survives a Reset
	}
	select {
	case <-r.timer.C:
		return nil
	case <-ctx.Done():
		r.timer.Stop()
		return context.Cause(ctx)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
