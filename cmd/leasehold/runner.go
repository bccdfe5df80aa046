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
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// held is what a runner acquired.
type held struct {
	kind string // "mutex", "semaphore", "election", "pool"
	name string
	h    *session.Hold
}

// what names the hold for messages: `mutex "m"`, `pool "p" member "k"`.
func (hd held) what() string {
	if hd.kind == "pool" && hd.h != nil {
		return fmt.Sprintf("pool %q member %q", hd.name, hd.h.Resource())
	}
	return fmt.Sprintf("%s %q", hd.kind, hd.name)
}

// target is what lock, sem, elect and pool acquire hold while CMD runs.
type target struct {
	kind string // "mutex", "semaphore", "election", "pool"
	name string
	// acquire asks for the resource: with wait it blocks until granted (or
	// ctx ends); without it is a try, which fails with errBusy when the
	// resource cannot be granted at once. Other refusals that deserve their
	// own exit code come back as *exitErr.
	acquire func(ctx context.Context, s *session.Session, wait bool) (*session.Hold, error)
	// busy says why a try failed when no restart grace explains it, e.g.
	// "is held by another session"; it may read Redis through s.
	busy func(ctx context.Context, s *session.Session) string
}

// errBusy is what a target's try returns when it cannot grant at once.
var errBusy = errors.New("busy")

const lockAbout = `Runs CMD while holding mutex NAME, like flock(1), 'etcdctl lock' or
'consul lock'. Without "-- CMD", holds NAME until interrupted (SIGINT, SIGTERM,
SIGHUP or SIGQUIT), as 'etcdctl lock NAME' does: it prints the token, then
releases NAME and exits 0 when interrupted, or exits 75 if the hold is lost. Waiters are served in arrival order. CMD runs in its own process
group, with these environment variables:
  LEASEHOLD_NAME     the mutex name
  LEASEHOLD_KIND     mutex
  LEASEHOLD_TOKEN    the fencing token: strictly increasing for every grant of NAME
  LEASEHOLD_SESSION  the session id, as 'leasehold status' shows it

When CMD exits, the mutex is released (handed to the next waiter) and leasehold
exits with CMD's code. If Redis does not confirm the release within 100ms
(stalled or unreachable), leasehold exits anyway and says so: the mutex is
free again once its lease expires on the server, within the TTL. Processes CMD leaves running in the background are not
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

While CMD runs, leasehold warns on stderr once the lease is at risk -- no
heartbeat confirmed for half the TTL -- and says when Redis answers again.

Restart grace. When a session finds the namespace's data missing -- Redis
lost it (a restart without persistence), or the namespace is new: the two
cannot be told apart -- nothing is granted until the restart grace is over,
up to --restart-grace after that. leasehold then says so, once, with the time
left, before it waits (with --wait 0 it exits 73 saying so).

Exit codes: CMD's code; 73 not acquired (--wait); 75 lost while CMD ran;
125 leasehold failed; 126/127 CMD not runnable/not found; 2 usage error.
`

