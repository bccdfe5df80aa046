package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/semaphore"
)

const semLimitAbout = `Shows or changes the limit of semaphore NAME for every user.

  sem-limit NAME           print the stored limit, and whether an operator set it
  sem-limit NAME N         set the limit to N (1 to 2^46) for everyone
  sem-limit --clear NAME   withdraw the operator's limit (also: sem-limit NAME 0)

A limit set here overrides the --limit (or the limit in Go) that every user
passes: nobody fails with a limit mismatch while it stands, and it stays in
Redis while the semaphore is idle. Current holders keep their permits: a
smaller limit only makes new grants wait; waiters that now fit are served at
once, waiters asking for more than N fail. To change a limit in a rolling
deploy, set the new one here first, then roll out the new --limit; --clear
afterwards makes a disagreement between users an error again.
`

// semLimitIdle is how long a semaphore whose limit was set here, and that no
// grant has recorded an idle time for, is kept once cleared and idle: twice
// the default lease TTL.
const semLimitIdle = 20 * time.Second

func cmdSemLimit(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "sem-limit", "sem-limit NAME [N] | sem-limit --clear NAME", semLimitAbout)
	clr := c.fs.Bool("clear", false, "withdraw the limit an operator set")
	name, limit, err := parseSemLimitArgs(c, clr, args, stdout)
	if err != nil {
		return err
	}
	ctx, v, done, err := connectAdmin(ctx, g)
	if err != nil {
		return err
	}
	defer done()
	e := v.env(name)

	if limit == 0 && !*clr {
		return showSemLimit(ctx, e, name, stdout)
	}
	return setSemLimit(ctx, e, name, limit, stdout)
}

// badSemLimit is sem-limit's usage error for limit argument a.
func badSemLimit(c *command, a string) error {
	return c.usageErr("limit %s: a limit is a whole number from 1 to %d, or 0 to withdraw the operator's limit (as --clear does)",
		a, int64(semaphore.MaxLimit))
}

// parseSemLimitArgs checks sem-limit's arguments (clr is the --clear flag,
// set by the parse): the semaphore's name and the limit to set, 0 for none.
func parseSemLimitArgs(c *command, clr *bool, args []string, stdout io.Writer) (name string, limit int64, err error) {
	for _, a := range args {
		if n, err := strconv.ParseInt(a, 10, 64); err == nil && n < 0 {
			return "", 0, badSemLimit(c, a)
		}
	}
	pos, _, hasCmd, err := c.parse(args, stdout)
	switch {
	case err != nil:
		return "", 0, err
	case hasCmd:
		return "", 0, c.usageErr("unexpected \"--\"")
	case len(pos) == 0:
		return "", 0, c.usageErr("no semaphore NAME")
	case len(pos) > 2, *clr && len(pos) > 1:
		return "", 0, c.usageErr("too many arguments")
	}
	name = pos[0]
	if len(pos) == 1 {
		return name, 0, checkExisting("semaphore", name)
	}
	if limit, err = strconv.ParseInt(pos[1], 10, 64); err != nil || limit < 0 || limit > semaphore.MaxLimit {
		return "", 0, badSemLimit(c, pos[1])
	}
	if limit == 0 {
		*clr = true
		return name, 0, checkExisting("semaphore", name)
	}
	return name, limit, checkName("semaphore", name)
}

// showSemLimit prints semaphore name's stored limit and who stored it.
func showSemLimit(ctx context.Context, e scripts.Env, name string, stdout io.Writer) error {
	st, err := e.SemaphoreStats(ctx, name)
	if err != nil {
		return fail(exitError, "sem-limit: semaphore %q: %v", name, err)
	}
	switch {
	case st.Limit == 0:
		fmt.Fprintf(stdout, "semaphore %q has no stored limit (unused, or idle long enough to expire)\n", name)
	case st.Set:
		fmt.Fprintf(stdout, "semaphore %q: limit %d, set by an operator\n", name, st.Limit)
	default:
		fmt.Fprintf(stdout, "semaphore %q: limit %d, stored by its first user\n", name, st.Limit)
	}
	return nil
}

// setSemLimit sets semaphore name's limit as an operator's, or withdraws
// the operator's limit when limit is 0 (--clear).
func setSemLimit(ctx context.Context, e scripts.Env, name string, limit int64, stdout io.Writer) error {
	prev, err := e.SemaphoreSetLimit(ctx, name, limit, semLimitIdle)
	if err != nil {
		return fail(exitError, "sem-limit: semaphore %q: %v", name, err)
	}
	switch {
	case limit == 0 && prev == 0:
		fmt.Fprintf(stdout, "semaphore %q has no stored limit: nothing to clear\n", name)
	case limit == 0:
		fmt.Fprintf(stdout, "semaphore %q: limit %d is no longer an operator's: users passing another limit fail again\n", name, prev)
	case prev == 0:
		fmt.Fprintf(stdout, "semaphore %q: limit set to %d\n", name, limit)
	default:
		fmt.Fprintf(stdout, "semaphore %q: limit %d -> %d\n", name, prev, limit)
	}
	return nil
}
