package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/conn"
	"github.com/leasehold/leasehold/internal/scripts"
)

// adminTimeout bounds status, reset and pool commands.
const adminTimeout = 15 * time.Second

// connectAdmin is connect for the short admin commands (status, reset,
// pool, sem-limit, jobs), with the namespace's shard count read from Redis
// (see namespaceShards): the returned ctx is bounded by adminTimeout, and
// done closes the client and releases the ctx.
func connectAdmin(ctx context.Context, g *globals) (context.Context, *nsView, func(), error) {
	c, err := connect(g)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	done := func() { cancel(); c.Close() }
	n, err := namespaceShards(ctx, g, c)
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return ctx, newView(c, g.namespace, n), done, nil
}

// connect opens a client for a command that needs no session (status,
// reset, pool). The caller closes it.
func connect(g *globals) (rueidis.Client, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	opt, err := g.clientOption()
	if err != nil {
		return nil, err
	}
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = 5 * time.Second
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fail(exitError, "connect to Redis at %s: %v%s", describeAddr(opt), err, connectHint(opt, err))
	}
	return c, nil
}

// env is what the scripts need, without a session.
func env(c rueidis.Client, ns string) scripts.Env {
	return scripts.Env{C: conn.Bound(c), K: scripts.NewKeys(ns), Sharded: c.Mode() == rueidis.ClientModeCluster}
}

func describeAddr(opt rueidis.ClientOption) string {
	a := strings.Join(opt.InitAddress, ",")
	if opt.Sentinel.MasterSet != "" {
		a = fmt.Sprintf("sentinel %s (master %q)", a, opt.Sentinel.MasterSet)
	}
	return a
}

// clusterShard is one master of a Redis Cluster and the slots it serves.
type clusterShard struct {
	master string
	slots  [][2]int64
}

// clusterTopology reads the masters of the cluster c
// talks to with CLUSTER SLOTS. It asks every node at once and takes the
// first answer, so that a node that hangs or is down (a replica being
// restarted, a master that is failing over) does not hold it up. Addresses
// are those rueidis uses as keys of c.Nodes().
func clusterTopology(ctx context.Context, c rueidis.Client) ([]clusterShard, error) {
	nodes := c.Nodes()
	if len(nodes) == 0 {
		return nil, errors.New("CLUSTER SLOTS: the client knows no cluster node")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the slower askers return at once
	type answer struct {
		addr   string
		ranges []rueidis.RedisMessage
		err    error
	}
	answers := make(chan answer, len(nodes))
	for addr, n := range nodes {
		go func() {
			n := conn.Bound(n)
			ranges, err := n.Do(ctx, n.B().ClusterSlots().Build()).ToArray()
			answers <- answer{addr, ranges, err}
		}()
	}
	var errs []string
	for range nodes {
		a := <-answers
		if a.err == nil {
			return parseClusterSlots(a.ranges, a.addr)
		}
		errs = append(errs, fmt.Sprintf("%s: %v", a.addr, a.err))
	}
	slices.Sort(errs)
	return nil, fmt.Errorf("CLUSTER SLOTS: no node answered: %s", strings.Join(errs, "; "))
}

// parseClusterSlots reads the masters of a CLUSTER SLOTS reply the way
// rueidis does: an empty endpoint is the host of the node that answered
// (from), "?" unknown. (Its replicas are left out: CLUSTER SLOTS omits a
// replica until gossip has told the answering node that it synced.)
func parseClusterSlots(ranges []rueidis.RedisMessage, from string) ([]clusterShard, error) {
	endpoint := func(node rueidis.RedisMessage) (string, error) {
		f, err := node.ToArray()
		if err != nil || len(f) < 2 {
			return "", fmt.Errorf("CLUSTER SLOTS: malformed node %v", node)
		}
		host, _ := f[0].ToString()
		port, err := f[1].AsInt64()
		if err != nil {
			return "", fmt.Errorf("CLUSTER SLOTS: malformed port: %w", err)
		}
		switch host {
		case "":
			host, _, _ = net.SplitHostPort(from)
		case "?":
			return "", nil
		}
		return net.JoinHostPort(host, strconv.FormatInt(port, 10)), nil
	}
	byMaster := map[string]*clusterShard{}
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: malformed range %v", r)
		}
		lo, err1 := f[0].AsInt64()
		hi, err2 := f[1].AsInt64()
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("CLUSTER SLOTS: malformed range: %w", err)
		}
		master, err := endpoint(f[2])
		if err != nil {
			return nil, err
		}
		if master == "" {
			return nil, fmt.Errorf("CLUSTER SLOTS: slots %d-%d: the master's address is unknown", lo, hi)
		}
		sh := byMaster[master]
		if sh == nil {
			sh = &clusterShard{master: master}
			byMaster[master] = sh
		}
		sh.slots = append(sh.slots, [2]int64{lo, hi})
	}
	out := make([]clusterShard, 0, len(byMaster))
	for _, m := range slices.Sorted(maps.Keys(byMaster)) {
		out = append(out, *byMaster[m])
	}
	return out, nil
}

