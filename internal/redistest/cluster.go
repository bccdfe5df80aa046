package redistest

// Redis Cluster harness: StartCluster and the Cluster methods. The package
// doc lists the cluster faults.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/slot"
)

// NumSlots is the number of Redis Cluster hash slots.
const NumSlots = slot.NumSlots

const (
	clusterPoll     = 20 * time.Millisecond // state poll interval
	clusterBound    = 30 * time.Second      // bound for a cluster to settle
	createTimeout   = 60 * time.Second      // bound for redis-cli --cluster create
	migrateTimeoutM = "5000"                // MIGRATE timeout, ms
	busPortOffset   = 10000                 // cluster bus port = port + 10000
	manualFailoverT = 6 * time.Second       // resend CLUSTER FAILOVER after this (Redis gives up after 5 s)
)

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	Masters     int           // masters, default 3 (redis-cli needs at least 3)
	Replicas    int           // replicas per master, default 1; negative: none
	NodeTimeout time.Duration // cluster-node-timeout, default 2s
	Args        []string      // extra redis-server arguments for every node
}

// Cluster is a Redis Cluster of redis-server processes started by a test.
// Node ids never change (Restart keeps nodes-<port>.conf), roles do.
type Cluster struct {
	o     ClusterOptions
	nodes []*Server
	ids   map[*Server]string
	byID  map[string]*Server
}

// StartCluster starts the nodes on free 127.0.0.1 ports (port+10000, the bus
// port, free too), creates the cluster with redis-cli and waits until it is
// healthy and every master has its replicas in sync. The nodes are killed in
// t.Cleanup.
func StartCluster(t testing.TB, o ClusterOptions) *Cluster {
	t.Helper()
	if o.Masters == 0 {
		o.Masters = 3
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	o.Replicas = max(o.Replicas, 0)
	if o.NodeTimeout == 0 {
		o.NodeTimeout = 2 * time.Second
	}
	if o.Masters < 3 {
		t.Fatalf("redistest: a cluster needs at least 3 masters, not %d", o.Masters)
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("redistest: redis-cli not found on PATH (%v); it comes with redis-server (apt-get install redis-server)", err)
	}
	args := append([]string{
		"--cluster-enabled", "yes",
		"--cluster-node-timeout", strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10),
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
	}, o.Args...)
	// Relative to --dir, which redis-server enters while reading its arguments.
	confArgs := func(port int) []string { return []string{"--cluster-config-file", nodesConf(port)} }

	c := &Cluster{o: o, ids: map[*Server]string{}, byID: map[string]*Server{}}
	for range o.Masters * (1 + o.Replicas) {
		c.nodes = append(c.nodes, start(t, Options{Args: args}, freeClusterPort, confArgs))
	}

	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()
	cli := append([]string{"--cluster", "create"}, c.Seeds()...)
	cli = append(cli, "--cluster-replicas", strconv.Itoa(o.Replicas), "--cluster-yes")
	cmd := exec.CommandContext(ctx, "redis-cli", cli...)
	cmd.SysProcAttr = sysProcAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(cli, " "), err, out)
	}

	for _, s := range c.nodes {
		id, err := s.Do(t, "CLUSTER", "MYID").ToString()
		if err != nil {
			t.Fatalf("redistest: CLUSTER MYID on %s: %v", s.Addr(), err)
		}
		c.ids[s], c.byID[id] = id, s
	}
	c.waitFor(t, "cluster to form", clusterBound, func() error { return c.health(t, o.Replicas) })
	return c
}

