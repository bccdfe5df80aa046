package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/pool"
)

const poolAbout = `Manages key pools: named sets of members (shards, GPU slots, accounts) that
workers claim one at a time with pool.Acquire, or with 'leasehold pool acquire'.

  pool acquire NAME -- CMD [ARGS...]
                         run CMD holding a free member, given in
                         LEASEHOLD_MEMBER (see 'leasehold pool acquire -h')
  pool add NAME KEY...   add members (new members are free; existing ones stay)
  pool rm NAME KEY...    remove members; a held member's holder loses it (its
                         hold ends with ErrLost). Nothing changes if a KEY is
                         not a member.
  pool ls NAME           list the members, one per line
  pool stats NAME        members, holders (session, owner, token, lease left),
                         free members and waiters; --json for JSON

Members, owners and session ids that hold spaces, control characters or
invalid UTF-8 are printed quoted, with Go escapes ("a\nb", "\xff").
`

func cmdPool(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "pool", "pool add|rm|ls|stats NAME [KEYS...] | pool acquire NAME -- CMD [ARGS...]", poolAbout)
	asJSON := c.fs.Bool("json", false, "stats: print JSON")
	if i := subcommand(args, runnerFlagSet()); i >= 0 && args[i] == "acquire" {
		return cmdPoolAcquire(ctx, g, slices.Delete(slices.Clone(args), i, i+1), stdout)
	}
	op, name, keys, err := parsePoolArgs(c, args, stdout)
	if err != nil {
		return err
	}
	ctx, v, done, err := connectAdmin(ctx, g)
	if err != nil {
		return err
	}
	defer done()

	e := v.env(name)
	switch op {
	case "add":
		return poolAdd(ctx, e, name, keys, stdout)
	case "rm":
		return poolRemove(ctx, e, name, keys, stdout)
	}
	st, err := readStatusPool(ctx, e, name)
	if err != nil {
		return fail(exitError, "pool %q: %v", name, err)
	}
	switch {
	case op == "ls":
		for _, m := range st.Members {
			fmt.Fprintln(stdout, esc(m))
		}
	case *asJSON:
		return writeJSON(stdout, st)
	default:
		printPoolStats(stdout, st)
	}
	return nil
}

// parsePoolArgs checks the arguments of pool add, rm, ls and stats: the
// subcommand, the pool's name and the member keys (add and rm only).
func parsePoolArgs(c *command, args []string, stdout io.Writer) (op, name string, keys []string, err error) {
	pos, _, hasCmd, err := c.parse(args, stdout)
	switch {
	case err != nil:
		return "", "", nil, err
	case hasCmd:
		return "", "", nil, c.usageErr("unexpected \"--\"")
	case len(pos) == 0:
		return "", "", nil, c.usageErr("no subcommand")
	}
	op, rest := pos[0], pos[1:]
	if !slices.Contains([]string{"add", "rm", "ls", "stats"}, op) {
		return "", "", nil, c.usageErr("unknown subcommand %q", op)
	}
	if len(rest) == 0 {
		return "", "", nil, c.usageErr("no pool NAME")
	}
	name, keys = rest[0], rest[1:]
	check := checkExisting // ls, stats and rm also serve names stored before the rules
	if op == "add" {
		check = checkName
	}
	if err := check("pool", name); err != nil {
		return "", "", nil, err
	}
	if op != "add" && op != "rm" {
		if len(keys) > 0 {
			return "", "", nil, c.usageErr("%s takes no KEYS", op)
		}
		return op, name, nil, nil
	}
	if len(keys) == 0 {
		return "", "", nil, c.usageErr("%s needs at least one KEY", op)
	}
	for _, k := range keys {
		if err := check("pool key", k); err != nil {
			return "", "", nil, err
		}
	}
	return op, name, keys, nil
}

// poolAdd adds keys to pool name as free members.
func poolAdd(ctx context.Context, e scripts.Env, name string, keys []string, stdout io.Writer) error {
	added, _, err := e.PoolChange(ctx, name, "add", keys)
	if err != nil {
		return fail(exitError, "pool %q: add: %v", name, err)
	}
	switch others := int64(len(keys)) - added; {
	case others == 0:
		fmt.Fprintf(stdout, "pool %q: added %s\n", name, plural(int(added), "member", "members"))
	case others == 1:
		fmt.Fprintf(stdout, "pool %q: added %d of the %d keys given; the other was a member already\n", name, added, len(keys))
	default:
		fmt.Fprintf(stdout, "pool %q: added %d of the %d keys given; the other %d were members already\n", name, added, len(keys), others)
	}
	return nil
}

