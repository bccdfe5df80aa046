package chaos

// The Redis Cluster tier: the Clustered backend's setup, its nemeses and the
// mutex hand-off gap every scenario reports (and cluster scenarios check).

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
)

// startClustered starts a Redis Cluster (3 masters + 3 replicas, node timeout
// 2 s) for env, sets env.Cluster and env.Addrs (every node: the holders'
// clients detect cluster mode from several seeds) and returns a namespace
// whose slot the master of slot 16383 serves (rueidis sends keyless commands
// to another node first, so bugs that depend on reaching the namespace's
// master show there), with its epoch marker set.
func startClustered(t *testing.T, env *Env) string {
	t.Helper()
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	env.Cluster = rc
	env.Addrs = rc.Seeds()
	last := rc.MasterOf(t, redistest.NumSlots-1)
	base := redistest.Namespace(t)
	ns := ""
	for i := range 1000 {
		cand := base + "-" + strconv.Itoa(i)
		if rc.MasterOf(t, redistest.Slot("{"+cand+"}")) == last {
			ns = cand
			break
		}
	}
	if ns == "" {
		t.Fatalf("chaos: no namespace found on the master of slot %d (%s)", redistest.NumSlots-1, last.Addr())
	}
	c := rc.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Do(ctx, c.B().Set().Key("{"+ns+"}:epoch").Value("0").Nx().Build()).Error(); err != nil && !rueidis.IsRedisNil(err) {
		t.Fatalf("chaos: init epoch on the cluster: %v", err)
	}
	t.Logf("cluster %v; namespace %s in slot %d on %s", rc.Seeds(), ns, redistest.Slot("{"+ns+"}"), last.Addr())
	return ns
}

// nsSlot returns the hash slot of the scenario's namespace on a cluster.
func (e *Env) nsSlot() int { return redistest.Slot("{" + e.Namespace + "}") }

// nsMaster returns the node that serves the namespace's slot now.
func (e *Env) nsMaster() *redistest.Server { return e.Cluster.MasterOf(e.T, e.nsSlot()) }

// Cluster nemeses share one schedule: a fault-free baseline that lasts
// until gapMinSamples mutex hand-offs were seen since the warm-up (the gap
// before the first fault), then at least one fault, more with a quiet period
// in between while the run goes on, then a fault-free tail that lasts until
// gapMinSamples hand-offs were seen after the last heal (the gap after the
// faults; see gapWindows). Long holds (up to 2.5 TTL) make hand-offs bursty,
// so the windows are counted in samples, not seconds; each ends after
// gapWindowCap at the latest, and the check then says it has too few.
type clusterSchedule struct {
	Quiet0, Quiet1 time.Duration // between faults
	MinFaults      int           // faults injected even when the run is over; default 1
}

const (
	gapWindowMin = 3 * time.Second  // a window lasts at least this long (hand-offs come in bursts)
	gapWindowCap = 30 * time.Second // and at most this long after the nemesis starts waiting
)

func (cs clusterSchedule) run(e *Env, fault func(e *Env)) {
	e.awaitHandoffs("before the first fault")
	for n := 1; ; n++ {
		fault(e)
		quiet := e.Between(cs.Quiet0, cs.Quiet1)
		if n < cs.MinFaults {
			time.Sleep(quiet) // a full quiet period, also when the run is over
			continue
		}
		if !e.Sleep(quiet) {
			break
		}
	}
	e.awaitHandoffs("after the last heal")
}

// awaitHandoffs waits until the current gap window (see gapWindows) holds
// gapMinSamples hand-offs and has lasted gapWindowMin, or gapWindowCap has
// passed.
func (e *Env) awaitHandoffs(what string) {
	t0 := time.Now()
	n := 0
	for time.Since(t0) < gapWindowCap {
		evs := e.Hist.Events()
		w := gapWindows(evs, e.Scenario.grace())
		from := w.after
		if w.firstFault == 0 {
			from = w.warm
		}
		now := Mono()
		if n = len(handoffGaps(evs, from, now)); n >= gapMinSamples && now-from >= int64(gapWindowMin) {
			break
		}
		time.Sleep(50 * time.Millisecond) // poll: hand-offs come from the holder processes' event pipes
	}
	e.T.Logf("%s %d mutex hand-offs %s, after %v", e.since(), n, what, time.Since(t0).Round(time.Millisecond))
}