// serves reports whether the shard's master serves slot.
func (sh clusterShard) serves(slot int64) bool {
	for _, r := range sh.slots {
		if r[0] <= slot && slot <= r[1] {
			return true
		}
	}
	return false
}

// namespaceSlot is the Redis Cluster hash slot of namespace k: the slot
// rueidis routes every command on the namespace's keys to.
func namespaceSlot(c rueidis.Client, k scripts.Keys) int64 {
	cmd := c.B().Get().Key(k.Prefix).Build()
	return int64(cmd.Slot())
}

// scanTarget is a node to SCAN; addr is "" when it is the only one.
type scanTarget struct {
	addr string
	c    rueidis.Client
}

// scanTargets returns the nodes that SCAN must visit for the keys of a
// namespace: c itself, or on Redis Cluster every master (the namespace lives
// in one slot, but SCAN cannot be routed by slot, and while the slot
// migrates its keys are split between two masters). Replicas are left out:
// they hold nothing their master lacks, may still show keys it has deleted,
// and one that hangs would hold status up.
func scanTargets(ctx context.Context, c rueidis.Client) ([]scanTarget, error) {
	if c.Mode() != rueidis.ClientModeCluster {
		return []scanTarget{{c: c}}, nil
	}
	shards, err := clusterTopology(ctx, c)
	if err != nil {
		return nil, err
	}
	nodes := c.Nodes()
	out := make([]scanTarget, 0, len(shards))
	for _, sh := range shards {
		n, ok := nodes[sh.master]
		if !ok {
			return nil, fmt.Errorf("master %s is not among the client's nodes (the cluster's topology changed?); try again", sh.master)
		}
		out = append(out, scanTarget{addr: sh.master, c: conn.Bound(n)}) // each SCAN bounded by ctx
	}
	return out, nil
}

// names returns the names of the records of l (see scripts.Listing),
// sorted. On Redis Cluster every master is scanned (see scanTargets); a key
// found on two masters (the slot migrating) is listed once.
func names(ctx context.Context, c rueidis.Client, l scripts.Listing) ([]string, error) {
	seen := map[string]bool{}
	err := scanKeys(ctx, c, l.Pattern(), func(key string) {
		if name, ok := l.Name(key); ok {
			seen[name] = true
		}
	})
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// scanKeys calls visit with each key that matches pattern. On Redis
// Cluster every master is scanned (see scanTargets), and a key found on
// two (its slot migrating) is visited twice.
func scanKeys(ctx context.Context, c rueidis.Client, pattern string, visit func(key string)) error {
	targets, err := scanTargets(ctx, c)
	if err != nil {
		return err
	}
	for _, tg := range targets {
		cc := tg.c
		cursor := uint64(0)
		for {
			e, err := cc.Do(ctx, cc.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				if tg.addr != "" {
					return fmt.Errorf("SCAN %s on master %s: %w", pattern, tg.addr, err)
				}
				return fmt.Errorf("SCAN %s: %w", pattern, err)
			}
			for _, key := range e.Elements {
				visit(key)
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return nil
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
	sid := scripts.SessionOf(hid)
	return sid
}

// msHuman formats milliseconds for people.
func msHuman(v int64) string { return human(time.Duration(v) * time.Millisecond) }
