package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/leasehold/leasehold/internal/scripts"
)

const resetAbout = `Force-releases what is called NAME, whoever holds it (or, with --all, everything
held in the namespace): a mutex goes at once to its first live waiter, if any,
a read-write mutex loses its writer or every one of its readers, an election's
leader is forced out and the next candidate elected, a semaphore loses every
permit and a pool every held member (the members stay in the pool, free).
Each queue is then served as after a release. The holders lose their holds: a
'leasehold lock', 'rlock', 'sem', 'pool acquire' or 'elect' holder signals
its command and exits 75.

NAME may name resources of several kinds (a mutex and a semaphore both called
"jobs"): reset then changes nothing and asks for --kind. With --all, --kind
limits the reset to that kind.

This is an operator override: the old holder learns of it at once when its
notification connection is up, else within one heartbeat interval; in that
window only fencing tokens protect the resource, and the lock delay does not
apply.

Without --yes nothing is changed: it prints what it would do and exits 1.
`

func cmdReset(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "reset", "reset NAME [--kind KIND] [--yes] | reset --all [--kind KIND] [--yes]", resetAbout)
	all := c.fs.Bool("all", false, "force-release everything held in the namespace: mutexes, read-write mutexes, election leaders, semaphore permits, pool members")
	kind := c.fs.String("kind", "", "only a resource of this `KIND`: "+strings.Join(resetKindNames(), ", "))
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
		return c.usageErr("no NAME (or --all)")
	case len(pos) > 1:
		return c.usageErr("one NAME at a time (or --all)")
	}
	kindGiven := false
	c.fs.Visit(func(f *flag.Flag) { kindGiven = kindGiven || f.Name == "kind" })
	kinds := resetKinds
	if kindGiven {
		k, ok := resetKindNamed(*kind)
		if !ok {
			return c.usageErr("--kind %q: not one of %s", *kind, strings.Join(resetKindNames(), ", "))
		}
		kinds = []resetKind{k}
	}
	if !*all {
		what := "resource"
		if kindGiven {
			what = *kind
		}
		if err := checkExisting(what, pos[0]); err != nil {
			return err
		}
	}
	ctx, v, done, err := connectAdmin(ctx, g)
	if err != nil {
		return err
	}
	defer done()

	if *all {
		return resetAll(ctx, v, kinds, *yes, stdout)
	}
	return resetName(ctx, v, kinds, pos[0], *yes, stdout)
}

// resetKind is a kind of resource that reset takes.
type resetKind struct {
	name      string // as --kind takes it and the messages say it
	noun      string // "a mutex"
	one, many string // what a summary counts: "mutex", "mutexes"
	list      scripts.Kind
	// keys are the keys of which a resource of the kind called name has
	// at least one while it exists.
	keys func(k scripts.Keys, name string) []string
	// held reports whether the resource called name is held.
	held func(ctx context.Context, e scripts.Env, name string) (bool, error)
	// reset force-releases it, or without yes says what it would do and
	// returns a notDone.
	reset func(ctx context.Context, e scripts.Env, name string, yes bool, stdout io.Writer) error
}

