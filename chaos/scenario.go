package chaos

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/session"
)

// Backend is the Redis a scenario runs against.
type Backend int

const (
	Plain      Backend = iota // redis-server without persistence
	AOF                       // appendonly yes, appendfsync always
	Sentineled                // master + replica + 3 Sentinels, clients through Sentinel
	External                  // Scenario.Setup provides it (chaos/docker)
	Clustered                 // Redis Cluster, 3 masters + 3 replicas (cluster.go)
)

func (b Backend) String() string {
	return [...]string{"plain", "aof", "sentinel", "external", "cluster"}[b]
}

// Scenario is one workload run under one nemesis.
type Scenario struct {
	Name  string
	About string // what it shows, one line

	Backend    Backend
	Procs      int           // holder processes, one session each; default 8
	Kinds      []string      // primitives; default AllKinds (one worker per kind and process)
	Mutexes    []string      // the mutexes' names; default m0, m1
	TTL        time.Duration // default 1s; with TTLs, the longest of them
	LockDelay  time.Duration
	ReplicaAck int
	Proxies    bool          // put a fault proxy between every holder process and Redis
	RedisArgs  []string      // extra redis-server arguments (Plain, AOF)
	Duration   time.Duration // how long the nemesis runs; default 20s
	Liveness   time.Duration // heal -> grant of every kind; default 2*TTL + 3s

	// TTLs, when set, gives the holder processes different TTLs: process i
	// gets TTLs[i % len(TTLs)].
	TTLs []time.Duration
	// RestartGrace is every session's Options.RestartGrace; 0 leaves the
	// library's default, max(longest TTL, session.DefaultRestartGrace),
	// which the checker then takes.
	RestartGrace time.Duration
	// Shards is every session's Options.Shards (0: unsharded). On a
	// cluster, the nemeses then aim at one shard: see Env.nsSlot.
	Shards int
	// Unprotected marks a measurement of a configuration leasehold does not
	// make guarantees for (failover without ReplicaAck): broken properties
	// are reported as anomalies and do not fail the test.
	Unprotected bool

	// Setup provides an External backend: it sets Env.Addrs (and may keep
	// handles in Env.Data for the nemesis).
	Setup func(e *Env) `json:"-"`
	// Nemesis injects faults until e.Running() is false, and heals them all
	// (e.Heal) before it returns.
	Nemesis func(e *Env) `json:"-"`

	// Known, when set, describes a library bug this scenario exposes: the
	// scenario is skipped with "KNOWN VIOLATION: <Known>" unless
	// LEASEHOLD_CHAOS_KNOWN=1, so that the rest of the suite stays green
	// while the failing scenario is kept as it is.
	Known string
}

// grace is the restart grace the scenario's sessions use: RestartGrace,
// or the library's default when it is 0.
func (sc *Scenario) grace() time.Duration {
	if sc.RestartGrace > 0 {
		return sc.RestartGrace
	}
	g := max(sc.TTL, session.DefaultRestartGrace)
	for _, t := range sc.TTLs {
		g = max(g, t)
	}
	return g
}

// Env is what a nemesis works with.
type Env struct {
	T        testing.TB
	Rand     *rand.Rand
	Hist     *History
	Scenario *Scenario
	Redis    *redistest.Server // Plain and AOF
	Sentinel *Sentinel         // Sentinel
	Addrs    []string          // what holders dial (before proxies)
	Procs    []*Proc
	Data     any // External setups' handles

	Cluster   *redistest.Cluster // Clustered (cluster.go)
	Namespace string             // the scenario's namespace

	ctx context.Context

	mu    sync.Mutex
	found []Violation // what the nemesis itself saw broken (Violate)
}

// Violate records a broken property that the nemesis itself observed
// (such as a session it expected to be refused opening), which the
// scenario then reports with the checker's.
func (e *Env) Violate(what, format string, args ...any) {
	v := Violation{What: what, T: Mono(), Detail: fmt.Sprintf(format, args...)}
	e.mu.Lock()
	e.found = append(e.found, v)
	e.mu.Unlock()
	e.T.Logf("%s %s: %s", e.since(), what, v.Detail)
}

func (e *Env) violations() []Violation {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.found)
}

// Running reports whether the nemesis should go on.
func (e *Env) Running() bool { return e.ctx.Err() == nil }

// Sleep waits d, or less if the run ends first; it reports Running().
func (e *Env) Sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.ctx.Done():
	}
	return e.Running()
}

