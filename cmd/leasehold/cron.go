//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/jobctx"
	"github.com/leasehold/leasehold/schedule"
	"github.com/leasehold/leasehold/session"
)

const cronAbout = `Runs CMD once per slot of SPEC on whichever process wins the slot, across
every 'leasehold cron NAME' (and every schedule.Job NAME) on the namespace:
start it on each replica and each slot runs on one of them, whatever their
clocks say (Redis decides, by its own clock). SPEC is a cron expression of
five fields (minute hour day-of-month month day-of-week, in --tz, UTC by
default) or a descriptor: @hourly, @daily, @weekly, @monthly, @yearly,
@every DURATION (whole seconds, 1s to five years; its slots are multiples of
DURATION).

Each run holds job NAME's mutex ("schedule:NAME"), so runs never overlap; a
run that outlasts its interval makes the slots that pass meanwhile skip (see
'leasehold jobs'). CMD runs in its own process group, with:
  LEASEHOLD_NAME     the job name
  LEASEHOLD_KIND     job
  LEASEHOLD_SLOT     the slot, RFC 3339 in UTC: the same on every node
  LEASEHOLD_TOKEN    the fencing token of the run: strictly increasing per job
  LEASEHOLD_SESSION  the session id

CMD is supervised as by 'leasehold lock' (see 'leasehold lock -h'): when the
run's hold is lost it gets SIGTERM before anyone else can start a run,
SIGKILL --kill-after later; signals sent to leasehold go to CMD while it
runs. CMD's exit code is recorded with the run ('leasehold jobs'), and
leasehold waits for the next slot; Redis errors and lost sessions are
retried.

leasehold runs until a signal (or --runs): a signal while it waits for a
slot ends it with 128+N; a signal while CMD runs goes to CMD, and leasehold
exits with CMD's code once CMD exits, as lock does. With --runs N it exits
after running N slots itself, with the last one's code.

Exit codes: the last run's CMD code (a signal during a run, --runs); 128+N
a signal while waiting; 75 the last run's hold was lost (--runs); 125
leasehold failed; 126/127 CMD not runnable/not found; 2 usage error.
`

// cmdCron is 'leasehold cron'.
func cmdCron(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "cron", "cron [flags] NAME --schedule SPEC -- CMD [ARGS...]", cronAbout)
	var f runFlags
	f.register(c, true)
	spec := c.fs.String("schedule", "", "the cron `SPEC` (required): five fields, or @hourly, @every 10s, ...")
	tz := c.fs.String("tz", "", "the time `zone` of SPEC's fields (IANA, e.g. Europe/Paris); default UTC")
	misfire := c.fs.String("misfire", "skip", "a slot that could not start in time: `skip` it (beyond --grace), or run the latest missed one once")
	grace := c.fs.Duration("grace", 0, "how late a slot may still start (default 1m; at least 1ms)")
	history := c.fs.Int("history", 0, "runs Redis keeps for 'leasehold jobs' (default 10, at most 1000)")
	runs := c.fs.Int("runs", 0, "exit after this process ran `N` slots (0: until a signal)")
	name, argv, err := parseRunner(c, args, stdout)
	if err != nil {
		return err
	}
	if f.wait.set {
		return c.usageErr("--wait does not apply to cron")
	}
	o, kill, err := f.options(c, g)
	if err != nil {
		return err
	}
	so := schedule.Options{Grace: *grace, History: *history}
	switch *misfire {
	case "skip":
	case "latest":
		so.Misfire = schedule.RunLatest
	default:
		return c.usageErr("--misfire %q: skip or latest", *misfire)
	}
	if *tz != "" {
		if so.Location, err = time.LoadLocation(*tz); err != nil {
			return c.usageErr("--tz: %v", err)
		}
	}
	if *runs < 0 {
		return c.usageErr("--runs %d: negative", *runs)
	}
	if *spec == "" {
		return c.usageErr("--schedule SPEC is required")
	}
	opt, err := g.clientOption()
	if err != nil {
		return err
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return lookPathErr(argv[0], err)
	}
	// The job's arguments first (schedule.New sends nothing): a bad one is
	// a usage error, whether or not Redis answers.
	if _, err := schedule.New(session.NewManager(nil, o), name, *spec, so); err != nil {
		return c.usageErr("%v", err)
	}
	opt.DisableCache = true // as session.Dial builds its client
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = o.TTL / 2
	}
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return fail(exitFailed, "connect to Redis at %s: %v", describeAddr(opt), err)
	}
	defer client.Close()
	if o.Shards, err = cronShards(ctx, g, client); err != nil {
		return err
	}
	m := session.NewManager(client, o)
	defer m.Close()
	job, err := schedule.New(m, name, *spec, so)
	if err != nil {
		return c.usageErr("%v", err)
	}
	return runCron(ctx, job, argv, kill, *runs)
}

