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
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

const defaultTTL = 10 * time.Second

// runFlags are the flags of lock, sem and elect.
type runFlags struct {
	ttl       time.Duration
	wait      optDuration
	killAfter optDuration
	lockDelay optDuration // lock and elect only
}

func (f *runFlags) register(c *command, lockDelay bool) {
	c.fs.DurationVar(&f.ttl, "ttl", defaultTTL, "lease `TTL`: how long the hold outlives a silent leasehold on the server")
	f.wait.def = "forever"
	c.fs.Var(&f.wait, "wait", "give up after waiting this `duration` (exit 73); 0: fail at once if held")
	f.killAfter.def = "TTL/3"
	c.fs.Var(&f.killAfter, "kill-after", "after a loss, send SIGKILL this `duration` after SIGTERM; at most the TTL")
	if lockDelay {
		f.lockDelay.def = "kill-after + TTL/10"
		c.fs.Var(&f.lockDelay, "lock-delay", "after a loss, keep the resource from others this `duration` beyond the lease's expiry")
	}
}

// options validates the flags and returns the session options.
func (f *runFlags) options(c *command, g *globals) (session.Options, time.Duration, error) {
	if err := g.check(); err != nil {
		return session.Options{}, 0, err
	}
	if f.ttl < 50*time.Millisecond {
		return session.Options{}, 0, c.usageErr("--ttl %v: at least 50ms", f.ttl)
	}
	kill := f.killAfter.or(f.ttl / 3)
	if kill > f.ttl {
		return session.Options{}, 0, c.usageErr("--kill-after %v exceeds --ttl %v: a CMD ignoring SIGTERM could outlive the lease by that much", kill, f.ttl)
	}
	o := session.Options{Namespace: g.namespace, TTL: f.ttl}
	if f.lockDelay.def != "" {
		o.LockDelay = f.lockDelay.or(kill + f.ttl/10)
	}
	return o, kill, nil
}

// held is what a runner acquired.
type held struct {
	kind string // "mutex", "semaphore", "election"
	name string
	h    *session.Hold
}

// acquireFunc acquires the resource; wait=false asks for a try (--wait 0).
type acquireFunc func(ctx context.Context, s *session.Session, wait bool) (*session.Hold, error)

const lockAbout = `Runs CMD while holding mutex NAME, like flock(1), 'etcdctl lock' or
'consul lock'. Waiters are served in arrival order. CMD runs in its own process
group, with these environment variables:
  LEASEHOLD_NAME     the mutex name
  LEASEHOLD_KIND     mutex
  LEASEHOLD_TOKEN    the fencing token: strictly increasing for every grant of NAME
  LEASEHOLD_SESSION  the session id, as 'leasehold status' shows it

When CMD exits, the mutex is released (handed to the next waiter) and leasehold
exits with CMD's code. Processes CMD leaves running in the background are not
covered by the lock.

When the hold is lost while CMD runs -- the lease could not be renewed in time
(Redis down, slow or unreachable) or an operator ran 'leasehold reset' --
leasehold sends SIGTERM to CMD's process group at once, SIGKILL --kill-after
later if CMD still runs (and at once to whatever is left in the group when CMD
exits), and exits 75.

Timing. The lease is renewed every TTL/3. leasehold cancels the hold at a local
deadline, TTL*0.99-5ms after sending the last renewal Redis confirmed; Redis
expires the lease at least TTL*1%+5ms after that, and only then can anyone else
be granted the mutex. SIGTERM goes out at the local deadline: CMD is signalled
before anyone else can get the mutex. A CMD that ignores SIGTERM gets SIGKILL
--kill-after (default TTL/3) later; after a loss the mutex stays unavailable for
--lock-delay (default --kill-after + TTL/10) beyond the lease's expiry, so that
SIGKILL lands before the next holder starts. With a --lock-delay shorter than
--kill-after, such a CMD may overlap the next holder by up to the difference.
A crashed holder's mutex is free again TTL + --lock-delay after its last renewal.

What no lock service can rule out: leasehold itself paused (SIGSTOP, a frozen
VM) while CMD runs, or killed (on Linux CMD then gets SIGKILL, its children do
not), and writes CMD sent that arrive late. Give $LEASEHOLD_TOKEN to whatever
CMD writes to and let it reject tokens older than the newest it has seen.
A reset is an operator override: the next waiter gets the mutex at once, the
old CMD is signalled within one heartbeat interval (at once when its
notification connection is up), and the lock delay does not apply.

Signals sent to leasehold (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2)
are passed on to CMD; the mutex is held until CMD exits. Ctrl-Z (SIGTSTP) is
ignored: a stopped leasehold could not signal CMD in time. CMD is not the
terminal's foreground process group: it should not read from the terminal.

Exit codes: CMD's code; 73 not acquired (--wait); 75 lost while CMD ran;
125 leasehold failed; 126/127 CMD not runnable/not found; 2 usage error.
`