// Between returns a random duration in [a, b).
func (e *Env) Between(a, b time.Duration) time.Duration {
	if b <= a {
		return a
	}
	return a + time.Duration(e.Rand.Int64N(int64(b-a)))
}

// Pick returns k distinct random holder processes.
func (e *Env) Pick(k int) []*Proc {
	idx := e.Rand.Perm(len(e.Procs))
	var out []*Proc
	for _, i := range idx[:min(k, len(idx))] {
		out = append(out, e.Procs[i])
	}
	return out
}

// Fault records that a fault was injected; kind classifies it for the
// checker ("restart-empty" triggers the reclaim check).
func (e *Env) Fault(kind, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	e.Hist.Add(Event{Type: EvFault, T: Mono(), Proc: -1, Kind: kind, Detail: detail})
	e.T.Logf("%s fault %s: %s", e.since(), kind, detail)
}

// Heal records that every fault injected so far is healed.
func (e *Env) Heal(format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	e.Hist.Add(Event{Type: EvHeal, T: Mono(), Proc: -1, Detail: detail})
	e.T.Logf("%s heal: %s", e.since(), detail)
}

func (e *Env) since() string {
	evs := e.Hist.Events()
	if len(evs) == 0 {
		return ""
	}
	return fmt.Sprintf("%6.2fs", float64(Mono()-evs[0].T)/1e9)
}

// Seed is the master seed of this run: LEASEHOLD_CHAOS_SEED, or a fresh one.
var Seed = func() int64 {
	if v := os.Getenv("LEASEHOLD_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			return n
		}
	}
	return time.Now().UnixNano() % 1_000_000_000
}()

func scenarioSeed(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return Seed ^ int64(h.Sum64()&0x7fffffff)
}

// Results collects the summaries of a test run for the final table.
type Results struct {
	mu  sync.Mutex
	all []*Summary
}

// Add records s.
func (r *Results) Add(s *Summary) {
	r.mu.Lock()
	r.all = append(r.all, s)
	r.mu.Unlock()
}

// Table formats the summaries.
func (r *Results) Table() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%-36s %5s %6s %7s %6s %6s %5s %7s %5s %5s %4s %9s %6s %8s %11s %8s %4s %4s\n",
		"scenario", "secs", "grants", "storeop", "faults", "losses", "lease", "reclaim", "stale", "pause", "late",
		"cancel", "stall", "recovery", "gap b/a ms", "overlap", "viol", "anom")
	for _, s := range r.all {
		cancel := "-"
		if s.CancelSeen {
			cancel = fmt.Sprintf("%+.1fms", s.MaxCancelMs)
		}
		recovery := fmt.Sprintf("%.0fms", s.RecoveryMs)
		if s.Stuck {
			recovery = "stuck"
		}
		overlap := "-"
		if s.Overlaps > 0 {
			overlap = fmt.Sprintf("%.0fms", s.MaxOverlapMs)
		}
		fmt.Fprintf(&b, "%-36s %5.1f %6d %7d %6d %6d %5d %7s %5d %5d %4d %9s %4.0fms %8s %11s %8s %4d %4d\n",
			s.Scenario, s.Seconds, s.Grants, s.StoreOps, s.Faults, s.Losses, s.SessionsLost,
			fmt.Sprintf("%d/%d", s.Reclaimed, s.ReclaimLost), s.StaleRejected, s.PauseOverlaps, s.LateAccepted,
			cancel, s.MaxStallMs, recovery, gapColumn(s), overlap, len(s.Violations), len(s.Anomalies))
	}
	b.WriteString("columns: losses = holds lost; lease = sessions (sharded: lease copies) lost; reclaim = holds reclaimed/not reclaimed after Redis lost its data;\n" +
		"stale = store ops refused for a stale token; pause = overlaps with a SIGSTOPped holder (fencing covers them);\n" +
		"late = store ops accepted after a newer grant; cancel = latest observed hold cancel relative to sendTime(last beat)+TTL\n" +
		"(negative: before; \"-\": no hold lost outside a process pause; lateness a scheduling stall explains is excused); stall = longest scheduling stall of a holder process;\n" +
		"recovery = longest heal -> grant of every primitive; gap b/a = mutex hand-off gap p50 before the first fault / after the last heal\n" +
		"(n=<samples> when too few to compare; checked on a cluster); overlap = longest overlap or permit excess (grant observed to\n" +
		"the first end observed), \"-\" when none; anom = broken properties in unprotected (measured) scenarios\n")
	return b.String()
}