func cmdLock(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "lock", "lock [flags] NAME [-- CMD [ARGS...]]", lockAbout)
	var f runFlags
	f.register(c, true)
	shared := c.fs.Bool("shared", false, "a read hold of read-write mutex NAME, as 'leasehold rlock NAME'")
	name, argv, err := parseRunner(c, args, stdout)
	if err != nil {
		return err
	}
	o, kill, err := f.options(c, g)
	if err != nil {
		return err
	}
	if *shared {
		return runHeld(ctx, g, o, f.wait, kill, argv, rwTarget(name, true))
	}
	return runHeld(ctx, g, o, f.wait, kill, argv, target{
		kind: "mutex", name: name,
		acquire: func(ctx context.Context, s *session.Session, wait bool) (*session.Hold, error) {
			m := mutex.New(s, name)
			if wait {
				return m.Lock(ctx)
			}
			h, err := m.TryLock(ctx)
			if errors.Is(err, mutex.ErrLocked) {
				return nil, errBusy
			}
			return h, err
		},
		busy: func(context.Context, *session.Session) string { return "is held by another session" },
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

A --limit that differs from the limit stored for NAME is a usage error: exit
2, nothing is acquired and CMD does not run. An operator changes the limit
for everyone with 'leasehold sem-limit NAME N'; while such a limit stands it
overrides every --limit (see 'leasehold sem-limit -h').
`

func cmdSem(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "sem", "sem [flags] NAME --limit N -- CMD [ARGS...]", semAbout)
	var f runFlags
	f.register(c, false)
	limit := c.fs.Int64("limit", 0, "at most `N` permits held at once (required; the same for every user of NAME)")
	weight := c.fs.Int64("weight", 1, "`W` permits: what this CMD needs of the limit")
	name, argv, err := parseRunner(c, args, stdout)
	if err != nil {
		return err
	}
	if *limit <= 0 || *limit > semaphore.MaxLimit {
		return c.usageErr("--limit N (1 to %d) is required", int64(semaphore.MaxLimit))
	}
	if *weight <= 0 || *weight > *limit {
		return c.usageErr("--weight %d: must be 1 to --limit (%d)", *weight, *limit)
	}
	o, kill, err := f.options(c, g)
	if err != nil {
		return err
	}
	return runHeld(ctx, g, o, f.wait, kill, argv, target{
		kind: "semaphore", name: name,
		acquire: func(ctx context.Context, s *session.Session, wait bool) (*session.Hold, error) {
			sem := semaphore.New(s, name, *limit)
			var h *session.Hold
			var err error
			if wait {
				h, err = sem.Acquire(ctx, *weight)
			} else if h, err = sem.TryAcquire(ctx, *weight); errors.Is(err, semaphore.ErrNoPermits) {
				return nil, errBusy
			}
			if errors.Is(err, semaphore.ErrLimitMismatch) {
				return nil, limitMismatch(ctx, c, sem, name, *limit)
			}
			return h, err
		},
		busy: func(context.Context, *session.Session) string {
			if *weight == 1 {
				return "has no permit free"
			}
			return fmt.Sprintf("has fewer than %d permits free", *weight)
		},
	})
}

// limitMismatch is the usage error for a --limit that differs from the one
// stored for semaphore name: the command line is wrong for this semaphore,
// and running it again as it is cannot succeed.
func limitMismatch(ctx context.Context, c *command, sem *semaphore.Semaphore, name string, limit int64) error {
	stored := "the one stored in Redis"
	if st, err := sem.Stats(ctx); err == nil && st.Limit > 0 {
		stored = fmt.Sprintf("the limit %d stored in Redis", st.Limit)
	}
	return c.usageErr("--limit %d differs from %s for semaphore %q; every user of a semaphore must pass the same --limit (to change it for everyone: leasehold sem-limit %s %d)",
		limit, stored, name, esc(name), limit)
}

const electAbout = `Campaigns in election NAME and runs CMD while this process leads: one active
scheduler among N replicas. Candidates are served in arrival order. CMD gets
LEASEHOLD_NAME, LEASEHOLD_KIND (election), LEASEHOLD_TOKEN (the term: strictly
increasing across leaders) and LEASEHOLD_SESSION, runs in its own process
group, and is handled as by 'leasehold lock' (see 'leasehold lock -h'): when
leadership is lost it gets SIGTERM before anyone else can be elected, SIGKILL
--kill-after later, and leasehold exits 75. When CMD exits, leasehold resigns
(the next candidate leads at once) and exits with CMD's code. With --wait 0
leasehold campaigns once without queueing: if another session leads, it
exits 73 at once.
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
	if len(*value) > election.MaxValueLen {
		return c.usageErr("--value longer than %d bytes", election.MaxValueLen)
	}
	o, kill, err := f.options(c, g)
	if err != nil {
		return err
	}
	return runHeld(ctx, g, o, f.wait, kill, argv, target{
		kind: "election", name: name,
		acquire: func(ctx context.Context, s *session.Session, wait bool) (*session.Hold, error) {
			if wait {
				return election.New(s, name).Campaign(ctx, *value)
			}
			// A single campaign attempt that does not queue: the election
			// package has no try (yet), the session's Claim has.
			h, err := hook.Claim(ctx, s, scripts.Resource{Kind: scripts.Election, Name: name, Value: *value}, false)
			if errors.Is(err, scripts.ErrBusy) {
				return nil, errBusy
			}
			return h, err
		},
		busy: func(context.Context, *session.Session) string { return "is led by another session" },
	})
}

const poolAcquireAbout = `Claims a free member of pool NAME (the least recently released first) and
runs CMD while holding it, with the member in LEASEHOLD_MEMBER. Waiters are
served in arrival order. CMD also gets LEASEHOLD_NAME (the pool),
LEASEHOLD_KIND (pool), LEASEHOLD_TOKEN (the fencing token of the claim) and
LEASEHOLD_SESSION, runs in its own process group, and is handled as by
'leasehold lock' (see 'leasehold lock -h'), with the same exit codes: when
the member is lost -- the lease could not be renewed, or an operator removed
it from the pool ('leasehold pool rm') -- CMD gets SIGTERM, SIGKILL
--kill-after later, and leasehold exits 75. When CMD exits, the member is
released (handed to the next waiter) and leasehold exits with CMD's code.
Pools have no lock delay: a CMD that ignores SIGTERM may run up to
--kill-after beside the member's next holder.

With --wait 0, a pool without a free member (or without members: see 'leasehold
pool add') gives exit 73 at once; otherwise leasehold waits, also for members
added later.

Exit codes: CMD's code; 73 not acquired (--wait); 75 lost while CMD ran;
125 leasehold failed; 126/127 CMD not runnable/not found; 2 usage error.
`

// cmdPoolAcquire is 'leasehold pool acquire': args follow "acquire".
func cmdPoolAcquire(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "pool acquire", "pool acquire [flags] NAME -- CMD [ARGS...]", poolAcquireAbout)
	var f runFlags
	f.register(c, false)
	name, argv, err := parseRunner(c, args, stdout)
	if err != nil {
		return err
	}
	o, kill, err := f.options(c, g)
	if err != nil {
		return err
	}
	return runHeld(ctx, g, o, f.wait, kill, argv, target{
		kind: "pool", name: name,
		acquire: func(ctx context.Context, s *session.Session, wait bool) (*session.Hold, error) {
			p := pool.New(s, name)
			if wait {
				return p.Acquire(ctx)
			}
			h, err := p.TryAcquire(ctx)
			if errors.Is(err, pool.ErrExhausted) {
				return nil, errBusy
			}
			return h, err
		},
		busy: func(ctx context.Context, s *session.Session) string {
			if m, err := pool.New(s, name).Members(ctx); err == nil && len(m) == 0 {
				return "has no members (see 'leasehold pool add')"
			}
			return "has no free member"
		},
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
	case c.name == "lock" && !hasCmd:
		// lock NAME: hold the mutex until interrupted (see holdUntilSignal).
	case !hasCmd || len(argv) == 0:
		return "", nil, c.usageErr("no command: put it after \"--\"")
	}
	kind := map[string]string{"lock": "mutex", "rlock": "rwmutex", "sem": "semaphore", "elect": "election", "pool acquire": "pool", "cron": "job"}[c.name]
	if err := checkName(kind, pos[0]); err != nil {
		return "", nil, err
	}
	return pos[0], argv, nil
}

// forwarded are the signals passed on to CMD.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTSTP}

// graceReadTimeout bounds the read of the restart grace (see readGrace).
const graceReadTimeout = 2 * time.Second

// runHeld opens a session, acquires t and runs argv under it. Before a
// blocking wait, and after a try that failed, it reads the namespace's
// restart grace: while one is pending nothing can be granted, and the user
// is told so (once) rather than that someone else holds t.
func runHeld(ctx context.Context, g *globals, o session.Options, wait optDuration, kill time.Duration,
	argv []string, t target) error {
	opt, err := g.clientOption()
	if err != nil {
		return err
	}
	if len(argv) > 0 {
		if err := lookCommand(argv[0]); err != nil {
			return err
		}
	}

	// Signals: until CMD runs they interrupt the wait; then they go to CMD.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	wctx, cancelWait := context.WithCancelCause(ctx)
	defer cancelWait(nil)
	stopWatching := interruptOnSignal(sigs, cancelWait)

	dctx, cancel := context.WithTimeout(wctx, o.TTL+opt.Dialer.Timeout+5*time.Second)
	s, err := dial(dctx, g, opt, o)
	cancel()
	if err != nil {
		stopWatching()
		if sig := interruptedBy(wctx); sig != nil {
			return fail(128+int(sig.(syscall.Signal)), "interrupted by %v while connecting", sig)
		}
		if g.shards > 0 && errors.Is(err, session.ErrShardsMismatch) {
			return fail(exitUsage, "--shards %d: %v", g.shards, err)
		}
		return fail(exitFailed, "open a session on Redis at %s: %v%s", describeAddr(opt), err, connectHint(opt, err))
	}
	end := &cleanup{s: s}
	defer end.close()

	c := claim{s: s, t: t, wait: wait}
	h, err := c.acquire(wctx)
	stopWatching()
	if err != nil {
		return c.failure(ctx, wctx, err)
	}
	return supervise(s, held{kind: t.kind, name: t.name, h: h}, argv, kill, sigs, end)
}

// dial opens the session, with --shards as Options.Shards when given.
// Without it, a session the namespace refuses for its shard count (it is
// sharded: session.ErrShardsMismatch) is opened again with the count Redis
// records (readShards, on a client of its own): opening a session on an
// unsharded namespace costs nothing more.
func dial(ctx context.Context, g *globals, opt rueidis.ClientOption, o session.Options) (*session.Session, error) {
	if g.shards > 0 {
		o.Shards = g.shards
	}
	s, err := session.Dial(ctx, opt, o)
	if err == nil || g.shards > 0 || !errors.Is(err, session.ErrShardsMismatch) {
		return s, err
	}
	opt.DisableCache = true // as Dial builds its own
	c, cerr := rueidis.NewClient(opt)
	if cerr != nil {
		return nil, err
	}
	n, rerr := readShards(ctx, c, o.Namespace)
	c.Close()
	switch {
	case rerr != nil:
		return nil, fmt.Errorf("%w (%v)", err, rerr)
	case n < 2:
		return nil, err // not a sharded namespace's guard: the refusal stands
	}
	o.Shards = n
	return session.Dial(ctx, opt, o)
}

// lookCommand fails, with the exit code a shell would use, when CMD cannot
// be found.
func lookCommand(name string) error {
	_, err := exec.LookPath(name)
	if err == nil {
		return nil
	}
	code := exitNotFound
	if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist) {
		code = exitNotExec
	}
	return fail(code, "%s: %v", name, unwrapExec(err))
}