func cmdLock(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "lock", "lock [flags] NAME -- CMD [ARGS...]", lockAbout)
	var f runFlags
	f.register(c, true)
	name, argv, err := parseRunner(c, args, stdout)
	if err != nil {
		return err
	}
	o, kill, err := f.options(c, g)
	if err != nil {
		return err
	}
	return runHeld(ctx, g, o, f.wait, kill, "mutex", name, argv,
		func(ctx context.Context, s *session.Session, wait bool) (*session.Hold, error) {
			m := mutex.New(s, name)
			if !wait {
				h, err := m.TryLock(ctx)
				if errors.Is(err, mutex.ErrLocked) {
					return nil, fail(exitNotAcquired, "mutex %q is held by another session (--wait 0)", name)
				}
				return h, err
			}
			return m.Lock(ctx)
		})
}

const semAbout = `Runs CMD while holding --weight permits of semaphore NAME, of which at most
--limit are held at once across all processes (every user must pass the same
--limit; a different one fails instead of silently using two limits). Waiters
are served in arrival order. CMD gets LEASEHOLD_NAME, LEASEHOLD_KIND
(semaphore), LEASEHOLD_TOKEN and LEASEHOLD_SESSION, runs in its own process
group, and is handled as by 'leasehold lock' (see 'leasehold lock -h'): on a
loss it gets SIGTERM before anyone else can be granted its permits, SIGKILL
--kill-after later, and leasehold exits 75. Semaphores have no lock delay: a
CMD that ignores SIGTERM may run up to --kill-after beside the permits' next
holder, so keep --kill-after small or make CMD honour SIGTERM.
`

func cmdSem(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "sem", "sem [flags] NAME --limit N -- CMD [ARGS...]", semAbout)
	var f runFlags
	f.register(c, false)
	limit := c.fs.Int64("limit", 0, "at most `N` permits held at once (required)")
	weight := c.fs.Int64("weight", 1, "`W` permits: what this CMD needs of the limit")
	name, argv, err := parseRunner(c, args, stdout)
	if err != nil {
		return err
	}
	if *limit <= 0 {
		return c.usageErr("--limit N (N > 0) is required")
	}
	if *weight <= 0 || *weight > *limit {
		return c.usageErr("--weight %d: must be 1 to --limit (%d)", *weight, *limit)
	}
	o, kill, err := f.options(c, g)
	if err != nil {
		return err
	}
	return runHeld(ctx, g, o, f.wait, kill, "semaphore", name, argv,
		func(ctx context.Context, s *session.Session, wait bool) (*session.Hold, error) {
			sem := semaphore.New(s, name, *limit)
			var h *session.Hold
			var err error
			if wait {
				h, err = sem.Acquire(ctx, *weight)
			} else if h, err = sem.TryAcquire(ctx, *weight); errors.Is(err, semaphore.ErrNoPermits) {
				return nil, fail(exitNotAcquired, "semaphore %q has no %s free (--wait 0)", name, plural(int(*weight), "permit", "permits"))
			}
			if errors.Is(err, semaphore.ErrLimitMismatch) {
				return nil, fail(exitFailed, "semaphore %q: %v (--limit %d)", name, err, *limit)
			}
			return h, err
		})
}

const electAbout = `Campaigns in election NAME and runs CMD while this process leads: one active
scheduler among N replicas. Candidates are served in arrival order. CMD gets
LEASEHOLD_NAME, LEASEHOLD_KIND (election), LEASEHOLD_TOKEN (the term: strictly
increasing across leaders) and LEASEHOLD_SESSION, runs in its own process
group, and is handled as by 'leasehold lock' (see 'leasehold lock -h'): when
leadership is lost it gets SIGTERM before anyone else can be elected, SIGKILL
--kill-after later, and leasehold exits 75. When CMD exits, leasehold resigns
(the next candidate leads at once) and exits with CMD's code. --wait 0 is not
supported (an election has no try).
`

