package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/scripts"
)

// grace is the state of a namespace's restart grace (design.md, Safety 4):
// after Redis lost its data, grants are refused until the time stored in
// the epoch marker {ns}:epoch (server time, ms; see grace_left in
// internal/scripts/common.lua).
type grace struct {
	missing bool          // no marker: the data was lost and nobody noticed yet; the next grant starts a grace
	left    time.Duration // grants refused for this long; 0: none
	uptime  time.Duration // the Redis process's uptime; < 0 when unknown (INFO refused)
}

// pending reports whether grants are refused now.
func (g grace) pending() bool { return g.left > 0 }

// String says why grants are refused and for how long, e.g. "Redis lost its
// data 3s ago: grants resume in 7s (restart grace)". The grace counts from
// the Redis process's start, so the loss is dated by its uptime.
func (g grace) String() string {
	switch {
	case g.missing:
		return "the epoch marker is missing (Redis lost its data, or nothing used the namespace yet): the next session starts the restart grace"
	case !g.pending():
		return "no restart grace pending"
	case g.uptime >= 0:
		return fmt.Sprintf("Redis lost its data %v ago: grants resume in %v (restart grace)", round(g.uptime), round(g.left))
	default:
		return fmt.Sprintf("Redis lost its data: grants resume in %v (restart grace)", round(g.left))
	}
}

// readGrace reads the restart grace of namespace e.K in one round trip: the
// marker, the server's TIME and its uptime (INFO server), the last two sent
// to the node that owns the namespace's slot, whose clock the marker is
// set by (TIME and INFO carry no key: on Redis Cluster they would go to
// any node). An INFO refused (an ACL without +info) leaves the uptime
// unknown.
func readGrace(ctx context.Context, e scripts.Env) (grace, error) {
	k := e.K.Epoch()
	res := e.C.DoMulti(ctx,
		e.C.B().Get().Key(k).Build(),
		e.C.B().Time().Build().SetSlot(k),
		e.C.B().Info().Section("server").Build().SetSlot(k))
	marker, err := res[0].ToString()
	if rueidis.IsRedisNil(err) {
		return grace{missing: true, uptime: -1}, nil
	}
	if err != nil {
		return grace{}, fmt.Errorf("GET %s: %w", k, err)
	}
	until, err := strconv.ParseInt(marker, 10, 64)
	if err != nil {
		return grace{}, fmt.Errorf("epoch marker %s: %q is not a time in ms", k, marker)
	}
	g := grace{uptime: -1}
	if info, err := res[2].ToString(); err == nil {
		g.uptime = infoUptime(info)
	}
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

// infoUptime reads uptime_in_seconds from an INFO server reply, or -1.
func infoUptime(info string) time.Duration {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "uptime_in_seconds:"); ok {
			if s, err := strconv.ParseInt(v, 10, 64); err == nil {
				return time.Duration(s) * time.Second
			}
		}
	}
	return -1
}