// Run runs sc and returns its summary. It fails t on any violation (not on
// anomalies of Unprotected scenarios), writing the history as JSON.
func Run(t *testing.T, sc Scenario) *Summary {
	t.Helper()
	sc.setDefaults()
	if sc.Known != "" && os.Getenv("LEASEHOLD_CHAOS_KNOWN") != "1" {
		t.Skip("KNOWN VIOLATION: " + sc.Known + " (LEASEHOLD_CHAOS_KNOWN=1 runs it)")
	}
	seed := scenarioSeed(sc.Name)
	t.Logf("scenario %s (%s): seed %d; replay with LEASEHOLD_CHAOS_SEED=%d and -run '%s'", sc.Name, sc.About, seed, Seed, t.Name())
	start := time.Now()
	hist := &History{}
	origin := hist.Note(EvNote, "start "+sc.Name).T
	env := &Env{T: t, Rand: rand.New(rand.NewPCG(uint64(seed), 1)), Hist: hist, Scenario: &sc}

	storeSrv := redistest.Start(t, redistest.Options{})
	env.Namespace = startBackend(t, env, &sc)
	dir := t.TempDir()
	procTTL := startProcs(t, env, seed, storeSrv.Addr(), dir)
	awaitWarm(t, hist, sc.Kinds, dir)

	ctx, cancel := context.WithTimeout(context.Background(), sc.Duration)
	env.ctx = ctx
	if sc.Nemesis != nil {
		sc.Nemesis(env)
	}
	cancel()
	awaitRecovery(hist, &sc)
	end := hist.Note(EvNote, "stop").T
	// Two snapshots a TTL apart, the holders still running, find leaked
	// holds: recorded as holders in both, of a live session, granted to no
	// worker (a background withdrawal would have removed them within one
	// heartbeat interval).
	spaces := env.keySpaces()
	st1, st2, stable := masterSnapshots(spaces, sc.TTL)
	if !stable {
		t.Logf("phantom check skipped: the master changed during each of 3 attempts at two snapshots %v apart", sc.TTL)
	}
	stopProcs(env.Procs, 3*sc.TTL+5*time.Second)

	s := &Summary{Scenario: sc.Name, Seed: seed, Procs: sc.Procs, Unprotected: sc.Unprotected}
	evs := hist.Events()
	ops := opsOf(evs)
	Check(CheckParams{
		TTL: sc.TTL, ProcTTL: procTTL, Grace: sc.grace(), LockDelay: sc.LockDelay,
		SemLimit: 3, Kinds: sc.Kinds, Liveness: sc.Liveness, End: end,
		StoreFinal: readFinal(t, storeSrv.Addr(), ops),
		ObsSlack:   10 * time.Millisecond, ResumeSlack: 250 * time.Millisecond,
	}, origin, evs, ops, s)
	handoff(t, &sc, evs, end, s)
	s.Seconds = time.Since(start).Seconds()
	notePhantoms(s, phantomsIn(spaces, st1, st2, grantedHolds(evs)), end) // none without stable snapshots
	noteViolations(s, env.violations())
	logSummary(t, s)
	keepHistory(t, Dump{Scenario: sc.Name, Seed: seed, Origin: origin, Params: sc, Summary: s, Events: evs, Store: ops, State: stateOf(spaces, st2)}, dir)
	return s
}

// setDefaults fills in what sc leaves unset: 8 processes, every kind, two
// mutexes, a TTL of 1s (or the longest of TTLs), 20s of faults, and a
// liveness bound of 2 TTLs + 3s.
func (sc *Scenario) setDefaults() {
	if sc.Procs == 0 {
		sc.Procs = 8
	}
	if len(sc.Kinds) == 0 {
		sc.Kinds = AllKinds
	}
	if len(sc.Mutexes) == 0 {
		sc.Mutexes = []string{"m0", "m1"}
	}
	for _, d := range sc.TTLs {
		sc.TTL = max(sc.TTL, d)
	}
	if sc.TTL == 0 {
		sc.TTL = time.Second
	}
	if sc.Duration == 0 {
		sc.Duration = 20 * time.Second
	}
	if sc.Liveness == 0 {
		sc.Liveness = 2*sc.TTL + 3*time.Second
	}
}

