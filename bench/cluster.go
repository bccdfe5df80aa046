package main

// ---- Redis Cluster: one namespace versus the peers on 3 masters (issue 30) ----
//
// The bench starts a cluster of clusterMasters redis-server processes, no
// replicas, on free loopback ports (each port p with p+10000, its cluster
// bus, free too), creates it with redis-cli --cluster create and waits until
// every node says cluster_state:ok. Each contender then runs clusterWorkers
// goroutines over clusterClients clients, every goroutine a lock+release of
// a fresh name per iteration, for ClusterDuration. An unsharded leasehold
// namespace is one hash slot, so it loads one master: "leasehold, one
// namespace" measures that baseline, and "leasehold, 3 namespaces (one per
// master)" what an application gets by splitting its names by hand. The
// issue's targets judge "leasehold, one sharded namespace":
// session.Options.Shards = clusterShards spreads one namespace over that
// many hash slots ({ns#k.x}: prefixes, k = FNV-1a(name) mod
// clusterShards), so that it uses every master. Shard k's slot is placed
// near the k-th point of a bit-reversal sequence (scripts.ShardTag), so on
// the bench's evenly split cluster 16 shards land 6 / 5 / 5 on the masters;
// each run records it (ShardsPerMaster), since it bounds the busiest
// master's share from below whatever the library does. The sharded floor
// (floorProc with the same shards) is never judged: it is what issue 28's
// decisions cost Redis on this path before any of leasehold's own work, so
// that a run shows how much of the gap to rueidislock those decisions
// leave (clusterRedisRatios).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/scripts"
)

const (
	clusterMasters = 3
	clusterClients = 8
	clusterWorkers = 64
	busPortOffset  = 10000 // cluster bus port = port + 10000
	clusterBound   = 30 * time.Second
	// saturated: a master at this share of one core is the bottleneck.
	saturatedPct = 90
	// clusterShards: session.Options.Shards of the sharded contender.
	clusterShards = 16
)

// The cluster contenders' names; the targets look them up.
const (
	clusterOne     = "leasehold, one namespace"
	clusterSpread  = "leasehold, 3 namespaces (one per master)"
	clusterRL      = "rueidislock KeyMajority 1"
	clusterSharded = "leasehold, one sharded namespace"
	clusterFloor   = "floor: lease check + clock token, sharded"
)

func clusterContenders() []contender {
	return []contender{
		{name: clusterOne, group: "leasehold", open: openLeasehold("mutex"),
			note: "mutex; one session per client, all in one namespace: one hash slot, so one master"},
		{name: clusterSharded, group: "leasehold", open: openLeasehold("mutex"), shards: clusterShards,
			note: fmt.Sprintf("mutex; one session per client, all in one namespace of Shards %d: a name's shard is FNV-1a(name) mod %d, each shard a hash slot of its own ({ns#k.x}:), so the namespace uses every master", clusterShards, clusterShards)},
		{name: clusterSpread, group: "leasehold", open: openLeaseholdSpread,
			note: "mutex; 3 sessions per client, one per namespace, each namespace's slot on another master; a name goes to the namespace its FNV hash picks"},
		{name: clusterFloor, group: "floor", open: openFloor, shards: clusterShards,
			note: fmt.Sprintf("not a lock library, never judged: the uncontended scenario's floor (a grant script of HMGET of the caller's lease, GET, TIME, SET PX; a release script of GET and DEL), sharded as the sharded namespace is (%d shards, each a hash slot in the same window as the namespace's shard, so on the same master; a lease hash per shard; the migration probe declared as leasehold's scripts declare it), one call per lock and per release: what issue 28's decisions cost Redis here before any of leasehold's work or batching", clusterShards)},
		{name: clusterRL, group: "peer", open: openRueidislock(1),
			note: "1 key per lock, no hash tag: keys spread over every slot; client-side caching on (its default)"},
		{name: raw, group: "raw", open: openRaw,
			note: "SET NX PX + compare-and-delete script, keys spread over every slot"},
	}
}

// cluster is a Redis Cluster the bench started: masters only.
type cluster struct {
	nodes []*server
	adms  []*admin // one standalone client per node, in node order
}

