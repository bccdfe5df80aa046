//go:build unix

package main

import (
	"context"
	"errors"
	"io"

	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/session"
)

const rlockAbout = `Runs CMD while holding read-write mutex NAME: shared with every other reader
(any number of them, in any process), or, with --write, alone. 'leasehold lock
--shared NAME' is the same as 'leasehold rlock NAME'. Readers and writers wait
in one queue in arrival order, and a reader never overtakes a writer that
waits: writers do not starve. Read-write mutexes are apart from mutexes: 'lock
NAME' (without --shared) does not exclude 'rlock NAME'.

CMD gets LEASEHOLD_NAME, LEASEHOLD_KIND (rwmutex), LEASEHOLD_TOKEN (strictly
increasing for every grant of NAME, readers' included) and LEASEHOLD_SESSION,
runs in its own process group, and is handled as by 'leasehold lock' (see
'leasehold lock -h'): when the hold is lost it gets SIGTERM before a
conflicting hold can be granted, SIGKILL --kill-after later, and leasehold
exits 75. --lock-delay applies as for a mutex: a lost writer keeps everyone
out, a lost reader keeps writers out, for that long beyond the lease's expiry.

There is no upgrade from read to write: release the read hold (let CMD exit)
and take a write hold.

Exit codes: CMD's code; 73 not acquired (--wait); 75 lost while CMD ran;
125 leasehold failed; 126/127 CMD not runnable/not found; 2 usage error.
`

func cmdRLock(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "rlock", "rlock [flags] NAME -- CMD [ARGS...]", rlockAbout)
	var f runFlags
	f.register(c, true)
	write := c.fs.Bool("write", false, "hold the mutex alone (a writer) rather than shared (a reader)")
	name, argv, err := parseRunner(c, args, stdout)
	if err != nil {
		return err
	}
	o, kill, err := f.options(c, g)
	if err != nil {
		return err
	}
	return runHeld(ctx, g, o, f.wait, kill, argv, rwTarget(name, !*write))
}

// rwTarget is a read (shared) or write hold of read-write mutex name.
func rwTarget(name string, shared bool) target {
	busy := "is held by a writer, or a writer waits for it"
	if !shared {
		busy = "is held by another session, or others wait for it"
	}
	return target{
		kind: "rwmutex", name: name,
		acquire: func(ctx context.Context, s *session.Session, wait bool) (*session.Hold, error) {
			rw := rwmutex.New(s, name)
			var h *session.Hold
			var err error
			switch {
			case wait && shared:
				h, err = rw.RLock(ctx)
			case wait:
				h, err = rw.Lock(ctx)
			case shared:
				h, err = rw.TryRLock(ctx)
			default:
				h, err = rw.TryLock(ctx)
			}
			if errors.Is(err, rwmutex.ErrLocked) {
				return nil, errBusy
			}
			return h, err
		},
		busy: func(context.Context, *session.Session) string { return busy },
	}
}
