package chaos

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/redis/rueidis"

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

// masterSnapshots takes two snapshots of namespace ns a TTL apart on the
// master addr returns, both on the same node and that node a master at the
// end. Sentinel may still fail over on its own after the last heal (seen: a
// third failover the harness did not ask for), and a snapshot of a node
// being demoted shows writes the new master never had or already undid as
// leaks. It tries 3 times and reports whether it succeeded.
func masterSnapshots(addr func() string, ns string, ttl time.Duration) (State, State, bool) {
	for range 3 {
		a1 := addr()
		st1 := snapshot(a1, ns)
		time.Sleep(ttl)
		a2 := addr()
		st2 := snapshot(a2, ns)
		if a1 != "" && a1 == a2 && isMaster(a2) {
			return st1, st2, true
		}
	}
	return nil, nil, false
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