// ClusterKillMaster kills the namespace's master with SIGKILL, waits until
// its replica has taken over the slot, restarts the old master (it rejoins,
// empty, as a replica of the new one) and waits until the cluster is healthy.
func ClusterKillMaster(cs clusterSchedule) func(*Env) {
	return func(e *Env) {
		cs.run(e, func(e *Env) {
			m := e.nsMaster()
			e.Fault("kill-master", "SIGKILL of %s, master of slot %d", m.Addr(), e.nsSlot())
			to := e.Cluster.KillMaster(e.T, m)
			e.T.Logf("%s fault kill-master: %s serves slot %d; restarting %s", e.since(), to.Addr(), e.nsSlot(), m.Addr())
			m.Restart()
			e.Cluster.WaitHealthy(e.T)
			e.Heal("%s took over; %s rejoined as its replica; cluster healthy", to.Addr(), m.Addr())
		})
	}
}

// ClusterStopMaster stops the namespace's master with SIGSTOP for longer
// than the cluster node timeout: its replica is promoted (WaitFailover),
// and [extra0, extra1) later the old master is continued with SIGCONT, with
// whatever its clients sent meanwhile still unread in its sockets. It
// learns from the cluster bus that it lost its slots and rejoins as a
// replica of the new master (a full resync drops its data); the fault heals
// once the cluster is healthy.
func ClusterStopMaster(extra0, extra1 time.Duration, cs clusterSchedule) func(*Env) {
	return func(e *Env) {
		cs.run(e, func(e *Env) {
			m := e.nsMaster()
			e.Fault("stop-master", "SIGSTOP of %s, master of slot %d, past the node timeout", m.Addr(), e.nsSlot())
			t0 := time.Now()
			m.Stop()
			to := e.Cluster.WaitFailover(e.T, m)
			e.T.Logf("%s fault stop-master: %s serves slot %d after %v", e.since(), to.Addr(), e.nsSlot(), time.Since(t0).Round(time.Millisecond))
			time.Sleep(e.Between(extra0, extra1))
			m.Cont()
			e.T.Logf("%s fault stop-master: %s continued after %v", e.since(), m.Addr(), time.Since(t0).Round(time.Millisecond))
			e.Cluster.WaitHealthy(e.T)
			e.Heal("%s took over; %s, continued, rejoined as its replica; cluster healthy", to.Addr(), m.Addr())
		})
	}
}

// ClusterRestartEmpty kills the namespace's master and restarts it at once:
// back inside the node timeout, it keeps its slots, without data (and
// answers CLUSTERDOWN for its first ~2 s). Recorded as "restart-empty", so
// the checker expects holders inside their deadline to reclaim.
func ClusterRestartEmpty(cs clusterSchedule) func(*Env) {
	return func(e *Env) {
		cs.run(e, func(e *Env) {
			m := e.nsMaster()
			e.Fault(FaultRestartEmpty, "SIGKILL of %s, master of slot %d, restarted at once (empty, no failover)", m.Addr(), e.nsSlot())
			e.Cluster.RestartEmpty(e.T, m)
			e.Heal("%s back with its slots; cluster healthy", m.Addr())
		})
	}
}