// startCluster starts and creates the cluster; on error, every node it
// started is stopped again.
func startCluster(ctx context.Context) (*cluster, error) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return nil, fmt.Errorf("redis-cli not found on PATH: %w (it comes with redis-server)", err)
	}
	cl := &cluster{}
	fail := func(err error) (*cluster, error) {
		cl.stop()
		return nil, err
	}
	for range clusterMasters {
		s, err := startNode(freeClusterPort, []string{"--cluster-enabled", "yes", "--cluster-node-timeout", "5000"})
		if err != nil {
			return fail(err)
		}
		cl.nodes = append(cl.nodes, s)
		a, err := newAdmin(s.addr())
		if err != nil {
			return fail(err)
		}
		cl.adms = append(cl.adms, a)
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	args := append(append([]string{"--cluster", "create"}, cl.addrs()...), "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.CommandContext(cctx, "redis-cli", args...)
	cmd.SysProcAttr = sysProcAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("redis-cli %s: %w\n%s", strings.Join(args, " "), err, tailLines(string(out), 5)))
	}
	if err := cl.waitOK(ctx); err != nil {
		return fail(err)
	}
	return cl, nil
}

func (cl *cluster) addrs() []string {
	out := make([]string, len(cl.nodes))
	for i, s := range cl.nodes {
		out[i] = s.addr()
	}
	return out
}

// stop closes the admin clients and kills every node (by its pid).
func (cl *cluster) stop() {
	for _, a := range cl.adms {
		a.close()
	}
	for _, s := range cl.nodes {
		s.kill()
	}
}

