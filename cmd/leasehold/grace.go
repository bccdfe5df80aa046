package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/scripts"
)

// grace is the state of a namespace's restart grace (design.md, Safety 4):
// after Redis lost its data, grants are refused until the time stored in
// the epoch marker {ns}:epoch (server time, ms), which also records the
// namespace's grace (see scripts.ParseEpoch).
type grace struct {
	missing bool          // no marker: the data was lost and nobody noticed yet; the next grant starts a grace
	left    time.Duration // grants refused for this long; 0: none
	grace   time.Duration // the namespace's restart grace; 0 when none is recorded
}

// pending reports whether grants are refused now.
func (g grace) pending() bool { return g.left > 0 }

// String says why grants are refused and for how long, e.g. "grants resume
// in 7s: the restart grace (10s) started 3s ago, when a session found the
// namespace's data missing (Redis lost it, or the namespace is new)". The
// grace counts from then; a brand-new namespace cannot be told from one
// whose data was lost, so the text names both.
func (g grace) String() string {
	const why = "the namespace's data missing (Redis lost it, or the namespace is new)"
	switch {
	case g.missing:
		return "the epoch marker is missing (Redis lost its data, or nothing used the namespace yet): the next session starts the restart grace"
	case !g.pending():
		return "no restart grace pending"
	case g.grace >= g.left:
		return fmt.Sprintf("grants resume in %v: the restart grace (%v) started %v ago, when a session found %s",
			round(g.left), round(g.grace), round(g.grace-g.left), why)
	default:
		return fmt.Sprintf("grants resume in %v: a restart grace is running, since a session found %s", round(g.left), why)
	}
}

// readGrace reads the restart grace of namespace e.K in one round trip: the
// marker and the server's TIME, sent to the node that owns the namespace's
// slot, whose clock the marker is set by (TIME carries no key: on Redis
// Cluster it would go to any node).
func readGrace(ctx context.Context, e scripts.Env) (grace, error) {
	return parseGrace(e.K.Epoch(), e.C.DoMulti(ctx, graceCmds(e)...))
}

// readGraces is readGrace of each of envs (the shards of a namespace), in
// one round trip (one per master on a Redis Cluster).
func readGraces(ctx context.Context, c rueidis.Client, envs []scripts.Env) ([]grace, error) {
	cmds := make(rueidis.Commands, 0, 2*len(envs))
	for _, e := range envs {
		cmds = append(cmds, graceCmds(e)...)
	}
	res := c.DoMulti(ctx, cmds...)
	out := make([]grace, len(envs))
	for i, e := range envs {
		g, err := parseGrace(e.K.Epoch(), res[2*i:2*i+2])
		if err != nil {
			return nil, err
		}
		out[i] = g
	}
	return out, nil
}

// graceCmds are the commands that read the restart grace of namespace (or
// shard) e.K: its epoch marker, and the TIME of the node that has it.
func graceCmds(e scripts.Env) rueidis.Commands {
	k := e.K.Epoch()
	return rueidis.Commands{e.C.B().Get().Key(k).Build(), e.C.B().Time().Build().SetSlot(k)}
}

// parseGrace reads the replies to graceCmds of epoch marker k.
func parseGrace(k string, res []rueidis.RedisResult) (grace, error) {
	marker, err := res[0].ToString()
	if rueidis.IsRedisNil(err) {
		return grace{missing: true}, nil
	}
	if err != nil {
		return grace{}, fmt.Errorf("GET %s: %w", k, err)
	}
	until, recorded, ok := scripts.ParseEpoch(marker)
	if !ok {
		return grace{}, fmt.Errorf("epoch marker %s: %q is not a time in ms and a grace", k, marker)
	}
	g := grace{grace: recorded}
	if until == 0 {
		return g, nil // marked intact with no grace at all
	}
	t, err := res[1].AsStrSlice()
	if err != nil || len(t) != 2 {
		return grace{}, fmt.Errorf("TIME: %v %w", t, err)
	}
	sec, err1 := strconv.ParseInt(t[0], 10, 64)
	usec, err2 := strconv.ParseInt(t[1], 10, 64)
	if err1 != nil || err2 != nil {
		return grace{}, fmt.Errorf("TIME: malformed reply %q", t)
	}
	now := sec*1000 + usec/1000 // as now_ms in common.lua
	g.left = time.Duration(max(until-now, 0)) * time.Millisecond
	return g, nil
}