// interruptOnSignal cancels the wait for the session and the hold, with
// cause interrupted{sig}, when one of the forwarded signals other than
// SIGTSTP arrives on sigs. stop returns once it no longer reads sigs, which
// are then CMD's (see supervise).
func interruptOnSignal(sigs <-chan os.Signal, cancelWait context.CancelCauseFunc) (stop func()) {
	stopc := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case sig := <-sigs:
				if sig == syscall.SIGTSTP {
					continue // see supervise
				}
				cancelWait(interrupted{sig})
				return
			case <-stopc:
				return
			}
		}
	}()
	return func() { close(stopc); <-done }
}

// claim is runHeld's acquisition of t through s, as --wait asks: a
// blocking wait, bounded when wait is set, or one try (--wait 0).
type claim struct {
	s    *session.Session
	t    target
	wait optDuration
}

// what names the target for messages: `mutex "m"`.
func (c claim) what() string { return fmt.Sprintf("%s %q", c.t.kind, c.t.name) }

// blocks reports whether the claim waits (anything but --wait 0).
func (c claim) blocks() bool { return !c.wait.set || c.wait.d > 0 }

// acquire asks for the target until granted, refused, --wait elapsed
// (cause errWaited) or wctx ends. Before a wait it tells the user of a
// pending restart grace.
func (c claim) acquire(wctx context.Context) (*session.Hold, error) {
	if c.blocks() {
		if gr, ok := sessionGrace(wctx, c.s, c.t.name); ok && gr.pending() {
			fmt.Fprintf(os.Stderr, "leasehold: %s: waiting: %v\n", c.what(), gr)
		}
	}
	actx, cancel := wctx, context.CancelFunc(func() {})
	if c.wait.set && c.wait.d > 0 {
		actx, cancel = context.WithTimeoutCause(wctx, c.wait.d, errWaited)
	}
	defer cancel()
	return c.t.acquire(actx, c.s, c.blocks())
}

