package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/leasehold/leasehold/internal/scripts"
)

const resetAbout = `Force-releases mutex NAME (or, with --all, every held mutex, read-write mutex
and election leader of the namespace), whoever holds it: the mutex goes at once to its first live waiter, if any, and
the holder loses it (a 'leasehold lock' holder signals its command and exits
75). If NAME is an election (and no mutex), its leader is forced out and the
next candidate elected ('leasehold elect' leaders exit 75 the same way). If
NAME is a read-write mutex (and no mutex or election), its writer or every
one of its readers loses it and its queue is served ('leasehold rlock'
holders exit 75 the same way). Semaphores and pools have no reset: --all
names those with holders and leaves them ('leasehold pool rm NAME KEY' takes
a member from its holder).
This is an operator override: the old holder learns of
it at once when its notification connection is up, else within one heartbeat
interval; in that window only fencing tokens protect the resource, and the
lock delay does not apply.

Without --yes nothing is changed: it prints what it would do and exits 1.
`

func cmdReset(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "reset", "reset NAME [--yes] | reset --all [--yes]", resetAbout)
	all := c.fs.Bool("all", false, "force-release every held mutex, read-write mutex and election leader of the namespace")
	yes := c.fs.Bool("yes", false, "do it (without it, only say what would be done)")
	pos, _, hasCmd, err := c.parse(args, stdout)
	if err != nil {
		return err
	}
	switch {
	case hasCmd:
		return c.usageErr("unexpected \"--\"")
	case *all && len(pos) > 0:
		return c.usageErr("give either NAME or --all, not both")
	case !*all && len(pos) == 0:
		return c.usageErr("no mutex NAME (or --all)")
	case len(pos) > 1:
		return c.usageErr("one NAME at a time (or --all)")
	}
	if !*all {
		if err := checkExisting("mutex", pos[0]); err != nil {
			return err
		}
	}
	ctx, e, done, err := connectAdmin(ctx, g)
	if err != nil {
		return err
	}
	defer done()

	if *all {
		return resetAll(ctx, e, *yes, stdout)
	}
	return resetName(ctx, e, pos[0], *yes, stdout)
}

// heldMutex is a mutex that reset found held, as it found it.
type heldMutex struct {
	name string
	in   scripts.MutexInfo
}

// resetAll force-releases everything held in namespace e.K that reset
// can take: mutexes, read-write mutexes and election leaders. It names the
// semaphores and pools with holders, which it leaves alone.
func resetAll(ctx context.Context, e scripts.Env, yes bool, stdout io.Writer) error {
	p, err := planResetAll(ctx, e)
	if err != nil {
		return err
	}
	if p.size() == 0 {
		fmt.Fprintf(stdout, "no mutex, read-write mutex or election of namespace %q is held; nothing to reset\n", e.K.Namespace())
		if p.untouched != "" {
			fmt.Fprintln(stdout, p.untouched)
		}
		return nil
	}
	if err := p.apply(ctx, e, yes, stdout); err != nil {
		return err
	}
	if p.untouched != "" {
		fmt.Fprintln(stdout, p.untouched)
	}
	if !yes {
		return notDone{"force-release " + p.summary()}
	}
	return nil
}

// resetPlan is what reset --all found held: what it takes, and a note on
// what it leaves ("" for nothing).
type resetPlan struct {
	mutexes        []heldMutex
	rws, elections []string
	untouched      string
}

// planResetAll lists what is held in namespace e.K.
func planResetAll(ctx context.Context, e scripts.Env) (resetPlan, error) {
	list := func(kind scripts.Kind) ([]string, error) {
		ns, err := names(ctx, e.C, e.K.Listing(kind))
		if err != nil {
			return nil, fail(exitError, "reset: %v", err)
		}
		return ns, nil
	}
	var p resetPlan
	mutexes, err := list(scripts.Mutex)
	if err != nil {
		return p, err
	}
	for _, name := range mutexes {
		in, err := e.MutexInspect(ctx, name)
		if err != nil {
			return p, fail(exitError, "reset: mutex %q: %v", name, err)
		}
		if in.HoldID != "" {
			p.mutexes = append(p.mutexes, heldMutex{name, in})
		}
	}
	if p.rws, err = heldNames(list, scripts.RWMutex, func(name string) (bool, error) {
		in, err := e.RWMutexInspect(ctx, name)
		return len(in.Holders) > 0, err
	}); err != nil {
		return p, err
	}
	if p.elections, err = heldNames(list, scripts.Election, func(name string) (bool, error) {
		l, err := e.ElectionLeader(ctx, name)
		return l.HoldID != "", err
	}); err != nil {
		return p, err
	}
	p.untouched = untouchedHolds(ctx, e, list)
	return p, nil
}

func (p resetPlan) size() int { return len(p.mutexes) + len(p.rws) + len(p.elections) }