// cronShards returns the Options.Shards of cron's sessions: --shards, else
// the shard count Redis records for the namespace (one read), 0 for an
// unsharded namespace or one without a layout yet.
func cronShards(ctx context.Context, g *globals, c rueidis.Client) (int, error) {
	if g.shards > 0 {
		return g.shards, nil
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	n, err := readShards(ctx, c, g.namespace)
	if err != nil {
		return 0, fail(exitFailed, "%v", err)
	}
	if n < 2 {
		return 0, nil
	}
	return n, nil
}

// lookPathErr is the exit for a CMD that cannot be found or run.
func lookPathErr(cmd string, err error) error {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return fail(exitNotFound, "%s: %v", cmd, unwrapExec(err))
	}
	return fail(exitNotExec, "%s: %v", cmd, unwrapExec(err))
}

// errRunsDone ends a cron that ran its --runs.
var errRunsDone = errors.New("--runs reached")

// interruptedRun ends a cron signalled while CMD ran.
type interruptedRun struct{ sig os.Signal }

func (i interruptedRun) Error() string { return "interrupted by " + i.sig.String() + " during a run" }

// runCron runs job with CMD argv as each run, until a signal or runs runs.
func runCron(ctx context.Context, job *schedule.Job, argv []string, kill time.Duration, runs int) error {
	rctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	rt := startSigRouter(stop)
	defer rt.close()
	var last error // the last run's end, as supervise returned it
	n := 0
	err := job.Run(rctx, func(fctx context.Context, r schedule.Run) error {
		s, h := jobctx.From(fctx)
		// supervise passes leasehold's environment on to CMD; runs of one
		// cron never overlap, so setting it here is set for this run alone.
		_ = os.Setenv("LEASEHOLD_SLOT", r.Slot.UTC().Format(time.RFC3339))
		rt.running(true)
		last = supervise(s, held{kind: "job", name: job.Name(), h: h}, argv, kill, rt.toCmd, &cleanup{s: s}) // the job releases the hold, not this run
		if sig := rt.running(false); sig != nil {
			stop(interruptedRun{sig})
		}
		if n++; runs > 0 && n >= runs {
			stop(errRunsDone)
		}
		return runErr(r, last)
	})
	var ir interruptedRun
	switch cause := context.Cause(rctx); {
	case errors.Is(cause, errRunsDone) || errors.As(cause, &ir):
		return last
	case interruptedBy(rctx) != nil:
		sig := interruptedBy(rctx)
		return fail(128+int(sig.(syscall.Signal)), "interrupted by %v while waiting for a slot of job %q", sig, job.Name())
	case err != nil && ctx.Err() == nil:
		return fail(exitFailed, "job %q: %v", job.Name(), err)
	}
	return err
}

// runErr is what a run's Record says of its end: nil for CMD's exit 0,
// else its code (or the loss). It also says so on stderr.
func runErr(r schedule.Run, end error) error {
	var ee *exitErr
	if end == nil || !errors.As(end, &ee) {
		return end
	}
	err := fmt.Errorf("exit %d", ee.code)
	switch {
	case ee.code == exitLost:
		err = errors.New("lost: the command was signalled")
	case ee.msg != "":
		err = fmt.Errorf("exit %d: %s", ee.code, oneLine(ee.msg))
	}
	fmt.Fprintf(os.Stderr, "leasehold: slot %s: %v\n", r.Slot.UTC().Format(time.RFC3339), err)
	return err
}

// sigRouter sends the signals leasehold gets to CMD while a run's CMD
// runs (supervise reads them from toCmd), and ends the cron with the
// others.
type sigRouter struct {
	os    chan os.Signal
	toCmd chan os.Signal
	stop  context.CancelCauseFunc
	done  chan struct{}
	ended chan struct{}

	mu  sync.Mutex
	run bool      // a CMD runs
	got os.Signal // a signal passed on during the run (not SIGTSTP)
}

func startSigRouter(stop context.CancelCauseFunc) *sigRouter {
	rt := &sigRouter{os: make(chan os.Signal, 8), toCmd: make(chan os.Signal, 8), stop: stop,
		done: make(chan struct{}), ended: make(chan struct{})}
	signal.Notify(rt.os, forwarded...)
	go rt.loop()
	return rt
}

func (rt *sigRouter) loop() {
	defer close(rt.ended)
	for {
		select {
		case sig := <-rt.os:
			rt.route(sig)
		case <-rt.done:
			return
		}
	}
}

func (rt *sigRouter) route(sig os.Signal) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch {
	case rt.run:
		if sig != syscall.SIGTSTP {
			rt.got = sig
		}
		select {
		case rt.toCmd <- sig:
		default: // CMD has 8 signals queued already
		}
	case sig != syscall.SIGTSTP: // see supervise
		rt.stop(interrupted{sig})
	}
}

// running marks a CMD as running or not; when it ends, it returns the
// signal passed on to it, if any.
func (rt *sigRouter) running(on bool) os.Signal {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.run = on
	sig := rt.got
	rt.got = nil
	for len(rt.toCmd) > 0 && !on {
		<-rt.toCmd // not read by the CMD that ended
	}
	return sig
}

func (rt *sigRouter) close() {
	signal.Stop(rt.os)
	close(rt.done)
	<-rt.ended
}
