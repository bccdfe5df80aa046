package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit codes. lock, sem, elect and pool acquire otherwise exit with CMD's
// own code.
const (
	exitOK    = 0
	exitError = 1 // status, reset, pool: the command failed
	// exitUsage: every command: bad flags or arguments; also sem's --limit
	// differing from the limit stored for the semaphore (the command line is
	// wrong for it and cannot succeed as it is; nothing was acquired or run).
	exitUsage       = 2
	exitNotAcquired = 73  // runners: not granted with --wait 0 (held, or a restart grace), or --wait elapsed
	exitLost        = 75  // runners: the hold was lost while CMD ran; CMD was signalled
	exitFailed      = 125 // runners: leasehold itself failed (Redis unreachable, ...)
	exitNotExec     = 126 // CMD exists but cannot be run
	exitNotFound    = 127 // CMD not found
)

const usage = `leasehold runs commands under locks, semaphores and leader election kept in
Redis, and shows or repairs what is held.

Usage:
  leasehold [--redis URL]... [--namespace NS] COMMAND [flags] [args]

Commands:
  lock NAME -- CMD [ARGS...]          run CMD while holding mutex NAME
  lock NAME                           hold mutex NAME until interrupted (Ctrl-C)
  rlock [--write] NAME -- CMD [ARGS...]
                                      run CMD holding read-write mutex NAME, shared
                                      (or alone with --write); also lock --shared
  sem NAME --limit N -- CMD [ARGS...] run CMD while holding permits of semaphore NAME
  elect NAME -- CMD [ARGS...]         run CMD while leading election NAME
  pool acquire NAME -- CMD [ARGS...]  run CMD holding a free member of pool NAME
                                      (the member is in $LEASEHOLD_MEMBER)
  cron NAME --schedule SPEC -- CMD [ARGS...]
                                      run CMD once per slot of cron SPEC, on whichever
                                      process wins the slot (in $LEASEHOLD_SLOT)
  jobs [--json] [NAME]                scheduled jobs and their latest runs
  status [--json]                     sessions, mutexes, semaphores, pools, elections
  reset NAME [--kind KIND] [--yes]    force-release what is called NAME: a mutex, a
                                      read-write mutex, an election's leader, every
                                      permit of a semaphore, every member of a pool
  reset --all [--kind KIND] [--yes]   force-release everything held in the namespace
  sem-limit NAME [N]                  show, or set for every user, semaphore NAME's limit
  sem-limit --clear NAME              withdraw the limit an operator set
  pool add|rm NAME KEY...             add or remove members of pool NAME
  pool ls|stats NAME                  list members; show holders and waiters
  demo                                a short scripted story on an embedded Redis

Global flags (before or after COMMAND):
  --redis URL      Redis to use; default $LEASEHOLD_REDIS, else redis://127.0.0.1:6379
                     redis://[user:password@]host:port[/db]   rediss://... (TLS)
                     unix:///path/to/redis.sock[?db=N]        host:port
                     redis://host:26379?master_set=NAME&addr=host2:26379    (Sentinel)
                     redis-sentinel://[user:password@]host:26379,host2:26379/NAME
                     redis://host1:7000,host2:7000,host3:7000               (Cluster)
                   Several seeds: repeat --redis or separate the addresses with
                   commas (also in $LEASEHOLD_REDIS); rueidis finds out whether
                   they form a Redis Cluster. All seeds share one scheme, user,
                   password, database and options.
  --namespace NS   key namespace (default "leasehold"); one namespace is one
                   Redis Cluster hash slot, or N with session.Options.Shards N
  --shards N       the namespace's shard count (1: unsharded). Default: the
                   one Redis records, so that every command works on a
                   sharded namespace as on any other. Give it where Redis
                   may not know yet: the first session on a new namespace
                   (or one whose data Redis lost) lays it out, unsharded
                   without --shards, and sessions with another count are
                   then refused. A --shards that differs from the
                   namespace's is a usage error (exit 2).
  --tls            talk TLS to Redis, as a rediss:// URL does ($LEASEHOLD_TLS)
  --cacert FILE    trust the CA certificates in PEM FILE to sign the server's
                   certificate, instead of the system's ($LEASEHOLD_CACERT)
  --cert FILE      present the client certificate in PEM FILE, for a Redis with
  --key FILE         tls-auth-clients yes ($LEASEHOLD_CERT, $LEASEHOLD_KEY)
  --insecure-skip-verify
                   do not check the server's certificate: encrypted, but open to
                   whoever can intercept ($LEASEHOLD_INSECURE_SKIP_VERIFY)
                   --cacert, --cert, --key and --insecure-skip-verify need TLS on
                   (rediss:// or --tls). With Sentinel, TLS and these settings
                   apply to the sentinels and to the master alike, and each
                   certificate is checked against the address dialed (the
                   master's as the sentinels report it). URL options other
                   than rueidis' (db, dial_timeout, write_timeout, addr,
                   master_set, skip_verify, protocol, client_cache,
                   max_retries, client_name) are refused.

Exit codes of lock, sem, elect and pool acquire:
  CMD's own code   CMD ran and exited (128+N if it was killed by signal N)
  2                usage error: bad flags or arguments, or sem's --limit differs
                   from the limit stored for the semaphore; CMD did not run
  73               not acquired: held elsewhere (or a restart grace pending)
                   with --wait 0, or --wait elapsed
  75               the hold was lost while CMD ran: CMD got SIGTERM, then SIGKILL
                   after --kill-after if it was still running
  125              leasehold failed (bad Redis, Redis unreachable, ...)
  126, 127         CMD could not be run, or was not found
Other commands exit 0 on success and 1 on failure; 2 means a usage error.

Text output quotes names, owners and values that hold spaces, control
characters or invalid UTF-8, with Go escapes ("a\nb", "\xff").

Run 'leasehold COMMAND -h' for a command's flags and details, and
'leasehold --version' for the version.
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// exitErr is an error with the exit code it calls for. Its message is printed
// on one line after "leasehold: ".
type exitErr struct {
	code int
	msg  string
}

func (e *exitErr) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitErr{code: code, msg: fmt.Sprintf(format, args...)}
}

// errHelp asks for the usage text on stdout and exit code 0.
var errHelp = errors.New("help requested")

// run runs the leasehold command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &globals{}
	top := flag.NewFlagSet("leasehold", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	g.register(top)
	showVersion := top.Bool("version", false, "")
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		return report(stderr, fail(exitUsage, "%v (see leasehold -h)", err))
	}
	if *showVersion {
		fmt.Fprintln(stdout, "leasehold", version())
		return exitOK
	}
	rest := top.Args()
	if len(rest) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, cargs := rest[0], rest[1:]
	var err error
	switch cmd {
	case "lock":
		err = cmdLock(ctx, g, cargs, stdout)
	case "rlock":
		err = cmdRLock(ctx, g, cargs, stdout)
	case "sem":
		err = cmdSem(ctx, g, cargs, stdout)
	case "elect":
		err = cmdElect(ctx, g, cargs, stdout)
	case "cron":
		err = cmdCron(ctx, g, cargs, stdout)
	case "jobs":
		err = cmdJobs(ctx, g, cargs, stdout)
	case "status":
		err = cmdStatus(ctx, g, cargs, stdout)
	case "reset":
		err = cmdReset(ctx, g, cargs, stdout)
	case "sem-limit":
		err = cmdSemLimit(ctx, g, cargs, stdout)
	case "pool":
		err = cmdPool(ctx, g, cargs, stdout)
	case "demo":
		err = cmdDemo(ctx, g, cargs, stdout)
	case "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		err = fail(exitUsage, "unknown command %q (see leasehold -h)", cmd)
	}
	return report(stderr, err)
}

// report prints err on one line and returns its exit code.
func report(stderr io.Writer, err error) int {
	if err == nil || errors.Is(err, errHelp) {
		return exitOK
	}
	var ee *exitErr
	if !errors.As(err, &ee) {
		ee = &exitErr{code: exitError, msg: err.Error()}
	}
	if ee.msg != "" {
		fmt.Fprintln(stderr, "leasehold: "+oneLine(ee.msg))
	}
	return ee.code
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
