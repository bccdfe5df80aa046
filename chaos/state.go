package chaos

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
)

// State is a snapshot of a namespace's keys in Redis, for diagnosis.
type State map[string]any

// snapshot reads every key of namespace ns on addr. Errors give a partial
// snapshot (Redis may be down at the time).
func snapshot(addr, ns string) State {
	st := State{}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		st["error"] = err.Error()
		return st
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, err := c.Do(ctx, c.B().Keys().Pattern("{"+ns+"}:*").Build()).AsStrSlice()
	if err != nil {
		st["error"] = err.Error()
		return st
	}
	sort.Strings(keys)
	for _, k := range keys {
		typ, _ := c.Do(ctx, c.B().Type().Key(k).Build()).ToString()
		var v any
		switch typ {
		case "string":
			v, _ = c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
		case "hash":
			v, _ = c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap()
		case "list":
			v, _ = c.Do(ctx, c.B().Lrange().Key(k).Start(0).Stop(-1).Build()).AsStrSlice()
		case "set":
			v, _ = c.Do(ctx, c.B().Smembers().Key(k).Build()).AsStrSlice()
		case "zset":
			v, _ = c.Do(ctx, c.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()).AsZScores()
		}
		pttl, _ := c.Do(ctx, c.B().Pttl().Key(k).Build()).AsInt64()
		st[strings.TrimPrefix(k, "{"+ns+"}:")] = map[string]any{"type": typ, "pttl": pttl, "value": v}
	}
	return st
}

// holders returns the hold ids a snapshot records as holders of a resource
// (mutex, election, pool member, semaphore permits), by resource.
func (st State) holders() map[string]string {
	out := map[string]string{}
	for k, raw := range st {
		e, ok := raw.(map[string]any)
		if !ok || e["type"] != "hash" {
			continue
		}
		h, _ := e["value"].(map[string]string)
		switch {
		case strings.HasPrefix(k, "m:") || strings.HasPrefix(k, "el:"):
			if hid := h["hid"]; hid != "" {
				out[k] = hid
			}
		case strings.HasPrefix(k, "semh:"):
			for hid := range h {
				out[k+"#"+hid] = hid
			}
		case strings.HasPrefix(k, "pool:") && strings.HasSuffix(k, ":h"):
			for member, hid := range h {
				out[k+"#"+member] = hid
			}
		}
	}
	return out
}

// leaseAlive reports whether the snapshot has session sid's lease.
func (st State) leaseAlive(sid string) bool {
	_, ok := st["s:"+sid]
	return ok
}

// keySpace is one hash slot's worth of a namespace: the namespace itself,
// or one of its shards (Scenario.Shards), and where its master is now.
type keySpace struct {
	ns   string        // what snapshot reads: the namespace, or shard k's tag (scripts.ShardTag)
	addr func() string // the address of its master now
}

// keySpaces returns the key spaces of the scenario's namespace: itself
// when unsharded, else each of its shards.
func (env *Env) keySpaces() []keySpace {
	n := env.Scenario.Shards
	if n <= 1 {
		return []keySpace{{ns: env.Namespace, addr: env.stateAddr}}
	}
	out := make([]keySpace, n)
	for k := range n {
		ks := keySpace{ns: scripts.ShardTag(env.Namespace, k), addr: env.stateAddr}
		if env.Cluster != nil {
			slot := redistest.Slot(scripts.ShardKeys(env.Namespace, k).Epoch())
			ks.addr = func() string { return env.Cluster.MasterOf(env.T, slot).Addr() }
		}
		out[k] = ks
	}
	return out
}

// masterSnapshots takes two snapshots of every key space a TTL apart, each
// key space's on the master its addr returns, both on the same node and
// that node a master at the end. Sentinel may still fail over on its own
// after the last heal (seen: a third failover the harness did not ask for),
// and a snapshot of a node being demoted shows writes the new master never
// had or already undid as leaks. It tries 3 times and reports whether it
// succeeded.
func masterSnapshots(spaces []keySpace, ttl time.Duration) ([]State, []State, bool) {
	for range 3 {
		a1, st1 := snapshotAll(spaces)
		time.Sleep(ttl)
		a2, st2 := snapshotAll(spaces)
		if slices.Equal(a1, a2) && allMasters(a2) {
			return st1, st2, true
		}
	}
	return nil, nil, false
}

// snapshotAll snapshots each key space on its master; it returns the
// masters' addresses and the snapshots.
func snapshotAll(spaces []keySpace) ([]string, []State) {
	addrs := make([]string, len(spaces))
	sts := make([]State, len(spaces))
	for i, ks := range spaces {
		addrs[i] = ks.addr()
		sts[i] = snapshot(addrs[i], ks.ns)
	}
	return addrs, sts
}

// allMasters reports whether every address of addrs is set and answers
// ROLE with "master".
func allMasters(addrs []string) bool {
	seen := map[string]bool{}
	for _, a := range addrs {
		if a == "" {
			return false
		}
		if !seen[a] && !isMaster(a) {
			return false
		}
		seen[a] = true
	}
	return true
}

// stateOf is what a history dump keeps of snapshots sts of spaces: the
// namespace's keys, or for a sharded one each used shard's by its name.
func stateOf(spaces []keySpace, sts []State) State {
	switch {
	case len(sts) == 0:
		return nil
	case len(spaces) == 1:
		return sts[0]
	}
	out := State{}
	for i, st := range sts {
		if len(st) > 1 || (len(st) == 1 && st["epoch"] == nil) {
			out[spaces[i].ns] = st
		}
	}
	return out
}

// phantomsIn is phantoms for every key space (a hold and its lease copy
// are in the same shard), each named by its key space when there are
// several.
func phantomsIn(spaces []keySpace, a, b []State, granted map[string]bool) []string {
	var out []string
	for i := range min(len(a), len(b)) {
		for _, ph := range phantoms(a[i], b[i], granted) {
			if len(spaces) > 1 {
				ph = spaces[i].ns + ": " + ph
			}
			out = append(out, ph)
		}
	}
	return out
}

// isMaster reports whether the Redis at addr answers ROLE with "master".
func isMaster(addr string) bool {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		return false
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := c.Do(ctx, c.B().Role().Build()).ToArray()
	if err != nil || len(v) == 0 {
		return false
	}
	role, _ := v[0].ToString()
	return role == "master"
}

// phantoms returns the holds recorded as holders in both snapshots, whose
// session's lease is alive, and that no worker was ever granted: resources
// leaked to a live session that does not know it holds them.
func phantoms(a, b State, granted map[string]bool) []string {
	var out []string
	hb := b.holders()
	for res, hid := range a.holders() {
		if hb[res] != hid || granted[hid] {
			continue
		}
		sid := scripts.SessionOf(hid)
		if !b.leaseAlive(sid) {
			continue
		}
		out = append(out, res+" held by "+hid)
	}
	sort.Strings(out)
	return out
}