func cmdElect(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "elect", "elect [flags] NAME [--value V] -- CMD [ARGS...]", electAbout)
	var f runFlags
	f.register(c, true)
	host, _ := os.Hostname()
	value := c.fs.String("value", host+"/"+strconv.Itoa(os.Getpid()), "the leader's `value`, shown to observers and by status")
	name, argv, err := parseRunner(c, args, stdout)
	if err != nil {
		return err
	}
	if f.wait.set && f.wait.d == 0 {
		return c.usageErr("--wait 0 is not supported (an election has no try); give a duration")
	}
	if len(*value) > election.MaxValueLen {
		return c.usageErr("--value longer than %d bytes", election.MaxValueLen)
	}
	o, kill, err := f.options(c, g)
	if err != nil {
		return err
	}
	return runHeld(ctx, g, o, f.wait, kill, "election", name, argv,
		func(ctx context.Context, s *session.Session, _ bool) (*session.Hold, error) {
			return election.New(s, name).Campaign(ctx, *value)
		})
}

// parseRunner parses "NAME -- CMD [ARGS...]" with flags anywhere before "--".
func parseRunner(c *command, args []string, stdout io.Writer) (string, []string, error) {
	pos, argv, hasCmd, err := c.parse(args, stdout)
	if err != nil {
		return "", nil, err
	}
	switch {
	case len(pos) == 0:
		return "", nil, c.usageErr("no NAME")
	case len(pos) > 1:
		return "", nil, c.usageErr("unexpected %q before \"--\"; put the command after \"--\"", pos[1])
	case !hasCmd || len(argv) == 0:
		return "", nil, c.usageErr("no command: put it after \"--\"")
	}
	kind := map[string]string{"lock": "mutex", "sem": "semaphore", "elect": "election"}[c.name]
	if err := checkName(kind, pos[0]); err != nil {
		return "", nil, err
	}
	return pos[0], argv, nil
}

// forwarded are the signals passed on to CMD.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTSTP}

// runHeld opens a session, acquires the resource and runs argv under it.
func runHeld(ctx context.Context, g *globals, o session.Options, wait optDuration, kill time.Duration,
	kind, name string, argv []string, acquire acquireFunc) error {
	opt, err := clientOption(g.urls()...)
	if err != nil {
		return err
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		code := exitNotFound
		if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist) {
			code = exitNotExec
		}
		return fail(code, "%s: %v", argv[0], unwrapExec(err))
	}

	// Signals: until CMD runs they interrupt the wait; then they go to CMD.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	wctx, cancelWait := context.WithCancelCause(ctx)
	defer cancelWait(nil)
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			select {
			case sig := <-sigs:
				if sig == syscall.SIGTSTP {
					continue // see supervise
				}
				cancelWait(interrupted{sig})
				return
			case <-stopWatch:
				return
			}
		}
	}()
	stopWatching := func() { close(stopWatch); <-watchDone }

	dctx, cancel := context.WithTimeout(wctx, o.TTL+opt.Dialer.Timeout+5*time.Second)
	s, err := session.Dial(dctx, opt, o)
	cancel()
	if err != nil {
		stopWatching()
		if sig := interruptedBy(wctx); sig != nil {
			return fail(128+int(sig.(syscall.Signal)), "interrupted by %v while connecting", sig)
		}
		return fail(exitFailed, "open a session on Redis at %s: %v", describeAddr(opt), err)
	}
	defer s.Close()

	actx, cancelA := wctx, context.CancelFunc(func() {})
	if wait.set && wait.d > 0 {
		actx, cancelA = context.WithTimeoutCause(wctx, wait.d, errWaited)
	}
	h, err := acquire(actx, s, !wait.set || wait.d > 0)
	cancelA()
	stopWatching()
	if err != nil {
		var ee *exitErr
		switch {
		case errors.As(err, &ee):
			return err
		case interruptedBy(wctx) != nil:
			sig := interruptedBy(wctx)
			return fail(128+int(sig.(syscall.Signal)), "interrupted by %v while waiting for %s %q", sig, kind, name)
		case errors.Is(err, errWaited):
			return fail(exitNotAcquired, "%s %q still not acquired after %v (--wait)", kind, name, wait.d)
		}
		return fail(exitFailed, "acquire %s %q: %v", kind, name, err)
	}
	return supervise(s, held{kind: kind, name: name, h: h}, argv, kill, sigs)
}

