package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/scripts"
)

// adminTimeout bounds status, reset and pool commands.
const adminTimeout = 15 * time.Second

// connect opens a client for a command that needs no session (status,
// reset, pool). The caller closes it.
// connectAdmin is connect for the short admin commands (status, reset,
// pool): the returned ctx is bounded by adminTimeout, and done closes the
// client and releases the ctx.
func connectAdmin(ctx context.Context, g *globals) (context.Context, scripts.Env, func(), error) {
	c, e, err := connect(g)
	if err != nil {
		return nil, scripts.Env{}, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	return ctx, e, func() { cancel(); c.Close() }, nil
}

func connect(g *globals) (rueidis.Client, scripts.Env, error) {
	if err := g.check(); err != nil {
		return nil, scripts.Env{}, err
	}
	opt, err := clientOption(g.url())
	if err != nil {
		return nil, scripts.Env{}, err
	}
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = 5 * time.Second
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, scripts.Env{}, fail(exitError, "connect to Redis at %s: %v", describeAddr(opt), err)
	}
	return c, env(c, g.namespace), nil
}

// env is what the scripts need, without a session.
func env(c rueidis.Client, ns string) scripts.Env {
	return scripts.Env{C: scripts.Bound(c), K: scripts.NewKeys(ns), Sharded: c.Mode() == rueidis.ClientModeCluster}
}

func describeAddr(opt rueidis.ClientOption) string {
	a := strings.Join(opt.InitAddress, ",")
	if opt.Sentinel.MasterSet != "" {
		a = fmt.Sprintf("sentinel %s (master %q)", a, opt.Sentinel.MasterSet)
	}
	return a
}

// globEscape escapes the characters special in Redis glob patterns.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// scan returns the keys of namespace k that start with k.Prefix+sub, sorted.
// On Redis Cluster every node is scanned (the namespace lives in one slot,
// whose owner SCAN cannot be routed to).
func scan(ctx context.Context, c rueidis.Client, k scripts.Keys, sub string) ([]string, error) {
	pattern := globEscape(k.Prefix+sub) + "*"
	clients := []rueidis.Client{c}
	if c.Mode() == rueidis.ClientModeCluster {
		clients = nil
		for _, n := range c.Nodes() {
			clients = append(clients, scripts.Bound(n)) // each SCAN bounded by ctx
		}
	}
	seen := map[string]bool{}
	for _, cc := range clients {
		cursor := uint64(0)
		for {
			e, err := cc.Do(ctx, cc.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return nil, fmt.Errorf("SCAN %s: %w", pattern, err)
			}
			for _, key := range e.Elements {
				seen[key] = true
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// names returns the resource names of the keys found under k.Prefix+sub.
func names(ctx context.Context, c rueidis.Client, k scripts.Keys, sub string) ([]string, error) {
	keys, err := scan(ctx, c, k, sub)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(keys))
	for _, key := range keys {
		out = append(out, strings.TrimPrefix(key, k.Prefix+sub))
	}
	return out, nil
}

// poolNames derives pool names from their keys: "{ns}:pool:<name>:" followed
// by f (free members), h (held members), t, s or i:<session id>. A pool with
// members has an f or an h key.
func poolNames(ctx context.Context, c rueidis.Client, k scripts.Keys) ([]string, error) {
	keys, err := scan(ctx, c, k, "pool:")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, key := range keys {
		rest := strings.TrimPrefix(key, k.Prefix+"pool:")
		if name, ok := strings.CutSuffix(rest, ":f"); ok && name != "" {
			seen[name] = true
		} else if name, ok := strings.CutSuffix(rest, ":h"); ok && name != "" {
			seen[name] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// human formats a duration as "8.2s" for people.
func human(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	default:
		return d.Round(time.Second).String()
	}
}

// sidOf returns the session id in a hold id "<sid>.<n>".
func sidOf(hid string) string {
	sid, _, _ := strings.Cut(hid, ".")
	return sid
}

// msHuman formats milliseconds for people.
func msHuman(v int64) string { return human(time.Duration(v) * time.Millisecond) }