// apply resets what p lists, or, without yes, says what it would reset.
func (p resetPlan) apply(ctx context.Context, e scripts.Env, yes bool, stdout io.Writer) error {
	if !yes {
		for _, m := range p.mutexes {
			fmt.Fprintf(stdout, "would reset mutex %q: held by %s\n", m.name, describeHolder(m.in))
		}
	} else if err := resetMutexes(ctx, e, p.mutexes, true, stdout); err != nil {
		return err
	}
	for _, name := range p.rws {
		if err := resetRWMutex(ctx, e, name, yes, stdout); err != nil && !errors.As(err, new(notDone)) {
			return err
		}
	}
	for _, name := range p.elections {
		if err := resetElection(ctx, e, name, yes, stdout); err != nil && !errors.As(err, new(notDone)) {
			return err
		}
	}
	return nil
}

// summary names what p would force-release: "1 mutex, 2 election leaders".
func (p resetPlan) summary() string {
	var what []string
	for _, k := range []struct {
		n         int
		one, many string
	}{{len(p.mutexes), "mutex", "mutexes"}, {len(p.rws), "read-write mutex", "read-write mutexes"}, {len(p.elections), "election leader", "election leaders"}} {
		if k.n > 0 {
			what = append(what, plural(k.n, k.one, k.many))
		}
	}
	return strings.Join(what, ", ")
}

// heldNames lists the names of kind for which held reports true.
func heldNames(list func(scripts.Kind) ([]string, error), kind scripts.Kind,
	held func(name string) (bool, error)) ([]string, error) {
	all, err := list(kind)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range all {
		ok, err := held(name)
		if err != nil {
			return nil, fail(exitError, "reset: %s %q: %v", kind, name, err)
		}
		if ok {
			out = append(out, name)
		}
	}
	return out, nil
}

// untouchedHolds names the semaphores and pools with holders, which reset
// cannot take, or returns "" when there are none (or they could not be read:
// this is only a note).
func untouchedHolds(ctx context.Context, e scripts.Env, list func(scripts.Kind) ([]string, error)) string {
	var held []string
	sems, _ := list(scripts.Semaphore)
	for _, name := range sems {
		if st, err := e.SemaphoreStats(ctx, name); err == nil && len(st.Holders) > 0 {
			held = append(held, fmt.Sprintf("semaphore %q", name))
		}
	}
	pools, _ := list(scripts.Pool)
	for _, name := range pools {
		if st, err := e.PoolStats(ctx, name); err == nil && len(st.Held) > 0 {
			held = append(held, fmt.Sprintf("pool %q", name))
		}
	}
	if len(held) == 0 {
		return ""
	}
	return "left as they are: " + strings.Join(held, ", ") + " (reset cannot take semaphore permits or pool members; " +
		"'leasehold pool rm NAME KEY' takes a member from its holder)"
}

// notDone is reset's answer without --yes: it said what it would do.
type notDone struct{ what string }

func (n notDone) Error() string { return "reset: nothing done; add --yes to " + n.what }

// resetName force-releases what is called name: a mutex, else an election's
// leader, else a read-write mutex.
func resetName(ctx context.Context, e scripts.Env, name string, yes bool, stdout io.Writer) error {
	in, err := e.MutexInspect(ctx, name)
	switch {
	case err != nil:
		return fail(exitError, "reset: mutex %q: %v", name, err)
	case in.HoldID != "":
		return resetMutexes(ctx, e, []heldMutex{{name, in}}, yes, stdout)
	case in.Token != 0:
		fmt.Fprintf(stdout, "mutex %q is not held; nothing to reset\n", name)
		return nil
	}
	switch kind := otherKind(ctx, e, name); kind {
	case "election":
		return resetElection(ctx, e, name, yes, stdout)
	case "rwmutex":
		return resetRWMutex(ctx, e, name, yes, stdout)
	case "semaphore", "pool":
		return fail(exitError, "reset: %q is a %s; reset force-releases mutexes, read-write mutexes and election leaders only", name, kind)
	}
	return fail(exitError, "reset: no mutex %q in namespace %q", name, e.K.Namespace())
}

// resetMutexes force-releases the mutexes of plan, or without yes says
// what it would do.
func resetMutexes(ctx context.Context, e scripts.Env, plan []heldMutex, yes bool, stdout io.Writer) error {
	if len(plan) == 0 {
		fmt.Fprintf(stdout, "no mutex of namespace %q is held; nothing to reset\n", e.K.Namespace())
		return nil
	}
	if !yes {
		for _, p := range plan {
			fmt.Fprintf(stdout, "would reset mutex %q: held by %s\n", p.name, describeHolder(p.in))
		}
		return notDone{"force-release " + plural(len(plan), "mutex", "mutexes")}
	}
	for _, p := range plan {
		hid, err := e.MutexReset(ctx, p.name)
		switch {
		case err != nil:
			return fail(exitError, "reset: mutex %q: %v", p.name, err)
		case hid == "":
			fmt.Fprintf(stdout, "mutex %q was released meanwhile; nothing to reset\n", p.name)
		case hid != p.in.HoldID:
			fmt.Fprintf(stdout, "reset mutex %q: took it from session %s (it had changed hands meanwhile)\n", p.name, esc(sidOf(hid)))
		default:
			fmt.Fprintf(stdout, "reset mutex %q: took it from %s\n", p.name, describeHolder(p.in))
		}
	}
	return nil
}