// startBackend starts the Redis deployment of sc.Backend, records its
// addresses in env and returns the namespace, its epoch marker set.
func startBackend(t *testing.T, env *Env, sc *Scenario) string {
	ns := redistest.Namespace(t)
	switch sc.Backend {
	case Plain, AOF:
		env.Redis = redistest.Start(t, redistest.Options{AOF: sc.Backend == AOF, Args: sc.RedisArgs})
		env.Addrs = []string{env.Redis.Addr()}
		testutil.InitShards(t, env.Redis.Addr(), ns, sc.Shards)
	case Sentineled:
		env.Sentinel = StartSentinel(t)
		env.Addrs = env.Sentinel.Addrs()
		testutil.InitShards(t, env.Sentinel.MasterAddr(), ns, sc.Shards)
	case External:
		sc.Setup(env)
		testutil.InitShards(t, env.Addrs[0], ns, sc.Shards)
	case Clustered:
		ns = startClustered(t, env)
	}
	return ns
}

// startProcs starts the scenario's holder processes into env.Procs, their
// logs in dir, and returns each one's session TTL.
func startProcs(t *testing.T, env *Env, seed int64, store, dir string) []time.Duration {
	sc := env.Scenario
	var procTTL []time.Duration
	for i := range sc.Procs {
		ttl := sc.TTL
		if len(sc.TTLs) > 0 {
			ttl = sc.TTLs[i%len(sc.TTLs)]
		}
		procTTL = append(procTTL, ttl)
		cfg := WorkerConfig{
			Proc: i, Seed: uint64(seed) + uint64(i)*7919, Addrs: env.Addrs, Namespace: env.Namespace,
			TTL: ttl, LockDelay: sc.LockDelay, RestartGrace: sc.RestartGrace, ReplicaAck: sc.ReplicaAck, Shards: sc.Shards, Store: store,
			Kinds: sc.Kinds, Mutexes: sc.Mutexes, SemLimit: 3, SemMaxN: 2,
			PoolKeys: []string{"k0", "k1", "k2", "k3"},
			HoldMin:  30 * time.Millisecond, HoldMax: 250 * time.Millisecond,
			LongP: 0.15, LongMin: ttl, LongMax: 5 * ttl / 2,
			WaitMin: time.Second, WaitMax: 3 * time.Second, OpEvery: 25 * time.Millisecond,
		}
		if sc.Backend == Sentineled {
			cfg.MasterSet = MasterSet
		}
		var px *redistest.Proxy
		if sc.Proxies {
			px = redistest.StartProxy(t, env.Addrs[0])
			cfg.Addrs = []string{px.Addr()}
		}
		env.Procs = append(env.Procs, startProc(t, env.Hist, cfg, dir, px))
	}
	return procTTL
}

// awaitWarm waits until every primitive was granted, before the first
// fault; it fails t after 30s.
func awaitWarm(t *testing.T, hist *History, kinds []string, dir string) {
	warm := time.Now().Add(30 * time.Second)
	for !grantedAll(hist, kinds, 0) {
		if time.Now().After(warm) {
			t.Fatalf("chaos: not every primitive was granted within 30s of the start; holder logs in %s", dir)
		}
		time.Sleep(20 * time.Millisecond)
	}
	hist.Note(EvNote, "warm")
}

// awaitRecovery is the liveness wait: for a grant of every kind after the
// last heal (sc.Liveness at most), then a few more grants.
func awaitRecovery(hist *History, sc *Scenario) {
	var lastHeal int64
	for _, e := range hist.Events() {
		if e.Type == EvHeal {
			lastHeal = e.T
		}
	}
	until := time.Now().Add(sc.Liveness + 500*time.Millisecond)
	for !grantedAll(hist, sc.Kinds, lastHeal) && time.Now().Before(until) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a few more grants after recovery
}

// stateAddr returns the address of the Redis that holds the namespace's
// state now: its cluster master, the sentinels' master, the plain server,
// or the first external address.
func (env *Env) stateAddr() string {
	switch {
	case env.Cluster != nil: // the namespace's master now
		return env.nsMaster().Addr()
	case env.Sentinel != nil:
		return env.Sentinel.MasterAddr()
	case env.Redis != nil:
		return env.Redis.Addr()
	}
	return env.Addrs[0]
}

// stopProcs stops the holder processes together, each within wait.
func stopProcs(procs []*Proc, wait time.Duration) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.stop(wait) })
	}
	wg.Wait()
}

// grantedHolds returns the hold ids that evs grant.
func grantedHolds(evs []Event) map[string]bool {
	granted := map[string]bool{}
	for _, e := range evs {
		if e.Type == EvGrant {
			granted[e.Hold] = true
		}
	}
	return granted
}