// resetKinds are the kinds reset takes, in the order it lists and takes them.
var resetKinds = []resetKind{
	{name: "mutex", noun: "a mutex", one: "mutex", many: "mutexes", list: scripts.Mutex,
		keys: func(k scripts.Keys, name string) []string { return []string{k.Mutex(name)} },
		held: func(ctx context.Context, e scripts.Env, name string) (bool, error) {
			in, err := e.MutexInspect(ctx, name)
			return in.HoldID != "", err
		},
		reset: resetMutex},
	{name: "rwmutex", noun: "a read-write mutex", one: "read-write mutex", many: "read-write mutexes", list: scripts.RWMutex,
		keys: func(k scripts.Keys, name string) []string { return []string{k.RWMutex(name), k.RWMutexReaders(name)} },
		held: func(ctx context.Context, e scripts.Env, name string) (bool, error) {
			in, err := e.RWMutexInspect(ctx, name)
			return len(in.Holders) > 0, err
		},
		reset: rwReset.run},
	{name: "election", noun: "an election", one: "election leader", many: "election leaders", list: scripts.Election,
		keys: func(k scripts.Keys, name string) []string { return []string{k.Election(name)} },
		held: func(ctx context.Context, e scripts.Env, name string) (bool, error) {
			l, err := e.ElectionLeader(ctx, name)
			return l.HoldID != "", err
		},
		reset: resetElection},
	{name: "semaphore", noun: "a semaphore", one: "semaphore", many: "semaphores", list: scripts.Semaphore,
		keys: func(k scripts.Keys, name string) []string {
			return []string{k.Semaphore(name), k.SemaphoreHolders(name)}
		},
		held: func(ctx context.Context, e scripts.Env, name string) (bool, error) {
			st, err := e.SemaphoreStats(ctx, name)
			return len(st.Holders) > 0, err
		},
		reset: semReset.run},
	{name: "pool", noun: "a pool", one: "pool", many: "pools", list: scripts.Pool,
		keys: func(k scripts.Keys, name string) []string { return []string{k.PoolFree(name), k.PoolHeld(name)} },
		held: func(ctx context.Context, e scripts.Env, name string) (bool, error) {
			st, err := e.PoolStats(ctx, name)
			return len(st.Held) > 0, err
		},
		reset: poolReset.run},
}

func resetKindNames() []string {
	out := make([]string, len(resetKinds))
	for i, k := range resetKinds {
		out[i] = k.name
	}
	return out
}

func resetKindNamed(name string) (resetKind, bool) {
	i := slices.IndexFunc(resetKinds, func(k resetKind) bool { return k.name == name })
	if i < 0 {
		return resetKind{}, false
	}
	return resetKinds[i], true
}

// resetAll force-releases everything of kinds held in namespace v, in
// every shard of a sharded one.
func resetAll(ctx context.Context, v *nsView, kinds []resetKind, yes bool, stdout io.Writer) error {
	p, err := planResetAll(ctx, v, kinds)
	if err != nil {
		return err
	}
	if p.size() == 0 {
		what := make([]string, len(kinds))
		for i, k := range kinds {
			what[i] = k.one
		}
		fmt.Fprintf(stdout, "no %s of namespace %q is held; nothing to reset\n", orList(what), v.name)
		return nil
	}
	if err := p.apply(ctx, v, yes, stdout); err != nil {
		return err
	}
	if !yes {
		return notDone{"force-release " + p.summary()}
	}
	return nil
}

// resetPlan is what reset --all found held: the names of each kind, with
// the shard each is in.
type resetPlan struct {
	kinds []resetKind
	held  [][]shardName // by kind, as kinds
}

// planResetAll lists what of kinds is held in namespace v.
func planResetAll(ctx context.Context, v *nsView, kinds []resetKind) (resetPlan, error) {
	p := resetPlan{kinds: kinds, held: make([][]shardName, len(kinds))}
	for i, k := range kinds {
		all, err := v.list(ctx, func(keys scripts.Keys) scripts.Listing { return keys.Listing(k.list) })
		if err != nil {
			return p, fail(exitError, "reset: %v", err)
		}
		for _, n := range all {
			ok, err := k.held(ctx, v.envs[n.k], n.name)
			if err != nil {
				return p, fail(exitError, "reset: %s %q: %v", k.name, n.name, err)
			}
			if ok {
				p.held[i] = append(p.held[i], n)
			}
		}
	}
	return p, nil
}

func (p resetPlan) size() int {
	n := 0
	for _, names := range p.held {
		n += len(names)
	}
	return n
}

// apply resets what p lists, or, without yes, says what it would reset.
func (p resetPlan) apply(ctx context.Context, v *nsView, yes bool, stdout io.Writer) error {
	for i, k := range p.kinds {
		for _, n := range p.held[i] {
			if err := k.reset(ctx, v.envs[n.k], n.name, yes, stdout); err != nil && !errors.As(err, new(notDone)) {
				return err
			}
		}
	}
	return nil
}

// summary names what p would force-release: "1 mutex, 2 election leaders".
func (p resetPlan) summary() string {
	var what []string
	for i, k := range p.kinds {
		if n := len(p.held[i]); n > 0 {
			what = append(what, plural(n, k.one, k.many))
		}
	}
	return strings.Join(what, ", ")
}