// failure turns err, from acquire, into leasehold's message and exit code:
// interrupted by a signal (wctx's cause), not acquired (--wait), or failed.
func (c claim) failure(ctx, wctx context.Context, err error) error {
	var ee *exitErr
	switch {
	case errors.As(err, &ee):
		return err
	case interruptedBy(wctx) != nil:
		sig := interruptedBy(wctx)
		return fail(128+int(sig.(syscall.Signal)), "interrupted by %v while waiting for %s", sig, c.what())
	case !c.blocks():
		if refused := c.tryRefused(ctx, err); refused != nil {
			return refused
		}
	case errors.Is(err, errWaited):
		if gr, ok := sessionGrace(ctx, c.s, c.t.name); ok && gr.pending() {
			return fail(exitNotAcquired, "%s still not acquired after %v (--wait): %v", c.what(), round(c.wait.d), gr)
		}
		return fail(exitNotAcquired, "%s still not acquired after %v (--wait)", c.what(), round(c.wait.d))
	}
	return fail(exitFailed, "acquire %s: %v", c.what(), err)
}

// tryRefused says why a try (--wait 0) was refused, or returns nil when
// err is no refusal. During a restart grace it says so rather than that
// someone holds the target: the library says so with
// session.ErrRestartGrace; the marker read here adds how long ago Redis
// lost its data.
func (c claim) tryRefused(ctx context.Context, err error) error {
	if gr, ok := sessionGrace(ctx, c.s, c.t.name); ok && gr.pending() {
		return fail(exitNotAcquired, "%s not acquired (--wait 0): %v", c.what(), gr)
	}
	if errors.Is(err, session.ErrRestartGrace) {
		return fail(exitNotAcquired, "%s not acquired (--wait 0): %s", c.what(),
			strings.TrimPrefix(err.Error(), "session: "))
	}
	if errors.Is(err, errBusy) {
		return fail(exitNotAcquired, "%s %s (--wait 0)", c.what(), c.t.busy(ctx, c.s))
	}
	return nil
}