// Seeds returns the addresses of all nodes, dead or alive.
func (c *Cluster) Seeds() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Nodes returns every node, in start order (roles change with faults).
func (c *Cluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// ID returns the cluster node id of node.
func (c *Cluster) ID(node *Server) string { return c.ids[node] }

// Client returns a cluster-mode rueidis client seeded with every node, closed
// in t.Cleanup.
func (c *Cluster) Client(t testing.TB) rueidis.Client {
	t.Helper()
	cl, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:      c.Seeds(),
		DisableCache:     true,
		ConnWriteTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatalf("redistest: connect to cluster %v: %v", c.Seeds(), err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Do runs one command on one node (no redirection is followed).
func (c *Cluster) Do(t testing.TB, node *Server, args ...string) rueidis.RedisResult {
	t.Helper()
	return node.Do(t, args...)
}

// MasterOf returns the node serving slot as master, as the first live node
// that answers sees it.
func (c *Cluster) MasterOf(t testing.TB, slot int) *Server {
	t.Helper()
	var errs []error
	for _, s := range c.nodes {
		if !s.live() {
			continue
		}
		v, err := c.view(t, s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		id := v.ownerOf(slot)
		if m := c.byID[id]; m != nil {
			return m
		}
		t.Fatalf("redistest: %s says slot %d is served by %q, not one of the cluster's nodes", s.Addr(), slot, id)
	}
	t.Fatalf("redistest: no live node answered CLUSTER NODES: %v", errors.Join(errs...))
	return nil
}

// Masters returns the live nodes that serve at least one slot, as the first
// live node that answers sees it, in start order.
func (c *Cluster) Masters(t testing.TB) []*Server {
	t.Helper()
	for _, s := range c.nodes {
		if !s.live() {
			continue
		}
		v, err := c.view(t, s)
		if err != nil {
			continue
		}
		var ms []*Server
		for _, n := range c.nodes {
			if n.live() && slices.ContainsFunc(v.owners, func(r slotRange) bool { return r.id == c.ids[n] }) {
				ms = append(ms, n)
			}
		}
		return ms
	}
	t.Fatalf("redistest: no live node answered CLUSTER NODES")
	return nil
}

// ReplicaOf returns a live replica of master (by the replica's own view),
// waiting for one to appear.
func (c *Cluster) ReplicaOf(t testing.TB, master *Server) *Server {
	t.Helper()
	var r *Server
	c.waitFor(t, "a replica of "+master.Addr(), clusterBound, func() error {
		for _, s := range c.nodes {
			if s == master || !s.live() {
				continue
			}
			if v, err := c.view(t, s); err == nil && v.self.replica() && v.self.master == c.ids[master] {
				r = s
				return nil
			}
		}
		return fmt.Errorf("no live node says it replicates %s (%s)", master.Addr(), c.ids[master])
	})
	return r
}

// Failover sends CLUSTER FAILOVER to replica, once its link to its master is
// up, and waits until every live node sees it serve its old master's slots.
// The old master becomes its replica; WaitHealthy waits for that link too.
func (c *Cluster) Failover(t testing.TB, replica *Server) {
	t.Helper()
	v, err := c.view(t, replica)
	if err != nil {
		t.Fatalf("redistest: Failover: %v", err)
	}
	if !v.self.replica() {
		t.Fatalf("redistest: Failover: %s is not a replica (flags %s)", replica.Addr(), v.self.flags)
	}
	slots := v.rangesOf(v.self.master)
	master := c.byID[v.self.master]
	if master == nil || !master.live() {
		t.Fatalf("redistest: Failover: the master of %s is not a live node; use KillMaster/WaitFailover", replica.Addr())
	}
	// The master ignores the replica's request until it knows it as its
	// replica (a few ms after the replica's CLUSTER REPLICATE).
	c.waitFor(t, "replica "+replica.Addr()+" in sync and known to its master", clusterBound, func() error {
		mv, err := c.view(t, master)
		if err != nil {
			return err
		}
		rv, err := c.view(t, replica)
		if err != nil {
			return err
		}
		if err := mv.agrees(rv); err != nil {
			return fmt.Errorf("master %s: %w", master.Addr(), err)
		}
		return c.replLinkUp(t, replica)
	})
	var sent time.Time
	c.waitFor(t, "manual failover to "+replica.Addr(), clusterBound, func() error {
		if time.Since(sent) > manualFailoverT {
			if r, _ := c.view(t, replica); r == nil || r.self.replica() {
				if err := replica.Do(t, "CLUSTER", "FAILOVER").Error(); err != nil {
					return fmt.Errorf("CLUSTER FAILOVER: %w", err)
				}
				sent = time.Now()
			}
		}
		return c.servedBy(t, slots, replica)
	})
}

// WaitFailover waits until the slots that oldMaster served when it last saved
// its nodes-<port>.conf (its final view once it is dead) are served by
// another live master, as every live node sees it, and every live node says
// cluster_state:ok. It returns the new master.
func (c *Cluster) WaitFailover(t testing.TB, oldMaster *Server) *Server {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(oldMaster.dir, nodesConf(oldMaster.port)))
	if err != nil {
		t.Fatalf("redistest: WaitFailover: %v", err)
	}
	var slots []slotRange
	for _, n := range parseNodes(string(b)) {
		if n.myself() {
			slots = n.slots
		}
	}
	if len(slots) == 0 {
		t.Fatalf("redistest: WaitFailover: %s served no slots", oldMaster.Addr())
	}
	var to *Server
	c.waitFor(t, "failover of "+oldMaster.Addr(), clusterBound+10*c.o.NodeTimeout, func() error {
		to = nil
		for _, s := range c.nodes {
			if !s.live() {
				continue
			}
			v, err := c.view(t, s)
			if err != nil {
				return err
			}
			for _, r := range slots {
				for slot := r.start; slot <= r.end; slot++ {
					id := v.ownerOf(slot)
					n := c.byID[id]
					if n == nil || n == oldMaster || !n.live() || (to != nil && n != to) {
						return fmt.Errorf("%s: slot %d served by %s", s.Addr(), slot, c.addrOf(id))
					}
					to = n
				}
			}
			if err := c.stateOK(t, s); err != nil {
				return err
			}
		}
		if to == nil {
			return errors.New("no live node")
		}
		return nil
	})
	return to
}

// KillMaster SIGKILLs master and waits until a replica has taken over its
// slots (WaitFailover); it returns the new master. The old one stays dead
// until its Restart, after which it rejoins as a replica.
func (c *Cluster) KillMaster(t testing.TB, master *Server) *Server {
	t.Helper()
	master.Kill()
	return c.WaitFailover(t, master)
}

// RestartEmpty SIGKILLs master and restarts it at once (same port,
// directory and nodes-<port>.conf). Back well inside cluster-node-timeout, it
// is never failed over: it serves the same slots again, without data (its
// replicas resync and drop theirs too). It waits until the cluster is healthy
// and fails the test if the slots moved.
func (c *Cluster) RestartEmpty(t testing.TB, master *Server) {
	t.Helper()
	v, err := c.view(t, master)
	if err != nil {
		t.Fatalf("redistest: RestartEmpty: %v", err)
	}
	slots := v.rangesOf(c.ids[master])
	master.Kill()
	master.Restart()
	c.WaitHealthy(t)
	if err := c.servedBy(t, slots, master); err != nil {
		t.Fatalf("redistest: RestartEmpty: %s did not get its slots back: %v", master.Addr(), err)
	}
}

// WaitHealthy waits until every live node says cluster_state:ok and knows
// every node, all live nodes agree on who serves each slot and on every live
// node's role (none flagged failing), every slot is served by a live node and
// every live replica's link to its master is up.
func (c *Cluster) WaitHealthy(t testing.TB) {
	t.Helper()
	c.waitFor(t, "cluster to be healthy", clusterBound, func() error { return c.health(t, -1) })
}

// MigrateSlot moves slot to the master to: CLUSTER SETSLOT IMPORTING on to
// and MIGRATING on the current owner, then MIGRATE of one key at a time,
// sleeping pause after each, until CLUSTER GETKEYSINSLOT on the source is
// empty (clients may keep writing: the source redirects new keys with ASK),
// then CLUSTER SETSLOT NODE on to, the source and every other live master. It
// waits until every live node sees to serve the slot.
func (c *Cluster) MigrateSlot(t testing.TB, slot int, to *Server, pause time.Duration) {
	t.Helper()
	from := c.MasterOf(t, slot)
	if from == to {
		return
	}
	sl := strconv.Itoa(slot)
	mustOK := func(node *Server, args ...string) {
		t.Helper()
		if err := node.Do(t, args...).Error(); err != nil {
			t.Fatalf("redistest: MigrateSlot: %s on %s: %v", strings.Join(args, " "), node.Addr(), err)
		}
	}
	mustOK(to, "CLUSTER", "SETSLOT", sl, "IMPORTING", c.ids[from])
	mustOK(from, "CLUSTER", "SETSLOT", sl, "MIGRATING", c.ids[to])
	port := strconv.Itoa(to.port)
	for {
		keys, err := from.Do(t, "CLUSTER", "GETKEYSINSLOT", sl, "100").AsStrSlice()
		if err != nil {
			t.Fatalf("redistest: MigrateSlot: CLUSTER GETKEYSINSLOT %d on %s: %v", slot, from.Addr(), err)
		}
		if len(keys) == 0 {
			break
		}
		for _, k := range keys {
			// OK, or NOKEY when the key expired or was deleted meanwhile.
			mustOK(from, "MIGRATE", "127.0.0.1", port, "", "0", migrateTimeoutM, "KEYS", k)
			if pause > 0 {
				time.Sleep(pause)
			}
		}
	}
	mustOK(to, "CLUSTER", "SETSLOT", sl, "NODE", c.ids[to])
	mustOK(from, "CLUSTER", "SETSLOT", sl, "NODE", c.ids[to])
	for _, m := range c.Masters(t) {
		if m != to && m != from {
			mustOK(m, "CLUSTER", "SETSLOT", sl, "NODE", c.ids[to])
		}
	}
	c.waitFor(t, fmt.Sprintf("slot %d to move to %s", slot, to.Addr()), clusterBound, func() error {
		return c.servedBy(t, []slotRange{{start: slot, end: slot}}, to)
	})
}

// ScriptFlushAll runs SCRIPT FLUSH on every live node.
func (c *Cluster) ScriptFlushAll(t testing.TB) {
	t.Helper()
	for _, s := range c.nodes {
		if !s.live() {
			continue
		}
		if err := s.Do(t, "SCRIPT", "FLUSH").Error(); err != nil {
			t.Fatalf("redistest: SCRIPT FLUSH on %s: %v", s.Addr(), err)
		}
	}
}

// Slot returns the cluster hash slot of key (slot.Of).
func Slot(key string) int { return slot.Of(key) }

// --- state ---

// health reports why the cluster is not healthy yet (see WaitHealthy), or
// nil. replicas >= 0 also wants that many in-sync replicas per master.
func (c *Cluster) health(t testing.TB, replicas int) error {
	var ref *clusterView
	var refNode *Server
	perMaster := map[string]int{}
	views := map[*Server]*clusterView{}
	for _, s := range c.nodes {
		if !s.live() {
			continue
		}
		if err := c.stateOK(t, s); err != nil {
			return err
		}
		v, err := c.view(t, s)
		if err != nil {
			return err
		}
		for n, nv := range views {
			if err := v.agrees(nv); err != nil {
				return fmt.Errorf("%s about %s: %w", s.Addr(), n.Addr(), err)
			}
			if err := nv.agrees(v); err != nil {
				return fmt.Errorf("%s about %s: %w", n.Addr(), s.Addr(), err)
			}
		}
		views[s] = v
		if ref == nil {
			ref, refNode = v, s
			for _, r := range v.owners {
				if n := c.byID[r.id]; n == nil || !n.live() {
					return fmt.Errorf("%s: slots %d-%d served by %q, not a live node", s.Addr(), r.start, r.end, r.id)
				}
			}
		} else if !slices.Equal(v.owners, ref.owners) {
			return fmt.Errorf("%s and %s disagree on slot owners: %v vs %v", s.Addr(), refNode.Addr(), v.owners, ref.owners)
		}
		if v.self.replica() {
			if err := c.replLinkUp(t, s); err != nil {
				return err
			}
			perMaster[v.self.master]++
		}
	}
	if ref == nil {
		return errors.New("no live node")
	}
	if replicas >= 0 {
		for _, r := range ref.owners {
			if n := perMaster[r.id]; n != replicas {
				return fmt.Errorf("master %s has %d replicas in sync, want %d", c.byID[r.id].Addr(), n, replicas)
			}
		}
	}
	return nil
}

// stateOK checks CLUSTER INFO on s: cluster_state:ok and every node known.
func (c *Cluster) stateOK(t testing.TB, s *Server) error {
	info, err := s.Do(t, "CLUSTER", "INFO").ToString()
	if err != nil {
		return fmt.Errorf("%s: CLUSTER INFO: %w", s.Addr(), err)
	}
	if st := infoField(info, "cluster_state"); st != "ok" {
		return fmt.Errorf("%s: cluster_state:%s", s.Addr(), st)
	}
	if k := infoField(info, "cluster_known_nodes"); k != strconv.Itoa(len(c.nodes)) {
		return fmt.Errorf("%s: cluster_known_nodes:%s, want %d", s.Addr(), k, len(c.nodes))
	}
	return nil
}

// replLinkUp checks that replica s has finished its sync with its master.
func (c *Cluster) replLinkUp(t testing.TB, s *Server) error {
	info, err := s.Do(t, "INFO", "replication").ToString()
	if err != nil {
		return fmt.Errorf("%s: INFO replication: %w", s.Addr(), err)
	}
	if st := infoField(info, "master_link_status"); st != "up" {
		return fmt.Errorf("%s: role:%s master_link_status:%s", s.Addr(), infoField(info, "role"), st)
	}
	return nil
}

// servedBy reports whether every live node sees node serve every slot of
// ranges and node itself says it is a master.
func (c *Cluster) servedBy(t testing.TB, ranges []slotRange, node *Server) error {
	id := c.ids[node]
	for _, s := range c.nodes {
		if !s.live() {
			continue
		}
		v, err := c.view(t, s)
		if err != nil {
			return err
		}
		if s == node && v.self.replica() {
			return fmt.Errorf("%s still a replica", node.Addr())
		}
		for _, r := range ranges {
			for slot := r.start; slot <= r.end; slot++ {
				if got := v.ownerOf(slot); got != id {
					return fmt.Errorf("%s: slot %d served by %s, want %s (%s)", s.Addr(), slot, c.addrOf(got), node.Addr(), id)
				}
			}
		}
	}
	return nil
}

func (c *Cluster) addrOf(id string) string {
	if n := c.byID[id]; n != nil {
		return n.Addr()
	}
	return fmt.Sprintf("%q", id)
}

// waitFor polls check every clusterPoll until it returns nil, and fails the
// test with its last error after bound.
func (c *Cluster) waitFor(t testing.TB, what string, bound time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: waiting for %s: still not done after %v: %v", what, bound, err)
		}
		time.Sleep(clusterPoll)
	}
}

// clusterView is one node's CLUSTER NODES.
type clusterView struct {
	self   nodeLine
	nodes  map[string]nodeLine // by id
	owners []slotRange         // sorted by start
}

// agrees reports why v's line for node differs from node's own line (role,
// master, failure flags), or nil.
func (v *clusterView) agrees(node *clusterView) error {
	n, ok := v.nodes[node.self.id]
	switch {
	case !ok:
		return fmt.Errorf("does not know %s", node.self.id)
	case n.hasFlag("fail") || n.hasFlag("fail?"):
		return fmt.Errorf("flags %s as %s", node.self.id, n.flags)
	case n.replica() != node.self.replica() || n.master != node.self.master:
		return fmt.Errorf("sees %s as %s of %s, it says %s of %s", node.self.id, n.flags, n.master, node.self.flags, node.self.master)
	}
	return nil
}

func (v *clusterView) ownerOf(slot int) string {
	i, _ := slices.BinarySearchFunc(v.owners, slot, func(r slotRange, slot int) int {
		switch {
		case r.end < slot:
			return -1
		case r.start > slot:
			return 1
		}
		return 0
	})
	if i < len(v.owners) && v.owners[i].start <= slot && slot <= v.owners[i].end {
		return v.owners[i].id
	}
	return ""
}

func (v *clusterView) rangesOf(id string) []slotRange {
	var rs []slotRange
	for _, r := range v.owners {
		if r.id == id {
			rs = append(rs, r)
		}
	}
	return rs
}

func (c *Cluster) view(t testing.TB, s *Server) (*clusterView, error) {
	text, err := s.Do(t, "CLUSTER", "NODES").ToString()
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER NODES: %w", s.Addr(), err)
	}
	v := &clusterView{nodes: map[string]nodeLine{}}
	for _, n := range parseNodes(text) {
		v.nodes[n.id] = n
		if n.myself() {
			v.self = n
		}
		v.owners = append(v.owners, n.slots...)
	}
	if v.self.id == "" {
		return nil, fmt.Errorf("%s: no myself line in CLUSTER NODES", s.Addr())
	}
	slices.SortFunc(v.owners, func(a, b slotRange) int { return a.start - b.start })
	return v, nil
}