// notDone is reset's answer without --yes: it said what it would do.
type notDone struct{ what string }

func (n notDone) Error() string { return "reset: nothing done; add --yes to " + n.what }

// resetName force-releases the resource called name, of the one kind among
// kinds that has one by that name (in name's shard, when v is sharded).
// When none has, or several have, it changes nothing.
func resetName(ctx context.Context, v *nsView, kinds []resetKind, name string, yes bool, stdout io.Writer) error {
	e := v.env(name)
	var found []resetKind
	for _, k := range kinds {
		n, err := e.C.Do(ctx, e.C.B().Exists().Key(k.keys(e.K, name)...).Build()).AsInt64()
		if err != nil {
			return fail(exitError, "reset: %s %q: %v", k.name, name, err)
		}
		if n > 0 {
			found = append(found, k)
		}
	}
	switch {
	case len(found) == 1:
		return found[0].reset(ctx, e, name, yes, stdout)
	case len(found) > 1:
		nouns, names := make([]string, len(found)), make([]string, len(found))
		for i, k := range found {
			nouns[i], names[i] = k.noun, k.name
		}
		return fail(exitUsage, "reset: %q is %s in namespace %q; nothing done: say which to reset with --kind %s",
			name, andList(nouns), v.name, orList(names))
	case len(kinds) == 1:
		return fail(exitError, "reset: no %s %q in namespace %q", kinds[0].name, name, v.name)
	}
	return fail(exitError, "reset: nothing is called %q in namespace %q (no mutex, read-write mutex, election, semaphore or pool)",
		name, v.name)
}

// andList joins "a", "b", "c" as "a, b and c"; orList as "a, b or c".
func andList(s []string) string { return joinLast(s, " and ") }
func orList(s []string) string  { return joinLast(s, " or ") }

func joinLast(s []string, last string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + last + s[len(s)-1]
}