// ClusterFailover runs a manual CLUSTER FAILOVER on the replica of the
// namespace's master and waits until the cluster is healthy (the old master
// replicating the new one). Keep more than 4 s between faults: a replica
// starts a new election only 4x the node timeout (8 s) after its last one,
// and a manual failover asked for sooner keeps the master's clients paused
// until then (Redis logs "Failover attempt expired"), a 2-4 s stall of the
// whole namespace rather than the ~0.1 s switch under test.
func ClusterFailover(cs clusterSchedule) func(*Env) {
	return func(e *Env) {
		cs.run(e, func(e *Env) {
			m := e.nsMaster()
			r := e.Cluster.ReplicaOf(e.T, m)
			e.Fault("failover", "CLUSTER FAILOVER on %s, replica of %s", r.Addr(), m.Addr())
			e.Cluster.Failover(e.T, r)
			e.Cluster.WaitHealthy(e.T)
			e.Heal("%s serves slot %d, %s replicates it; cluster healthy", r.Addr(), e.nsSlot(), m.Addr())
		})
	}
}

// ClusterMigrate moves the namespace's slot to another master and back, key
// by key. A positive spread is how long each move should take: the pause
// after each key is spread divided by the keys in the slot when the move
// starts (0: as fast as MIGRATE goes).
func ClusterMigrate(spread time.Duration, cs clusterSchedule) func(*Env) {
	return func(e *Env) {
		cs.run(e, func(e *Env) {
			slot := e.nsSlot()
			home := e.nsMaster()
			var to *redistest.Server
			ms := e.Cluster.Masters(e.T)
			for _, i := range e.Rand.Perm(len(ms)) {
				if ms[i] != home {
					to = ms[i]
					break
				}
			}
			move := func(dst *redistest.Server) {
				src := e.nsMaster()
				keys, err := src.Do(e.T, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot)).AsInt64()
				if err != nil {
					e.T.Fatalf("chaos: CLUSTER COUNTKEYSINSLOT %d on %s: %v", slot, src.Addr(), err)
				}
				pause := spread / time.Duration(max(keys, 1))
				e.Fault("migrate", "slot %d: %s -> %s, %d keys, %v pause per key", slot, src.Addr(), dst.Addr(), keys, pause.Round(time.Millisecond))
				t0 := time.Now()
				e.Cluster.MigrateSlot(e.T, slot, dst, pause)
				e.Cluster.WaitHealthy(e.T)
				e.Heal("slot %d moved to %s in %v; cluster healthy", slot, dst.Addr(), time.Since(t0).Round(time.Millisecond))
			}
			move(to)
			time.Sleep(e.Between(cs.Quiet0, cs.Quiet1) / 2) // the slot stays away a while
			move(home)
		})
	}
}

// ClusterScriptFlush runs SCRIPT FLUSH on every node.
func ClusterScriptFlush(cs clusterSchedule) func(*Env) {
	return func(e *Env) {
		cs.run(e, func(e *Env) {
			e.Fault("script-flush", "SCRIPT FLUSH on every node")
			e.Cluster.ScriptFlushAll(e.T)
			e.Heal("scripts flushed")
		})
		e.Cluster.WaitHealthy(e.T)
	}
}

// Hand-off gap: the time from a mutex release (the releasing worker's end
// event, just before its Release call) to the grant of that mutex to a
// worker whose Lock call began before the release (a waiter), when that
// grant is the mutex's next one. Its median is measured in a fault-free
// window before the first fault and in one after the last heal: a slower
// hand-off after the faults means waiters lost their notifications and fell
// back to their re-check (e.g. a shard channel subscription not renewed after
// the slot moved).
const (
	gapMinSamples = 10                   // per window, to compare medians
	gapFloor      = 2 * time.Millisecond // an "after" median below this never fails
	gapFactor     = 2                    // fail when after > gapFactor * before
	gapGraceSlack = 2 * time.Second      // the restart grace ends up to ~2 s after restart + grace (CLUSTERDOWN, uptime in whole seconds)
)