// notePhantoms records each leaked hold of phs as a violation of s, or as
// an anomaly when its scenario is unprotected.
func notePhantoms(s *Summary, phs []string, end int64) {
	for _, ph := range phs {
		v := Violation{What: "phantom", T: end, Detail: "leaked to a live session that was never told: " + ph}
		if s.Unprotected {
			s.Anomalies = append(s.Anomalies, v)
		} else {
			s.Violations = append(s.Violations, v)
		}
	}
}

// noteViolations records vs, which the nemesis observed, as violations of
// s, or as anomalies when its scenario is unprotected.
func noteViolations(s *Summary, vs []Violation) {
	if s.Unprotected {
		s.Anomalies = append(s.Anomalies, vs...)
	} else {
		s.Violations = append(s.Violations, vs...)
	}
}

// logSummary logs s and its first 20 violations or anomalies.
func logSummary(t *testing.T, s *Summary) {
	t.Logf("summary %s: %d grants, %d store ops, %d faults, %d holds lost, %d sessions lost, reclaimed %d (not %d; metrics %.0f/%.0f), "+
		"held/kept/lost across restarts %d/%d/%d, %d stale ops refused, %d pause overlaps, %d read overlaps, %d late ops accepted, "+
		"latest cancel %+.1fms vs sendTime+TTL (%d late cancels excused by stalls, longest stall %.0fms), recovery %.0fms, "+
		"%d overlaps (longest %.1fms), job slots run/duplicated/missed %d/%d/%d, %d violations, %d anomalies",
		s.Scenario, s.Grants, s.StoreOps, s.Faults, s.Losses, s.SessionsLost, s.Reclaimed, s.ReclaimLost,
		s.MetReclaimed, s.MetReclaimLst, s.HeldAcross, s.KeptAcross, s.LostAcross, s.StaleRejected, s.PauseOverlaps,
		s.ReadOverlaps, s.LateAccepted, s.MaxCancelMs, s.StallExcused, s.MaxStallMs, s.RecoveryMs,
		s.Overlaps, s.MaxOverlapMs, s.JobRuns, s.JobDuplicates, s.JobMissed, len(s.Violations), len(s.Anomalies))
	for i, v := range append(s.Violations, s.Anomalies...) {
		if i == 20 {
			t.Logf("... %d more", len(s.Violations)+len(s.Anomalies)-20)
			break
		}
		kind := "VIOLATION"
		if s.Unprotected {
			kind = "anomaly"
		}
		t.Logf("%s %s: %s", kind, v.What, v.Detail)
	}
}

// keepHistory writes the history dump: always when LEASEHOLD_CHAOS_HISTORY
// names a directory, and on failure (in a fresh directory under $TMPDIR,
// which outlives the test) with the holder logs of dir. It fails t when
// the summary has violations.
func keepHistory(t *testing.T, dump Dump, dir string) {
	s := dump.Summary
	dumpDir := os.Getenv("LEASEHOLD_CHAOS_HISTORY")
	if len(s.Violations) > 0 && dumpDir == "" {
		d, err := os.MkdirTemp("", "leasehold-chaos-")
		if err != nil {
			t.Errorf("chaos: %v", err)
		}
		dumpDir = d
	}
	if dumpDir != "" {
		path, err := writeDump(dumpDir, dump)
		if err != nil {
			t.Errorf("chaos: write history: %v", err)
		} else {
			t.Logf("history: %s", path)
		}
		if len(s.Violations) > 0 {
			keepLogs(t, dir, filepath.Join(dumpDir, fmt.Sprintf("%s-%d-logs", dump.Scenario, dump.Seed)))
		}
	}
	if len(s.Violations) > 0 {
		t.Errorf("%s: %d violations (seed %d); history and holder logs in %s", s.Scenario, len(s.Violations), dump.Seed, dumpDir)
	}
}

// keepLogs copies the holder processes' logs out of the test's temporary
// directory.
func keepLogs(t testing.TB, from, to string) {
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Logf("chaos: keep holder logs: %v", err)
	}
}

// grantedAll reports whether every kind was granted after Mono time since.
func grantedAll(h *History, kinds []string, since int64) bool {
	seen := map[string]bool{}
	h.mu.Lock()
	for _, e := range h.events {
		if e.Type == EvGrant && e.T > since {
			seen[e.Kind] = true
		}
	}
	h.mu.Unlock()
	for _, k := range kinds {
		if !seen[k] {
			return false
		}
	}
	return true
}