// resetMutex force-releases mutex name, or without yes says what it would do.
func resetMutex(ctx context.Context, e scripts.Env, name string, yes bool, stdout io.Writer) error {
	in, err := e.MutexInspect(ctx, name)
	switch {
	case err != nil:
		return fail(exitError, "reset: mutex %q: %v", name, err)
	case in.HoldID == "":
		fmt.Fprintf(stdout, "mutex %q is not held; nothing to reset\n", name)
		return nil
	case !yes:
		fmt.Fprintf(stdout, "would reset mutex %q: held by %s\n", name, describeHolder(in))
		return notDone{"force-release 1 mutex"}
	}
	hid, err := e.MutexReset(ctx, name)
	switch {
	case err != nil:
		return fail(exitError, "reset: mutex %q: %v", name, err)
	case hid == "":
		fmt.Fprintf(stdout, "mutex %q was released meanwhile; nothing to reset\n", name)
	case hid != in.HoldID:
		fmt.Fprintf(stdout, "reset mutex %q: took it from session %s (it had changed hands meanwhile)\n", name, esc(sidOf(hid)))
	default:
		fmt.Fprintf(stdout, "reset mutex %q: took it from %s\n", name, describeHolder(in))
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

// holdsReset is the reset of a kind whose script takes every hold of a
// resource and says how many it took: a read-write mutex, a semaphore, a
// pool.
type holdsReset struct {
	kind string
	// describe says who holds resource name and who waits ("" when nobody
	// holds it).
	describe func(ctx context.Context, e scripts.Env, name string) (string, error)
	reset    func(e scripts.Env, ctx context.Context, name string) (int, error)
	after    string // what the report of a reset adds
}

var (
	rwReset   = holdsReset{"rwmutex", describeRW, scripts.Env.RWMutexReset, ""}
	semReset  = holdsReset{"semaphore", describeSemaphore, scripts.Env.SemaphoreReset, ""}
	poolReset = holdsReset{"pool", describePool, scripts.Env.PoolReset, "; its members are free again"}
)

// run force-releases resource name, or without yes says what it would do.
func (r holdsReset) run(ctx context.Context, e scripts.Env, name string, yes bool, stdout io.Writer) error {
	what, err := r.describe(ctx, e, name)
	if err != nil {
		return fail(exitError, "reset: %s %q: %v", r.kind, name, err)
	}
	if what == "" {
		fmt.Fprintf(stdout, "%s %q is not held; nothing to reset\n", r.kind, name)
		return nil
	}
	if !yes {
		fmt.Fprintf(stdout, "would reset %s %q: %s\n", r.kind, name, what)
		return notDone{"force-release it"}
	}
	n, err := r.reset(e, ctx, name)
	if err != nil {
		return fail(exitError, "reset: %s %q: %v", r.kind, name, err)
	}
	if n == 0 {
		fmt.Fprintf(stdout, "%s %q was released meanwhile; nothing to reset\n", r.kind, name)
		return nil
	}
	fmt.Fprintf(stdout, "reset %s %q: took %s%s\n", r.kind, name, plural(n, "hold", "holds"), r.after)
	return nil
}

// describeRW says who holds read-write mutex name and who waits.
func describeRW(ctx context.Context, e scripts.Env, name string) (string, error) {
	in, err := e.RWMutexInspect(ctx, name)
	if err != nil || len(in.Holders) == 0 {
		return "", err
	}
	var s string
	if h := in.Holders[0]; !h.Shared {
		s = fmt.Sprintf("written by session %s (owner %s, token %d, lease %s left", esc(sidOf(h.HoldID)), cell(h.Owner), h.Token, human(h.TTL))
	} else {
		hids := make([]string, len(in.Holders))
		for i, h := range in.Holders {
			hids[i] = h.HoldID
		}
		s = "read by " + plural(len(in.Holders), "hold", "holds") + " (" + sessionList(hids)
	}
	return s + waiting(len(in.Queue)) + ")", nil
}

// describeSemaphore says who holds permits of semaphore name and who waits.
func describeSemaphore(ctx context.Context, e scripts.Env, name string) (string, error) {
	st, err := e.SemaphoreStats(ctx, name)
	if err != nil || len(st.Holders) == 0 {
		return "", err
	}
	var n int64
	hids := make([]string, len(st.Holders))
	for i, h := range st.Holders {
		n += h.N
		hids[i] = h.HoldID
	}
	return fmt.Sprintf("%d of %d permits held by %s (%s%s)", n, st.Limit,
		plural(len(hids), "hold", "holds"), sessionList(hids), waiting(st.Waiters)), nil
}

// describePool says which members of pool name are held, by whom, and who
// waits.
func describePool(ctx context.Context, e scripts.Env, name string) (string, error) {
	st, err := e.PoolStats(ctx, name)
	if err != nil || len(st.Held) == 0 {
		return "", err
	}
	keys, hids := make([]string, len(st.Held)), make([]string, len(st.Held))
	for i, h := range st.Held {
		keys[i], hids[i] = fmt.Sprintf("%q", h.Key), h.HoldID
	}
	if len(keys) > 3 {
		keys = append(keys[:3], fmt.Sprintf("%d more", len(st.Held)-3))
	}
	return fmt.Sprintf("%s of %d held (%s; %s%s)", plural(len(hids), "member", "members"), len(st.Held)+len(st.Free),
		strings.Join(keys, ", "), sessionList(hids), waiting(st.Waiters)), nil
}

// sessionList names the sessions of hold ids hids, each once, three at most:
// "session a", "sessions a b c and 2 more".
func sessionList(hids []string) string {
	var sids []string
	for _, h := range hids {
		if sid := esc(sidOf(h)); !slices.Contains(sids, sid) {
			sids = append(sids, sid)
		}
	}
	if len(sids) == 1 {
		return "session " + sids[0]
	}
	s := "sessions " + strings.Join(sids[:min(3, len(sids))], " ")
	if len(sids) > 3 {
		s += fmt.Sprintf(" and %d more", len(sids)-3)
	}
	return s
}

// waiting is ", N waiters", or "" for none.
func waiting(n int) string {
	if n == 0 {
		return ""
	}
	return ", " + plural(n, "waiter", "waiters")
}