func describeHolder(in scripts.MutexInfo) string {
	s := fmt.Sprintf("session %s (owner %s, token %d, lease %s left", esc(sidOf(in.HoldID)), cell(in.Owner), in.Token, human(in.TTL))
	if in.Waiters > 0 {
		s += ", " + plural(in.Waiters, "waiter", "waiters")
	}
	return s + ")"
}

// otherKind names the kind of resource called name, if any, other than a mutex.
func otherKind(ctx context.Context, e scripts.Env, name string) string {
	for _, k := range []struct{ kind, key string }{
		{"semaphore", e.K.Semaphore(name)},
		{"election", e.K.Election(name)},
		{"rwmutex", e.K.RWMutex(name)},
		{"rwmutex", e.K.RWMutexReaders(name)},
		{"pool", e.K.PoolFree(name)},
		{"pool", e.K.PoolHeld(name)},
	} {
		n, err := e.C.Do(ctx, e.C.B().Exists().Key(k.key).Build()).AsInt64()
		if err == nil && n > 0 {
			return k.kind
		}
	}
	return ""
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// resetElection forces the leader of election name out.
func resetElection(ctx context.Context, e scripts.Env, name string, yes bool, stdout io.Writer) error {
	l, err := e.ElectionLeader(ctx, name)
	if err != nil {
		return fail(exitError, "reset: election %q: %v", name, err)
	}
	if l.HoldID == "" {
		fmt.Fprintf(stdout, "election %q has no leader; nothing to reset\n", name)
		return nil
	}
	if !yes {
		fmt.Fprintf(stdout, "would reset election %q: led by session %s (term %d, value %q, lease %s left)\n",
			name, esc(sidOf(l.HoldID)), l.Term, l.Value, human(l.TTL))
		return notDone{"force the leader out"}
	}
	hid, err := e.ElectionReset(ctx, name)
	if err != nil {
		return fail(exitError, "reset: election %q: %v", name, err)
	}
	if hid == "" {
		fmt.Fprintf(stdout, "election %q lost its leader meanwhile; nothing to reset\n", name)
		return nil
	}
	fmt.Fprintf(stdout, "reset election %q: forced session %s out (term %d)\n", name, esc(sidOf(hid)), l.Term)
	return nil
}

// resetRWMutex force-releases read-write mutex name: its writer, or every
// one of its readers.
func resetRWMutex(ctx context.Context, e scripts.Env, name string, yes bool, stdout io.Writer) error {
	in, err := e.RWMutexInspect(ctx, name)
	if err != nil {
		return fail(exitError, "reset: rwmutex %q: %v", name, err)
	}
	if len(in.Holders) == 0 {
		fmt.Fprintf(stdout, "rwmutex %q is not held; nothing to reset\n", name)
		return nil
	}
	if !yes {
		fmt.Fprintf(stdout, "would reset rwmutex %q: %s\n", name, describeRW(in))
		return notDone{"force-release it"}
	}
	n, err := e.RWMutexReset(ctx, name)
	if err != nil {
		return fail(exitError, "reset: rwmutex %q: %v", name, err)
	}
	if n == 0 {
		fmt.Fprintf(stdout, "rwmutex %q was released meanwhile; nothing to reset\n", name)
		return nil
	}
	fmt.Fprintf(stdout, "reset rwmutex %q: took %s\n", name, plural(n, "hold", "holds"))
	return nil
}

// describeRW says who holds a read-write mutex (in.Holders is not empty)
// and who waits.
func describeRW(in scripts.RWMutexInfo) string {
	var s string
	if h := in.Holders[0]; !h.Shared {
		s = fmt.Sprintf("written by session %s (owner %s, token %d, lease %s left", esc(sidOf(h.HoldID)), cell(h.Owner), h.Token, human(h.TTL))
	} else {
		s = "read by " + plural(len(in.Holders), "hold", "holds") + " (sessions"
		for i, h := range in.Holders {
			if i == 3 {
				s += fmt.Sprintf(" and %d more", len(in.Holders)-i)
				break
			}
			s += " " + esc(sidOf(h.HoldID))
		}
	}
	if len(in.Queue) > 0 {
		s += ", " + plural(len(in.Queue), "waiter", "waiters")
	}
	return s + ")"
}