// waitOK waits until CLUSTER INFO says cluster_state:ok on every node and
// every node knows all the others.
func (cl *cluster) waitOK(ctx context.Context) error {
	deadline := time.Now().Add(clusterBound)
	for {
		err := cl.stateOK(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not ok after %v: %w", clusterBound, err)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

func (cl *cluster) stateOK(ctx context.Context) error {
	for i, a := range cl.adms {
		info, err := a.do(ctx, "CLUSTER", "INFO").ToString()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", cl.nodes[i].addr(), err)
		}
		st, known := infoField(info, "cluster_state"), infoField(info, "cluster_known_nodes")
		if st != "ok" || known != strconv.Itoa(len(cl.nodes)) {
			return fmt.Errorf("%s: cluster_state:%s cluster_known_nodes:%s", cl.nodes[i].addr(), st, known)
		}
	}
	return nil
}

// infoField returns the value of "name:value" in INFO-style text (RESP3
// gives CLUSTER INFO as a verbatim string: "txt:" first).
func infoField(info, name string) string {
	for line := range strings.Lines(strings.TrimPrefix(info, "txt:")) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

func (cl *cluster) flush(ctx context.Context) error {
	for _, a := range cl.adms {
		if err := a.flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// owners returns, for each slot, the index of the node that serves it.
func (cl *cluster) owners(ctx context.Context) ([]int, error) {
	ranges, err := cl.adms[0].do(ctx, "CLUSTER", "SLOTS").ToArray()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	out := make([]int, 16384)
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: entry %v", r)
		}
		lo, _ := f[0].AsInt64()
		hi, _ := f[1].AsInt64()
		node, err := f[2].ToArray()
		if err != nil || len(node) < 2 {
			return nil, fmt.Errorf("CLUSTER SLOTS: node %v", f[2])
		}
		port, _ := node[1].AsInt64()
		i := slices.IndexFunc(cl.nodes, func(s *server) bool { return s.port == int(port) })
		for slot := lo; slot <= hi && slot < int64(len(out)); slot++ {
			out[slot] = i
		}
	}
	return out, nil
}

// perMaster returns one namespace per node, named base-<k>, whose hash slot
// (that of "{ns}") that node serves, in node order.
func (cl *cluster) perMaster(ctx context.Context, base string) ([]string, error) {
	own, err := cl.owners(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(cl.nodes))
	found := 0
	for k := 0; k < 1000 && found < len(out); k++ {
		ns := base + "-" + strconv.Itoa(k)
		slot, err := cl.adms[0].do(ctx, "CLUSTER", "KEYSLOT", "{"+ns+"}").AsInt64()
		if err != nil {
			return nil, fmt.Errorf("CLUSTER KEYSLOT: %w", err)
		}
		if i := own[slot]; i >= 0 && out[i] == "" {
			out[i] = ns
			found++
		}
	}
	if found < len(out) {
		return nil, fmt.Errorf("no namespace for every master: %v", out)
	}
	return out, nil
}

// shardLayout returns how many of the n shards of namespace ns each node
// serves, in node order: shard k is the hash slot of its keys (scripts.ShardKeys).
func (cl *cluster) shardLayout(ctx context.Context, ns string, n int) ([]int, error) {
	own, err := cl.owners(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(cl.nodes))
	for k := range n {
		slot, err := cl.adms[0].do(ctx, "CLUSTER", "KEYSLOT", scripts.ShardKeys(ns, k).Epoch()).AsInt64()
		if err != nil {
			return nil, fmt.Errorf("CLUSTER KEYSLOT: %w", err)
		}
		if i := own[slot]; i >= 0 && i < len(out) {
			out[i]++
		}
	}
	return out, nil
}

// freeClusterPort returns a port p such that p and p+10000 (the cluster
// bus) are both free, below the kernel's ephemeral range where there is
// room.
func freeClusterPort() (int, error) {
	lo, hi := 10000, 32767-busPortOffset
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if e, err := strconv.Atoi(f[0]); err == nil {
				hi = e - 1 - busPortOffset
			}
		}
	}
	for range 100 {
		p, err := freePort()
		if hi-lo >= 1000 {
			p, err = lo+rand.IntN(hi-lo+1), nil
		}
		if err == nil && p+busPortOffset < 65536 && portFree(p) && portFree(p+busPortOffset) {
			return p, nil
		}
	}
	return 0, errors.New("no port p with p and p+10000 free")
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// ---- the leasehold contender with one namespace per master ----

// lhSpread is one client with a session per namespace; a name goes to the
// session its hash picks.
type lhSpread struct {
	c    rueidis.Client
	cnt  *counter
	subs []*lhProc
}

func openLeaseholdSpread(ctx context.Context, addr string, o procOpts) (proc, error) {
	c, err := rueidis.NewClient(rueidisOpt(addr, o))
	if err != nil {
		return nil, err
	}
	cnt := &counter{}
	p := &lhSpread{c: wrap(c, cnt), cnt: cnt}
	for _, ns := range o.spread {
		s, err := openSession(ctx, p.c, cnt, addr, o, ns)
		if err != nil {
			_ = p.Close()
			return nil, err
		}
		p.subs = append(p.subs, &lhProc{kind: "mutex", c: p.c, cnt: cnt, s: s, pools: map[string]bool{}})
	}
	if len(p.subs) == 0 {
		_ = p.Close()
		return nil, errors.New("no namespace to spread over")
	}
	return p, nil
}

func (p *lhSpread) pick(key string) *lhProc {
	h := fnv.New32a()
	h.Write([]byte(key))
	return p.subs[h.Sum32()%uint32(len(p.subs))]
}

func (p *lhSpread) counter() *counter { return p.cnt }

func (p *lhSpread) Lock(ctx context.Context, key string) (unlocker, error) {
	return p.pick(key).Lock(ctx, key)
}

func (p *lhSpread) TryLock(ctx context.Context, key string) (unlocker, error) {
	return p.pick(key).TryLock(ctx, key)
}

// Close closes the sessions, then the client they share.
func (p *lhSpread) Close() error {
	var errs []error
	for _, s := range p.subs {
		errs = append(errs, s.s.Close())
	}
	p.c.Close()
	return errors.Join(errs...)
}

// ---- the runs ----

type clusterRun struct {
	OpsPerSec       float64 // lock+release pairs per second, all workers
	P50us           float64
	P99us           float64
	ClientCPUus     float64 // bench process CPU per lock+release
	RedisCPUus      float64 // all masters' CPU per lock+release
	SrvCmdPerOp     float64 // commands the masters ran (in scripts too) per lock+release
	SrvReadsPerOp   float64 // the masters' socket reads per lock+release: 1/x is the requests a read brings
	Conns           float64 // client connections to the masters at the window's end (the admin's left out)
	ClientCPUPct    float64 // bench process CPU, % of one core
	RedisCPUPct     float64 // all masters together, % of one core
	BusiestPct      float64 // the busiest master, % of one core
	BusiestSharePct float64 // the busiest master's share of the masters' CPU
	Errors          float64
	Ops             float64
	// Each master's CPU, % of one core, busiest first (which master is
	// busiest changes with the namespace a run draws); the row's median is
	// taken rank by rank.
	MasterCPUPct []float64
	// A sharded namespace's shards on each master, in MasterCPUPct's
	// order (so busiest master first); the row's median is taken rank by
	// rank as well. Empty for the other contenders.
	ShardsPerMaster []float64 `json:",omitempty"`
	ErrorSamples    []string  `json:",omitempty"`
}

type clusterRow struct {
	Contender string
	Group     string
	Note      string
	Rounds    []clusterRun
	Med       clusterRun
	Err       string `json:",omitempty"`
}

func (h *harness) runCluster(ctx context.Context) {
	cs := clusterContenders()
	runs, errs := h.clusterRounds(ctx, cs)
	for i, c := range cs {
		h.res.Cluster = append(h.res.Cluster, clusterRow{Contender: c.name, Group: c.group, Note: c.note,
			Rounds: runs[i], Med: clusterMedian(runs[i]), Err: errs[i]})
	}
}

// clusterRounds starts the cluster, runs the contenders on it round-robin
// and stops it.
func (h *harness) clusterRounds(ctx context.Context, cs []contender) ([][]clusterRun, []string) {
	t := time.Now()
	cl, err := startCluster(ctx)
	if err != nil {
		h.harnessErr("cluster: %v", err)
		errs := make([]string, len(cs))
		for i := range errs {
			errs[i] = err.Error()
		}
		return make([][]clusterRun, len(cs)), errs
	}
	defer cl.stop()
	h.logf("cluster: %d masters on %s ok in %v", len(cl.nodes), strings.Join(cl.addrs(), ", "), time.Since(t).Round(time.Millisecond))
	return roundRobin(h, "cluster", contenderNames(cs), func(i, round int) (clusterRun, error) {
		return h.clusterOnce(ctx, cl, cs[i], h.profPath("cluster", cs[i], round))
	})
}

// clusterMedian is medianOf, with the masters' CPU and shards taken rank
// by rank.
func clusterMedian(rounds []clusterRun) clusterRun {
	m := medianOf(rounds)
	m.MasterCPUPct = rankMedian(rounds, func(r clusterRun) []float64 { return r.MasterCPUPct })
	m.ShardsPerMaster = rankMedian(rounds, func(r clusterRun) []float64 { return r.ShardsPerMaster })
	return m
}

// rankMedian is the median over rounds of the k-th element of f(round),
// for each k < clusterMasters that some round has.
func rankMedian(rounds []clusterRun, f func(clusterRun) []float64) []float64 {
	var out []float64
	for k := range clusterMasters {
		var xs []float64
		for _, r := range rounds {
			if v := f(r); k < len(v) {
				xs = append(xs, v[k])
			}
		}
		if len(xs) > 0 {
			out = append(out, median(xs))
		}
	}
	return out
}

// clusterOnce runs contender c on the cluster for one window; prof, when
// set, is the CPU profile file for the window.
func (h *harness) clusterOnce(ctx context.Context, cl *cluster, c contender, prof string) (clusterRun, error) {
	if err := cl.flush(ctx); err != nil {
		return clusterRun{}, err
	}
	ns := h.ns()
	spread, err := cl.perMaster(ctx, ns)
	if err != nil {
		return clusterRun{}, err
	}
	var layout []int
	if c.shards > 1 {
		if layout, err = cl.shardLayout(ctx, ns, c.shards); err != nil {
			return clusterRun{}, err
		}
	}
	ps, err := h.openProcs(ctx, c, clusterClients, procOpts{addr: cl.nodes[0].addr(), ns: ns, cluster: cl.addrs(), spread: spread, shards: c.shards})
	if err != nil {
		return clusterRun{}, err
	}
	defer h.closeProcs(c, ps)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws := &clusterLoad{}
	for g := range clusterWorkers {
		p := ps[g%len(ps)]
		ws.wg.Go(func() { ws.work(wctx, p, g) })
	}
	a, b, err := h.clusterWindow(ctx, cl, ws, prof)
	ws.stop.Store(true)
	cancel()
	if !waitTimeout(&ws.wg, 30*time.Second) {
		h.harnessErr("cluster %s: workers did not end within 30s", c.name)
		return clusterRun{}, errors.New("workers did not end")
	}
	if err != nil {
		return clusterRun{}, err
	}
	return ws.result(a, b, layout)
}

// clusterLoad is the workers of one run.
type clusterLoad struct {
	on, stop  atomic.Bool
	ops, errs atomic.Int64
	samples   errSamples
	lat       latencies
	wg        sync.WaitGroup
}

// work is worker g: lock+release of a fresh name per iteration until stop,
// counted while on.
func (ws *clusterLoad) work(ctx context.Context, p proc, g int) {
	prefix := "g" + strconv.Itoa(g) + "-"
	var mine []time.Duration
	for i := 0; !ws.stop.Load() && ctx.Err() == nil; i++ {
		t := time.Now()
		err := lockRelease(ctx, p, prefix+strconv.Itoa(i))
		d := time.Since(t)
		switch {
		case err != nil && ctx.Err() == nil:
			if ws.on.Load() {
				ws.errs.Add(1)
				ws.samples.add(err)
			}
			_ = sleepCtx(ctx, time.Millisecond)
		case err == nil && ws.on.Load():
			mine = append(mine, d)
			ws.ops.Add(1)
		}
	}
	ws.lat.mu.Lock()
	ws.lat.d = append(ws.lat.d, mine...)
	ws.lat.mu.Unlock()
}

// clusterSnap is the bench process's CPU and each node's, at one instant.
type clusterSnap struct {
	t     time.Time
	cpu   time.Duration
	nodes []float64  // seconds
	stats []srvStats // each node's, in node order
}

func (cl *cluster) snap(ctx context.Context) (clusterSnap, error) {
	s := clusterSnap{t: time.Now(), cpu: procCPU()}
	for i, a := range cl.adms {
		st, err := a.stats(ctx)
		if err != nil {
			return s, fmt.Errorf("%s: %w", cl.nodes[i].addr(), err)
		}
		s.nodes = append(s.nodes, st.cpu)
		s.stats = append(s.stats, st)
	}
	return s, nil
}

// clusterWindow warms up, then counts the workers for ClusterDuration
// between snapshots a and b, profiling the bench into prof ("" for none).
func (h *harness) clusterWindow(ctx context.Context, cl *cluster, ws *clusterLoad, prof string) (a, b clusterSnap, err error) {
	if err = sleepCtx(ctx, h.cfg.Warmup); err != nil {
		return a, b, err
	}
	if a, err = cl.snap(ctx); err != nil {
		return a, b, err
	}
	stopProf := startProfile(prof)
	ws.on.Store(true)
	err = sleepCtx(ctx, h.cfg.ClusterDuration)
	ws.on.Store(false)
	stopProf()
	if err != nil {
		return a, b, err
	}
	b, err = cl.snap(ctx)
	return a, b, err
}

// result is the run's figures between snapshots a and b; layout is a
// sharded namespace's shards per node, in node order (nil for none).
func (ws *clusterLoad) result(a, b clusterSnap, layout []int) (clusterRun, error) {
	o := float64(ws.ops.Load())
	if o == 0 {
		return clusterRun{}, fmt.Errorf("no lock+release completed (%d errors: %v)", ws.errs.Load(), ws.samples.list())
	}
	el := b.t.Sub(a.t).Seconds()
	r := clusterRun{OpsPerSec: o / el, Ops: o, Errors: float64(ws.errs.Load()), ErrorSamples: ws.samples.list(),
		ClientCPUus: float64((b.cpu - a.cpu).Microseconds()) / o, ClientCPUPct: 100 * (b.cpu - a.cpu).Seconds() / el}
	ds := ws.lat.take()
	r.P50us, r.P99us = us(pct(ds, 50)), us(pct(ds, 99))
	var redis float64 // seconds, all masters
	for i := range b.nodes {
		redis += b.nodes[i] - a.nodes[i]
	}
	r.RedisCPUus = 1e6 * redis / o
	for i := range b.stats {
		d := b.stats[i].sub(a.stats[i])
		r.SrvCmdPerOp += float64(d.commands) / o
		r.SrvReadsPerOp += float64(d.reads) / o
		r.Conns += float64(b.stats[i].clients - 1)
	}
	// Busiest master first: the nodes by CPU, each node's shards with it.
	byCPU := indexes(len(b.nodes))
	slices.SortStableFunc(byCPU, func(i, j int) int { return cmp.Compare(b.nodes[j]-a.nodes[j], b.nodes[i]-a.nodes[i]) })
	for _, i := range byCPU {
		pctCore := 100 * (b.nodes[i] - a.nodes[i]) / el
		r.MasterCPUPct = append(r.MasterCPUPct, pctCore)
		r.RedisCPUPct += pctCore
		if i < len(layout) {
			r.ShardsPerMaster = append(r.ShardsPerMaster, float64(layout[i]))
		}
	}
	if len(r.MasterCPUPct) > 0 {
		r.BusiestPct = r.MasterCPUPct[0]
	}
	if r.RedisCPUPct > 0 {
		r.BusiestSharePct = 100 * r.BusiestPct / r.RedisCPUPct
	}
	return r, nil
}