var errWaited = errors.New("--wait elapsed")

type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string { return "interrupted by " + i.sig.String() }

func interruptedBy(ctx context.Context) os.Signal {
	var i interrupted
	if errors.As(context.Cause(ctx), &i) {
		return i.sig
	}
	return nil
}

func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// supervise runs argv while hd is held: it signals CMD's process group when
// the hold ends, passes on the signals leasehold gets, and returns CMD's
// exit code, or exitLost.
func supervise(s *session.Session, hd held, argv []string, kill time.Duration, sigs chan os.Signal) error {
	h := hd.h
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"LEASEHOLD_NAME="+hd.name,
		"LEASEHOLD_KIND="+hd.kind,
		"LEASEHOLD_TOKEN="+strconv.FormatInt(h.Token(), 10),
		"LEASEHOLD_SESSION="+s.ID(),
	)
	setProcAttr(cmd)
	// Pdeathsig follows the thread that started CMD: keep it alive.
	runtime.LockOSThread()
	if h.Err() != nil {
		return fail(exitLost, "lost %s %q before the command started: %v", hd.kind, hd.name, h.Err())
	}
	if err := cmd.Start(); err != nil {
		code := exitNotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return fail(code, "%s: %v", argv[0], unwrapExec(err))
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	var lost bool
	var killTimer <-chan time.Time
	var werr error
loop:
	for {
		select {
		case werr = <-waited:
			break loop
		case <-h.Done():
			if lost {
				continue
			}
			lost = true
			_ = signalGroup(cmd.Process, syscall.SIGTERM)
			t := time.NewTimer(kill)
			defer t.Stop()
			killTimer = t.C
			fmt.Fprintf(os.Stderr, "leasehold: lost %s %q (%v); sent SIGTERM to the command, SIGKILL in %v if it still runs\n",
				hd.kind, hd.name, context.Cause(h.Context()), kill)
		case <-killTimer:
			killTimer = nil
			_ = signalGroup(cmd.Process, syscall.SIGKILL)
			fmt.Fprintf(os.Stderr, "leasehold: the command still ran %v after SIGTERM; sent SIGKILL\n", kill)
		case sig := <-sigs:
			if sig == syscall.SIGTSTP {
				// A stopped leasehold could not signal CMD on a loss; and a
				// stopped CMD would not see the signals passed on to it.
				fmt.Fprintln(os.Stderr, "leasehold: ignoring SIGTSTP (Ctrl-Z) while the command runs; use Ctrl-C to stop it")
				continue
			}
			_ = signalGroup(cmd.Process, sig.(syscall.Signal))
		}
	}
	if !lost && h.Err() != nil && errors.Is(h.Err(), session.ErrLost) {
		// Lost while CMD was exiting: its work may be incomplete.
		lost = true
		fmt.Fprintf(os.Stderr, "leasehold: lost %s %q (%v) as the command exited\n", hd.kind, hd.name, context.Cause(h.Context()))
	}
	if lost {
		_ = signalGroup(cmd.Process, syscall.SIGKILL) // whatever CMD left in its group
		return fail(exitLost, "")
	}
	// Release before exiting so that the next waiter is served at once.
	rctx, cancel := context.WithTimeout(context.Background(), s.Options().TTL)
	rerr := h.Release(rctx)
	cancel()
	if rerr != nil && errors.Is(rerr, session.ErrLost) {
		fmt.Fprintf(os.Stderr, "leasehold: lost %s %q (%v) as the command exited\n", hd.kind, hd.name, rerr)
		return fail(exitLost, "")
	}
	if rerr != nil {
		fmt.Fprintf(os.Stderr, "leasehold: warning: release %s %q: %v (it expires with the lease)\n", hd.kind, hd.name, rerr)
	}
	return exitCode(cmd.ProcessState, werr)
}

// exitCode turns CMD's end into leasehold's exit: its code, or 128+signal.
func exitCode(ps *os.ProcessState, werr error) error {
	if ps == nil {
		return fail(exitFailed, "wait for the command: %v", werr)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fail(128+int(ws.Signal()), "")
	}
	if code := ps.ExitCode(); code != 0 {
		return fail(code, "")
	}
	return nil
}