// sessionGrace reads the restart grace of the shard of resource name
// through s's client; ok is false when it could not be read (the caller
// then says what it would have said without a grace).
func sessionGrace(ctx context.Context, s *session.Session, name string) (grace, bool) {
	ctx, cancel := context.WithTimeout(ctx, graceReadTimeout)
	defer cancel()
	gr, err := readGrace(ctx, hook.Env(s, name))
	return gr, err == nil
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
// the hold ends, passes on the signals leasehold gets, warns while the
// lease is at risk (see leaseWatch), and returns CMD's exit code, or
// exitLost.
func supervise(s *session.Session, hd held, argv []string, kill time.Duration, sigs chan os.Signal, end *cleanup) error {
	h := hd.h
	if len(argv) == 0 {
		lost := holdUntilSignal(s, hd, sigs)
		end.start()
		if lost {
			return fail(exitLost, "")
		}
		return releaseAfter(hd, end)
	}
	cmd, err := startCommand(s, hd, argv)
	if err != nil {
		return err
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	lost, werr := watchCommand(s, hd, cmd, waited, kill, sigs)
	end.start()
	if !lost && h.Err() != nil && errors.Is(h.Err(), session.ErrLost) {
		// Lost while CMD was exiting: its work may be incomplete.
		lost = true
		fmt.Fprintf(os.Stderr, "leasehold: %s as the command exited\n", lossText(hd, context.Cause(h.Context())))
	}
	if lost {
		_ = signalGroup(cmd.Process, syscall.SIGKILL) // whatever CMD left in its group
		return fail(exitLost, "")
	}
	if err := releaseAfter(hd, end); err != nil {
		return err
	}
	return exitCode(cmd.ProcessState, werr)
}

// startCommand starts argv in its own process group, with the
// LEASEHOLD_* variables of hold hd, unless the hold already ended. It
// locks the calling goroutine to its thread for good: Pdeathsig follows
// the thread that started CMD.
func startCommand(s *session.Session, hd held, argv []string) (*exec.Cmd, error) {
	h := hd.h
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"LEASEHOLD_NAME="+hd.name,
		"LEASEHOLD_KIND="+hd.kind,
		"LEASEHOLD_TOKEN="+strconv.FormatInt(h.Token(), 10),
		"LEASEHOLD_SESSION="+s.ID(),
	)
	if hd.kind == "pool" {
		cmd.Env = append(cmd.Env, "LEASEHOLD_MEMBER="+h.Resource())
	}
	setProcAttr(cmd)
	runtime.LockOSThread()
	if h.Err() != nil {
		return nil, fail(exitLost, "%s before the command started", lossText(hd, context.Cause(h.Context())))
	}
	if err := cmd.Start(); err != nil {
		code := exitNotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return nil, fail(code, "%s: %v", argv[0], unwrapExec(err))
	}
	return cmd, nil
}

// watchCommand waits for CMD to exit (waited) and returns its Wait error.
// Meanwhile it passes on the signals leasehold gets, warns while the lease
// is at risk, and when hold hd ends sends CMD's group SIGTERM, then SIGKILL
// after kill; lost says that the hold ended.
func watchCommand(s *session.Session, hd held, cmd *exec.Cmd, waited <-chan error, kill time.Duration,
	sigs <-chan os.Signal) (lost bool, werr error) {
	h := hd.h
	watch := &leaseWatch{deadline: s.Deadline, ttl: s.Options().TTL, what: hd.what(), w: os.Stderr}
	risk := time.NewTimer(watch.check(time.Now()))
	defer risk.Stop()
	riskC := risk.C
	var killTimer <-chan time.Time
	for {
		select {
		case werr = <-waited:
			return lost, werr
		case <-riskC:
			risk.Reset(watch.check(time.Now()))
		case <-h.Done():
			if lost {
				continue
			}
			lost, riskC = true, nil
			_ = signalGroup(cmd.Process, syscall.SIGTERM)
			t := time.NewTimer(kill)
			defer t.Stop()
			killTimer = t.C
			fmt.Fprintf(os.Stderr, "leasehold: %s; sent SIGTERM to the command, SIGKILL in %v if it still runs\n",
				lossText(hd, context.Cause(h.Context())), round(kill))
		case <-killTimer:
			killTimer = nil
			_ = signalGroup(cmd.Process, syscall.SIGKILL)
			fmt.Fprintf(os.Stderr, "leasehold: the command still ran %v after SIGTERM; sent SIGKILL\n", round(kill))
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
}

// cleanupTimeout bounds what leasehold still asks of Redis once CMD has
// exited: the release and the session's close. A stalled Redis does not
// hold leasehold up beyond it: what it could not release expires with the
// lease on the server.
const cleanupTimeout = 100 * time.Millisecond

// cleanup is runHeld's end of the session: once CMD has exited (start),
// the release and the close share one deadline, cleanupTimeout later.
type cleanup struct {
	s  *session.Session
	by time.Time // zero until start
}

// start begins the cleanup's time.
func (c *cleanup) start() {
	if c.by.IsZero() {
		c.by = time.Now().Add(cleanupTimeout)
	}
}

// context bounds a call of the cleanup.
func (c *cleanup) context() (context.Context, context.CancelFunc) {
	c.start()
	return context.WithDeadline(context.Background(), c.by)
}

// close closes the session, waiting for it only until the deadline; the
// close goes on in the background, cut short when the process exits.
func (c *cleanup) close() {
	ctx, cancel := c.context()
	defer cancel()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = c.s.Close()
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
}

// holdUntilSignal keeps hold hd, for 'lock NAME' without a command, until
// SIGINT, SIGTERM, SIGHUP or SIGQUIT asks to release it, and returns
// false; or until it is lost, and returns true. It prints the token on
// stdout first, and warns while the lease is at risk.
func holdUntilSignal(s *session.Session, hd held, sigs <-chan os.Signal) (lost bool) {
	h := hd.h
	fmt.Printf("holding %s: token %d, session %s; interrupt (Ctrl-C) or send SIGTERM to release it\n",
		hd.what(), h.Token(), s.ID())
	watch := &leaseWatch{deadline: s.Deadline, ttl: s.Options().TTL, what: hd.what(), w: os.Stderr}
	risk := time.NewTimer(watch.check(time.Now()))
	defer risk.Stop()
	for {
		select {
		case <-risk.C:
			risk.Reset(watch.check(time.Now()))
		case <-h.Done():
			fmt.Fprintf(os.Stderr, "leasehold: %s\n", lossText(hd, context.Cause(h.Context())))
			return true
		case sig := <-sigs:
			switch sig {
			case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
				return false
			}
			fmt.Fprintf(os.Stderr, "leasehold: ignoring %v; interrupt (Ctrl-C) or send SIGTERM to release %s\n", sig, hd.what())
		}
	}
}

// releaseAfter releases hold hd once CMD exited, so that the next waiter
// is served at once, within end's deadline. It fails with exitLost when
// the hold turns out lost; any other failure is a warning (the hold
// expires with the lease).
func releaseAfter(hd held, end *cleanup) error {
	h := hd.h
	rctx, cancel := end.context()
	rerr := h.Release(rctx)
	cancel()
	if rerr != nil && errors.Is(rerr, session.ErrLost) {
		cause := context.Cause(h.Context())
		if !errors.Is(cause, session.ErrLost) {
			cause = rerr
		}
		fmt.Fprintf(os.Stderr, "leasehold: %s as the command exited\n", lossText(hd, cause))
		return fail(exitLost, "")
	}
	switch {
	case errors.Is(rerr, context.DeadlineExceeded):
		fmt.Fprintf(os.Stderr, "leasehold: warning: Redis did not confirm the release of %s within %v; "+
			"it is free again when its lease expires on the server, within the TTL\n", hd.what(), cleanupTimeout)
	case rerr != nil:
		fmt.Fprintf(os.Stderr, "leasehold: warning: %s (it expires with the lease)\n", cleanCause(rerr))
	}
	return nil
}

// leaseWatch warns while CMD runs and the lease is at risk: no heartbeat
// confirmed for half the TTL, i.e. less than TTL/2 left before the local
// deadline (Redis down, paused or unreachable). It warns once per outage,
// says when a heartbeat is confirmed again, and is driven by a timer: check
// returns when to call it next.
type leaseWatch struct {
	deadline func() time.Time // the session's local deadline (Session.Deadline)
	ttl      time.Duration
	what     string // `mutex "m"`
	w        io.Writer

	atRisk bool
	since  time.Time // when the warning was printed
}

func (lw *leaseWatch) check(now time.Time) time.Duration {
	left := lw.deadline().Sub(now)
	if left < lw.ttl/2 {
		if !lw.atRisk {
			lw.atRisk, lw.since = true, now
			fmt.Fprintf(lw.w, "leasehold: warning: no heartbeat confirmed for %v (Redis unreachable, paused or slow): "+
				"%s will be lost in %v unless Redis answers\n", round(lw.ttl-left), lw.what, round(max(left, 0)))
		}
		// Look again soon, to say when it is over.
		return max(min(lw.ttl/20, max(left, 0)), 10*time.Millisecond)
	}
	if lw.atRisk {
		lw.atRisk = false
		fmt.Fprintf(lw.w, "leasehold: Redis answers again: heartbeat confirmed after %v at risk; %s is still held\n",
			round(now.Sub(lw.since)), lw.what)
	}
	return left - lw.ttl/2
}

// lossText says in one clause why hold hd ended, from its cause, without
// the library's nested prefixes: `mutex "m" was reset by an operator`,
// `lost mutex "m": no heartbeat confirmed within the TTL (10s)`.
//
// The session reports a hold taken away from a live session (reset, pool
// member removed) with an ErrLost whose text says "taken away"; which of
// those it was follows from the kind of resource, but for a pool, whose
// holds both can take.
func lossText(hd held, cause error) string {
	msg := cleanCause(cause)
	switch {
	case errors.Is(cause, session.ErrLeaseLost) && msg == strings.TrimPrefix(session.ErrLeaseLost.Error(), "session: "):
		return fmt.Sprintf("lost %s: lease lost", hd.what())
	case errors.Is(cause, session.ErrLeaseLost):
		return fmt.Sprintf("lost %s: lease lost, %s", hd.what(), msg)
	case errors.Is(cause, session.ErrLost) && strings.Contains(msg, "taken away"):
		switch hd.kind {
		case "mutex", "rwmutex", "semaphore":
			return fmt.Sprintf("%s was reset by an operator", hd.what())
		case "election":
			return fmt.Sprintf("%s: this leader was forced out by an operator (reset)", hd.what())
		case "pool":
			return fmt.Sprintf("%s was taken away by an operator (the pool reset, or the member removed)", hd.what())
		}
		return fmt.Sprintf("%s was taken away", hd.what())
	case errors.Is(cause, session.ErrLost) && strings.Contains(msg, "could not be reclaimed"):
		return fmt.Sprintf("lost %s: Redis lost its data and the hold could not be reclaimed", hd.what())
	}
	return fmt.Sprintf("lost %s: %s", hd.what(), msg)
}

// cleanCause is err's text without the library's nesting: the innermost
// "session: ..." error of a chain ("session: release mutex "m": session:
// hold lost: ..."), without the sentinel prefixes "session: lease lost: ",
// "session: hold lost: " and "session: ".
func cleanCause(err error) string {
	if err == nil {
		return "unknown cause"
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": session: "); i >= 0 {
		msg = msg[i+2:]
	}
	for _, p := range []string{session.ErrLeaseLost.Error() + ": ", session.ErrLost.Error() + ": ", "session: "} {
		if rest, ok := strings.CutPrefix(msg, p); ok && rest != "" {
			msg = rest
			break
		}
	}
	return msg
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