// slotRange is slots start..end (inclusive) served by master id.
type slotRange struct {
	start, end int
	id         string
}

// nodeLine is one line of CLUSTER NODES or nodes.conf:
// <id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slot>...
type nodeLine struct {
	id, flags, master string
	slots             []slotRange
}

func (n nodeLine) hasFlag(f string) bool { return slices.Contains(strings.Split(n.flags, ","), f) }
func (n nodeLine) myself() bool          { return n.hasFlag("myself") }
func (n nodeLine) replica() bool         { return n.hasFlag("slave") }

func parseNodes(text string) []nodeLine {
	var nodes []nodeLine
	for line := range strings.Lines(strings.TrimPrefix(text, "txt:")) {
		f := strings.Fields(line)
		if len(f) < 8 || f[0] == "vars" {
			continue
		}
		n := nodeLine{id: f[0], flags: f[2], master: f[3]}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") { // [slot->-id] / [slot-<-id]: migrating/importing
				continue
			}
			lo, hi, ok := strings.Cut(s, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil {
				n.slots = append(n.slots, slotRange{a, b, n.id})
			}
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// infoField returns the value of "name:value" in INFO-style text.
func infoField(info, name string) string {
	for line := range strings.Lines(strings.TrimPrefix(info, "txt:")) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

func nodesConf(port int) string { return fmt.Sprintf("nodes-%d.conf", port) }

// freeClusterPort returns a port p such that p and p+10000 (the cluster bus)
// are both free. It draws p below the kernel's ephemeral range when there is
// room, so that no outgoing connection takes a killed node's port before its
// Restart.
func freeClusterPort() (int, error) {
	lo, hi := 10000, 32767-busPortOffset // Linux default ephemeral range starts at 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if e, err := strconv.Atoi(f[0]); err == nil {
				hi = e - 1 - busPortOffset
			}
		}
	}
	for range 100 {
		p := 0
		if hi-lo >= 1000 {
			p = lo + rand.IntN(hi-lo+1)
		} else if q, err := FreePort(); err == nil && q+busPortOffset < 65536 {
			p = q
		} else {
			continue
		}
		if free(p) && free(p+busPortOffset) {
			return p, nil
		}
	}
	return 0, errors.New("no port p with p and p+10000 free")
}

func free(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
