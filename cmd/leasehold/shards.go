package main

// Sharded namespaces (session.Options.Shards; docs/protocol.md, "Shards"):
// namespace ns of N > 1 shards keeps resource NAME under the prefix
// {<tag>}: of shard k = scripts.ShardOf(NAME, N) (scripts.ShardTag,
// "ns#k.x"), and {ns}:epoch is its guard, a hash that records N. The commands find N there, so that the user need
// not know it: the admin commands and cron read the guard first (one
// HMGET), the other session commands only once the library refused an
// unsharded session.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/conn"
	"github.com/leasehold/leasehold/internal/scripts"
)

// readShards reads the shard count of namespace ns from its guard
// {ns}:epoch (scripts.ReadShards): N for a sharded namespace, 1 for an
// unsharded one, 0 when nothing has laid it out yet (or Redis lost its
// guard), which has no layout until the next session gives it one.
func readShards(ctx context.Context, c rueidis.Client, ns string) (int, error) {
	n, err := scripts.ReadShards(ctx, conn.Bound(c), ns)
	if err != nil {
		return 0, fmt.Errorf("read the shard count of namespace %q: %w", ns, err)
	}
	return n, nil
}

// layoutText names a shard count as readShards returns it.
func layoutText(n int) string {
	switch n {
	case 0:
		return "no layout yet"
	case 1:
		return "unsharded"
	}
	return strconv.Itoa(n) + " shards"
}

// namespaceShards returns the shard count the admin commands read namespace
// g.namespace with: the one Redis records, else --shards, else 1
// (unsharded). A --shards that differs from what Redis records is a usage
// error.
func namespaceShards(ctx context.Context, g *globals, c rueidis.Client) (int, error) {
	n, err := readShards(ctx, c, g.namespace)
	switch {
	case err != nil:
		return 0, fail(exitError, "%v", err)
	case g.shards == 0:
		return max(n, 1), nil
	case n != 0 && n != g.shards:
		return 0, fail(exitUsage, "--shards %d: namespace %q is %s", g.shards, g.namespace, layoutText(n))
	}
	return g.shards, nil
}

// nsView is a namespace as the commands that open no session see it
// (status, reset, pool, sem-limit, jobs): one scripts.Env for an unsharded
// namespace; one per shard for a sharded one.
type nsView struct {
	name   string
	c      rueidis.Client // bound (conn.Bound)
	shards int            // the namespace's shard count; 0 when unsharded
	envs   []scripts.Env  // envs[k] is shard k's; the namespace's alone when unsharded
}

// newView returns the view of namespace ns of shards shards (0 or 1:
// unsharded) through c.
func newView(c rueidis.Client, ns string, shards int) *nsView {
	if shards <= 1 {
		e := env(c, ns)
		return &nsView{name: ns, c: e.C, envs: []scripts.Env{e}}
	}
	v := &nsView{name: ns, c: conn.Bound(c), shards: shards, envs: make([]scripts.Env, shards)}
	for k := range v.envs {
		// Sharded is false also on a cluster: the sessions of a sharded
		// namespace hear their notifications with SUBSCRIBE, not SSUBSCRIBE.
		v.envs[k] = scripts.Env{C: v.c, K: scripts.ShardKeys(ns, k), Shards: shards}
	}
	return v
}

// env returns the Env of the shard resource name lives in.
func (v *nsView) env(name string) scripts.Env { return v.envs[scripts.ShardOf(name, len(v.envs))] }

// shardName is a record found in shard k (0 when unsharded).
type shardName struct {
	k    int
	name string
}

// list returns the records that listing l (such as scripts.Keys.Sessions)
// finds in every shard, sorted by name, then shard. It scans the keyspace
// once (every master's on a Redis Cluster), whatever the shard count: the
// pattern of shard 0 with any shard number in its place.
func (v *nsView) list(ctx context.Context, l func(scripts.Keys) scripts.Listing) ([]shardName, error) {
	if v.shards == 0 {
		all, err := names(ctx, v.c, l(v.envs[0].K))
		out := make([]shardName, len(all))
		for i, n := range all {
			out[i] = shardName{name: n}
		}
		return out, err
	}
	ls := make([]scripts.Listing, v.shards)
	for k := range ls {
		ls[k] = l(v.envs[k].K)
	}
	// Shard 0's tag is "ns#0.x" (scripts.ShardTag) and the namespace has
	// no '}': its last '#' before the first "}:" starts what each shard
	// has of its own.
	p0 := ls[0].Pattern()
	j := strings.Index(p0, "}:")
	i := strings.LastIndexByte(p0[:max(j, 0)], '#')
	if j < 0 || i < 0 {
		return nil, fmt.Errorf("SCAN pattern %q names no shard", p0)
	}
	pattern := p0[:i] + "#*" + p0[j:]
	seen := map[shardName]bool{}
	err := scanKeys(ctx, v.c, pattern, func(key string) {
		if k, ok := v.shardOfKey(key); ok {
			if name, ok := ls[k].Name(key); ok {
				seen[shardName{k, name}] = true
			}
		}
	})
	return slices.SortedFunc(maps.Keys(seen), func(a, b shardName) int {
		return cmp.Or(strings.Compare(a.name, b.name), cmp.Compare(a.k, b.k))
	}), err
}

// shardOfKey returns the shard k whose prefix {<tag of k>}: key starts
// with (scripts.ShardTag: "ns#k.x").
func (v *nsView) shardOfKey(key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, "{"+v.name+"#")
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(digits)
	if err != nil || k < 0 || k >= v.shards || strconv.Itoa(k) != digits ||
		!strings.HasPrefix(key, scripts.ShardKeys(v.name, k).Prefix) {
		return 0, false
	}
	return k, true
}

// sessionOf returns the id of the session that holds hold hid, found
// through e. In a sharded namespace (e.Shards > 1) a session has a lease
// copy per shard it used, all with its id but for a copy that replaced
// one that ended, "<sid>-<g>" (docs/protocol.md, "Shards"): that copy's
// holds are the session's too.
func sessionOf(e scripts.Env, hid string) string { return copySession(e, sidOf(hid)) }

// copySession returns the id of the session whose lease copy, found
// through e, has id lease (see sessionOf, scripts.CopyOf).
func copySession(e scripts.Env, lease string) string {
	if e.Shards <= 1 {
		return lease
	}
	return scripts.CopyOf(lease)
}

// shardsText names shards for people, runs as ranges: "shard 3",
// "shards 0, 2-5, 9".
func shardsText(ks []int) string {
	var parts []string
	for i := 0; i < len(ks); {
		j := i
		for j+1 < len(ks) && ks[j+1] == ks[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, strconv.Itoa(ks[i]))
		default:
			parts = append(parts, strconv.Itoa(ks[i])+"-"+strconv.Itoa(ks[j]))
		}
		i = j + 1
	}
	if len(ks) == 1 {
		return "shard " + parts[0]
	}
	return "shards " + strings.Join(parts, ", ")
}