// poolRemove removes keys from pool name, all or none, and says whose
// holds end.
func poolRemove(ctx context.Context, e scripts.Env, name string, keys []string, stdout io.Writer) error {
	before, err := e.PoolStats(ctx, name)
	if err != nil {
		return fail(exitError, "pool %q: %v", name, err)
	}
	_, removed, err := e.PoolChange(ctx, name, "remove", keys)
	if errors.Is(err, scripts.ErrNotMember) {
		err = scripts.Relabel(err, scripts.ErrNotMember, pool.ErrNotMember)
		return fail(exitError, "pool %q: rm: %s; nothing removed", name, strings.TrimPrefix(err.Error(), "pool: "))
	}
	if err != nil {
		return fail(exitError, "pool %q: rm: %v", name, err)
	}
	fmt.Fprintf(stdout, "pool %q: removed %d\n", name, removed)
	for _, h := range before.Held {
		if slices.Contains(keys, h.Key) {
			fmt.Fprintf(stdout, "  %s was held by session %s (owner %s): that hold ends\n", esc(h.Key), esc(sidOf(h.HoldID)), cell(h.Owner))
		}
	}
	return nil
}

// printPoolStats prints pool stats' text output: a summary line, then
// each member with its holder, if any.
func printPoolStats(w io.Writer, st PoolStatus) {
	fmt.Fprintf(w, "pool %q: %d members, %d held, %d free, %d waiting\n",
		st.Name, len(st.Members), len(st.Held), len(st.Free), st.Waiters)
	if len(st.Members) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "KEY\tHOLDER SESSION\tOWNER\tTOKEN\tLEFT")
	held := map[string]PoolMemberStatus{}
	for _, h := range st.Held {
		held[h.Key] = h
	}
	for _, m := range st.Members {
		if h, ok := held[m]; ok {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", esc(m), esc(h.Session), cell(h.Owner), h.Token, msHuman(h.RemainingMs))
		} else {
			fmt.Fprintf(tw, "%s\t(free)\t-\t-\t-\n", esc(m))
		}
	}
}

// writeJSON writes v as indented JSON (status --json, pool stats --json).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// subcommand returns the index in args of the first argument that is not a
// flag or a flag's value, or -1. fs tells which flags take a value; an
// unknown flag is taken for one that takes none.
func subcommand(args []string, fs *flag.FlagSet) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return -1
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			return i
		}
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				i++ // its value
			}
		}
	}
	return -1
}

// runnerFlagSet has the flags of 'pool acquire' (and the global ones), for
// subcommand.
func runnerFlagSet() *flag.FlagSet {
	c := newCommand(&globals{}, "pool acquire", "", "")
	var f runFlags
	f.register(c, false)
	return c.fs
}

// readStatusPool reads one pool the way status does.
func readStatusPool(ctx context.Context, e scripts.Env, name string) (PoolStatus, error) {
	ps, err := e.PoolStats(ctx, name)
	if err != nil {
		return PoolStatus{}, err
	}
	p := PoolStatus{Name: name, Free: append([]string{}, ps.Free...), Waiters: ps.Waiters, Held: []PoolMemberStatus{}}
	p.Members = append([]string{}, ps.Free...)
	for _, h := range ps.Held {
		pttl, _ := e.C.Do(ctx, e.C.B().Pttl().Key(e.K.Lease(sidOf(h.HoldID))).Build()).AsInt64()
		p.Held = append(p.Held, PoolMemberStatus{Key: h.Key, HolderStatus: HolderStatus{
			Session: sessionOf(e, h.HoldID), Hold: h.HoldID, Owner: h.Owner, Token: h.Token, RemainingMs: max(pttl, 0)}})
		p.Members = append(p.Members, h.Key)
	}
	slices.Sort(p.Members)
	slices.Sort(p.Free)
	slices.SortFunc(p.Held, func(a, b PoolMemberStatus) int { return strings.Compare(a.Key, b.Key) })
	return p, nil
}
