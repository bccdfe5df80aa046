package main

// ---- Redis Cluster: one namespace versus the peers on 3 masters (issue 30) ----
//
// The bench starts a cluster of clusterMasters redis-server processes, no
// replicas, on free loopback ports (each port p with p+10000, its cluster
// bus, free too), creates it with redis-cli --cluster create and waits until
// every node says cluster_state:ok. Each contender then runs clusterWorkers
// goroutines over clusterClients clients, every goroutine a lock+release of
// a fresh name per iteration, for ClusterDuration. A leasehold namespace is
// one hash slot, so today one namespace loads one master: the scenario
// measures that baseline, and will judge session.Options.Shards once it
// exists (a contender "leasehold, one sharded namespace" belongs here then).

import (
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
)

const (
	clusterMasters = 3
	clusterClients = 8
	clusterWorkers = 64
	busPortOffset  = 10000 // cluster bus port = port + 10000
	clusterBound   = 30 * time.Second
	// saturated: a master at this share of one core is the bottleneck.
	saturatedPct = 90
)

// The cluster contenders' names; the targets look them up.
const (
	clusterOne    = "leasehold, one namespace"
	clusterSpread = "leasehold, 3 namespaces (one per master)"
	clusterRL     = "rueidislock KeyMajority 1"
)

func clusterContenders() []contender {
	return []contender{
		{name: clusterOne, group: "leasehold", open: openLeasehold("mutex"),
			note: "mutex; one session per client, all in one namespace: one hash slot, so one master"},
		{name: clusterSpread, group: "leasehold", open: openLeaseholdSpread,
			note: "mutex; 3 sessions per client, one per namespace, each namespace's slot on another master; a name goes to the namespace its FNV hash picks"},
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
	ErrorSamples []string `json:",omitempty"`
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
	return roundRobin(h, "cluster", contenderNames(cs), func(i, _ int) (clusterRun, error) { return h.clusterOnce(ctx, cl, cs[i]) })
}

// clusterMedian is medianOf, with the masters' CPU taken rank by rank.
func clusterMedian(rounds []clusterRun) clusterRun {
	m := medianOf(rounds)
	for k := range clusterMasters {
		var xs []float64
		for _, r := range rounds {
			if k < len(r.MasterCPUPct) {
				xs = append(xs, r.MasterCPUPct[k])
			}
		}
		if len(xs) > 0 {
			m.MasterCPUPct = append(m.MasterCPUPct, median(xs))
		}
	}
	return m
}

// clusterOnce runs contender c on the cluster for one window.
func (h *harness) clusterOnce(ctx context.Context, cl *cluster, c contender) (clusterRun, error) {
	if err := cl.flush(ctx); err != nil {
		return clusterRun{}, err
	}
	ns := h.ns()
	spread, err := cl.perMaster(ctx, ns)
	if err != nil {
		return clusterRun{}, err
	}
	ps, err := h.openProcs(ctx, c, clusterClients, procOpts{addr: cl.nodes[0].addr(), ns: ns, cluster: cl.addrs(), spread: spread})
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
	a, b, err := h.clusterWindow(ctx, cl, ws)
	ws.stop.Store(true)
	cancel()
	if !waitTimeout(&ws.wg, 30*time.Second) {
		h.harnessErr("cluster %s: workers did not end within 30s", c.name)
		return clusterRun{}, errors.New("workers did not end")
	}
	if err != nil {
		return clusterRun{}, err
	}
	return ws.result(a, b)
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
	nodes []float64 // seconds
}

func (cl *cluster) snap(ctx context.Context) (clusterSnap, error) {
	s := clusterSnap{t: time.Now(), cpu: procCPU()}
	for i, a := range cl.adms {
		st, err := a.stats(ctx)
		if err != nil {
			return s, fmt.Errorf("%s: %w", cl.nodes[i].addr(), err)
		}
		s.nodes = append(s.nodes, st.cpu)
	}
	return s, nil
}

// clusterWindow warms up, then counts the workers for ClusterDuration
// between snapshots a and b.
func (h *harness) clusterWindow(ctx context.Context, cl *cluster, ws *clusterLoad) (a, b clusterSnap, err error) {
	if err = sleepCtx(ctx, h.cfg.Warmup); err != nil {
		return a, b, err
	}
	if a, err = cl.snap(ctx); err != nil {
		return a, b, err
	}
	ws.on.Store(true)
	err = sleepCtx(ctx, h.cfg.ClusterDuration)
	ws.on.Store(false)
	if err != nil {
		return a, b, err
	}
	b, err = cl.snap(ctx)
	return a, b, err
}

func (ws *clusterLoad) result(a, b clusterSnap) (clusterRun, error) {
	o := float64(ws.ops.Load())
	if o == 0 {
		return clusterRun{}, fmt.Errorf("no lock+release completed (%d errors: %v)", ws.errs.Load(), ws.samples.list())
	}
	el := b.t.Sub(a.t).Seconds()
	r := clusterRun{OpsPerSec: o / el, Ops: o, Errors: float64(ws.errs.Load()), ErrorSamples: ws.samples.list(),
		ClientCPUus: float64((b.cpu - a.cpu).Microseconds()) / o, ClientCPUPct: 100 * (b.cpu - a.cpu).Seconds() / el}
	ds := ws.lat.take()
	r.P50us, r.P99us = us(pct(ds, 50)), us(pct(ds, 99))
	for i := range b.nodes {
		pctCore := 100 * (b.nodes[i] - a.nodes[i]) / el
		r.MasterCPUPct = append(r.MasterCPUPct, pctCore)
		r.RedisCPUPct += pctCore
	}
	slices.Sort(r.MasterCPUPct)
	slices.Reverse(r.MasterCPUPct) // busiest first
	if len(r.MasterCPUPct) > 0 {
		r.BusiestPct = r.MasterCPUPct[0]
	}
	if r.RedisCPUPct > 0 {
		r.BusiestSharePct = 100 * r.BusiestPct / r.RedisCPUPct
	}
	return r, nil
}