// handoffGaps returns the hand-off gaps (ns) of the releases in [from, to)
// whose grant came before to.
func handoffGaps(evs []Event, from, to int64) []int64 {
	released := map[string]int64{} // mutex -> time of its pending release
	var gaps []int64
	for _, e := range evs {
		if e.Kind != Mutex {
			continue
		}
		switch {
		case e.Type == EvEnd && e.How == "release":
			released[e.Res] = e.T
		case e.Type == EvEnd:
			delete(released, e.Res)
		case e.Type == EvGrant:
			r, ok := released[e.Res]
			delete(released, e.Res)
			if ok && e.Call < r && r >= from && r < to && e.T < to {
				gaps = append(gaps, e.T-r)
			}
		}
	}
	return gaps
}

func median(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return ms(s[(len(s)-1)/2])
}

// gapWin are the bounds of the hand-off gap windows of a history: before =
// [warm, firstFault), after = [after, end of the run). after is the last
// heal or, when the last fault lost the data (a restart of an empty master,
// a flush), the end of its restart grace, during which no grant happens by
// design. firstFault is 0 while there is none.
type gapWin struct{ warm, firstFault, after int64 }

func gapWindows(evs []Event, grace time.Duration) gapWin {
	var w gapWin
	var lastFault int64
	lastKind := ""
	for _, e := range evs {
		switch {
		case e.Type == EvNote && e.Proc == -1 && e.Detail == "warm":
			w.warm = e.T
		case e.Type == EvFault:
			if w.firstFault == 0 {
				w.firstFault = e.T
			}
			lastFault, lastKind = e.T, e.Kind
		case e.Type == EvHeal:
			w.after = e.T
		}
	}
	if dataLoss(lastKind) {
		w.after = max(w.after, lastFault+int64(grace+gapGraceSlack))
	}
	return w
}

// handoff fills in the hand-off gap medians of s (gapWindows; end is the
// end of the run). On a cluster it records a violation (an anomaly when
// unprotected) when the median after is above gapFactor times the one
// before and above gapFloor, and says so when a window has too few samples
// to compare.
func handoff(t testing.TB, sc *Scenario, evs []Event, end int64, s *Summary) {
	w := gapWindows(evs, sc.grace())
	if w.firstFault == 0 {
		w.firstFault, w.after = end, end
	}
	before := handoffGaps(evs, w.warm, w.firstFault)
	post := handoffGaps(evs, w.after, end)
	s.GapBeforeN, s.GapAfterN = len(before), len(post)
	s.GapBeforeMs, s.GapAfterMs = median(before), median(post)
	t.Logf("mutex hand-off gap p50: %.2fms before the first fault (%d samples in %.1fs), %.2fms after the last heal (%d samples in %.1fs)",
		s.GapBeforeMs, len(before), float64(w.firstFault-w.warm)/1e9, s.GapAfterMs, len(post), float64(end-w.after)/1e9)
	if sc.Backend != Clustered {
		return
	}
	if len(before) < gapMinSamples || len(post) < gapMinSamples {
		s.GapFew = true
		t.Logf("hand-off gap NOT COMPARED: too few samples (%d before, %d after; %d needed in each window)", len(before), len(post), gapMinSamples)
		return
	}
	if s.GapAfterMs > gapFactor*s.GapBeforeMs && s.GapAfterMs > ms(int64(gapFloor)) {
		v := Violation{What: "handoff-gap", T: end, Detail: fmt.Sprintf("mutex hand-off gap p50 %.2fms after the last heal (%d samples) is above %dx %.2fms before the first fault (%d samples)",
			s.GapAfterMs, len(post), gapFactor, s.GapBeforeMs, len(before))}
		if sc.Unprotected {
			s.Anomalies = append(s.Anomalies, v)
		} else {
			s.Violations = append(s.Violations, v)
		}
	}
}

// gapColumn formats the hand-off gap medians for the results table.
func gapColumn(s *Summary) string {
	f := func(v float64, n int) string {
		if n < gapMinSamples {
			return fmt.Sprintf("n=%d", n)
		}
		return fmt.Sprintf("%.1f", v)
	}
	return f(s.GapBeforeMs, s.GapBeforeN) + "/" + f(s.GapAfterMs, s.GapAfterN)
}
