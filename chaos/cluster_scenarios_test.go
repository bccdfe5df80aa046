package chaos

import (
	"slices"
	"testing"
	"time"
)

// clusterScenarios is the Redis Cluster tier of the gated suite: 3 masters +
// 3 replicas (node timeout 2 s), the holders in cluster mode, the namespace
// on the master of slot 16383, the same workload and checks as the other
// tiers, plus the mutex hand-off gap (its median before the first fault vs
// after the last heal; see handoff). Every nemesis leaves the cluster
// healthy; before its first fault and after its last heal, it waits for
// enough hand-offs to measure the gap (clusterSchedule). Duration counts
// from the end of the warm-up: the baseline (~3-10 s) and the faults.
//
// TTLs: 5 s where the namespace's master is killed or stopped (a master
// restarted empty answers CLUSTERDOWN for ~2 s, a failover takes the 2 s
// node timeout + ~2 s: the sessions must be able to outlast that); 2-3 s
// elsewhere.
var clusterScenarios = []Scenario{
	{
		Name: "cluster-kill-ack", About: "kill -9 the namespace's master; its replica takes over, it rejoins as replica; ReplicaAck 1",
		Backend: Clustered, TTL: 5 * time.Second, ReplicaAck: 1, Duration: 22 * time.Second,
		Nemesis: ClusterKillMaster(clusterSchedule{Quiet0: 1500 * time.Millisecond, Quiet1: 2500 * time.Millisecond, MinFaults: 2}),
	},
	{
		Name: "cluster-kill-noack", About: "kill -9 the namespace's master without ReplicaAck (measured)",
		Backend: Clustered, TTL: 5 * time.Second, Duration: 22 * time.Second, Unprotected: true,
		Nemesis: ClusterKillMaster(clusterSchedule{Quiet0: 1500 * time.Millisecond, Quiet1: 2500 * time.Millisecond, MinFaults: 2}),
	},
	// SIGSTOP, unlike a kill, leaves the old master's clients' requests in
	// its sockets: continued after its replica was promoted, it may still
	// answer some of them as a master before the cluster bus demotes it.
	{
		Name: "cluster-stop-past-node-timeout-ack", About: "SIGSTOP the namespace's master past the node timeout; its replica takes over, SIGCONT: it rejoins as replica; ReplicaAck 1",
		Backend: Clustered, TTL: 5 * time.Second, ReplicaAck: 1, Duration: 14 * time.Second,
		Nemesis: ClusterStopMaster(0, time.Second, clusterSchedule{Quiet0: 1500 * time.Millisecond, Quiet1: 2500 * time.Millisecond, MinFaults: 2}),
	},
	{
		Name: "cluster-stop-past-node-timeout-noack", About: "SIGSTOP the namespace's master past the node timeout without ReplicaAck (measured)",
		Backend: Clustered, TTL: 5 * time.Second, Duration: 14 * time.Second, Unprotected: true,
		Nemesis: ClusterStopMaster(0, time.Second, clusterSchedule{Quiet0: 1500 * time.Millisecond, Quiet1: 2500 * time.Millisecond, MinFaults: 2}),
	},
	{
		Name: "cluster-restart-empty", About: "kill -9 the namespace's master and restart it at once, empty, inside the node timeout",
		Backend: Clustered, TTL: 5 * time.Second, RestartGrace: 5 * time.Second, Duration: 20 * time.Second,
		Nemesis: ClusterRestartEmpty(clusterSchedule{Quiet0: 4 * time.Second, Quiet1: 5 * time.Second, MinFaults: 2}),
	},
	{
		Name: "cluster-failover-ack", About: "manual CLUSTER FAILOVER of the namespace's master under load, every 5-6s; ReplicaAck 1",
		Backend: Clustered, TTL: 2 * time.Second, ReplicaAck: 1, Duration: 20 * time.Second,
		Nemesis: ClusterFailover(clusterSchedule{Quiet0: 4 * time.Second, Quiet1: 5 * time.Second, MinFaults: 3}),
	},
	{
		Name: "cluster-failover-noack", About: "manual CLUSTER FAILOVER of the namespace's master under load, every 5-6s",
		Backend: Clustered, TTL: 2 * time.Second, Duration: 20 * time.Second,
		Nemesis: ClusterFailover(clusterSchedule{Quiet0: 4 * time.Second, Quiet1: 5 * time.Second, MinFaults: 3}),
	},
	{
		Name: "cluster-migrate-fast", About: "move the namespace's slot to another master and back, MIGRATE without pauses",
		Backend: Clustered, TTL: 2 * time.Second, Duration: 16 * time.Second,
		Nemesis: ClusterMigrate(0, clusterSchedule{Quiet0: time.Second, Quiet1: 2 * time.Second, MinFaults: 2}),
	},
	{
		Name: "cluster-migrate-slow", About: "move the namespace's slot to another master and back, a pause per key: each move ~1.5s of the 3s TTL",
		Backend: Clustered, TTL: 3 * time.Second, Duration: 18 * time.Second,
		Nemesis: ClusterMigrate(1200*time.Millisecond, clusterSchedule{Quiet0: time.Second, Quiet1: 2 * time.Second, MinFaults: 2}),
	},
	{
		Name: "cluster-script-flush", About: "SCRIPT FLUSH on every node every 0.2-1s",
		Backend: Clustered, TTL: 2 * time.Second, Duration: 14 * time.Second,
		Nemesis: ClusterScriptFlush(clusterSchedule{Quiet0: 200 * time.Millisecond, Quiet1: time.Second, MinFaults: 5}),
	},
}

// shardedClusterScenarios run the cluster tier's nemeses on a namespace of
// 16 shards (Scenario.Shards), shorter: the shards spread the workload's
// names over the three masters, the nemeses aim at the master (or, for a
// migration, the slot) of the first mutex's shard, whose master also
// serves the namespace's guard (shardedFits), so each fault hits some of
// the workload's shards and spares others. A lost shard ends only its own
// holds. cluster-shards-change restarts that master empty (losing the
// guard with its shards) while sessions of 8 and 32 shards, and unsharded
// ones, try to open: every one must be refused. TTLs as in clusterScenarios.
var shardedClusterScenarios = []Scenario{
	{
		Name: "cluster-shards-kill-ack", About: "16 shards: kill -9 the target shard's master; its replica takes over, it rejoins as replica; ReplicaAck 1",
		Backend: Clustered, Shards: 16, TTL: 5 * time.Second, ReplicaAck: 1, Duration: 12 * time.Second,
		Nemesis: ClusterKillMaster(clusterSchedule{Quiet0: 1500 * time.Millisecond, Quiet1: 2500 * time.Millisecond, MinFaults: 2}),
	},
	{
		Name: "cluster-shards-change", About: "16 shards: kill -9 the master of the target shard and the guard, restart it at once, empty; sessions of 8 and 32 shards, and unsharded ones, must be refused",
		Backend: Clustered, Shards: 16, TTL: 5 * time.Second, RestartGrace: 5 * time.Second, Duration: 10 * time.Second,
		Nemesis: ClusterShardsChange([]int{shardsProbe, 32, 1}, time.Second, clusterSchedule{Quiet0: 4 * time.Second, Quiet1: 5 * time.Second, MinFaults: 1}),
	},
	{
		Name: "cluster-shards-failover-ack", About: "16 shards: manual CLUSTER FAILOVER of the target shard's master under load, every 5-6s; ReplicaAck 1",
		Backend: Clustered, Shards: 16, TTL: 2 * time.Second, ReplicaAck: 1, Duration: 12 * time.Second,
		Nemesis: ClusterFailover(clusterSchedule{Quiet0: 4 * time.Second, Quiet1: 5 * time.Second, MinFaults: 2}),
	},
	{
		Name: "cluster-shards-migrate", About: "16 shards: move the target shard's slot to another master and back, a pause per key: each move ~1s of the 3s TTL",
		Backend: Clustered, Shards: 16, TTL: 3 * time.Second, Duration: 12 * time.Second,
		Nemesis: ClusterMigrate(time.Second, clusterSchedule{Quiet0: time.Second, Quiet1: 2 * time.Second, MinFaults: 2}),
	},
	{
		Name: "cluster-shards-script-flush", About: "16 shards: SCRIPT FLUSH on every node every 0.2-1s",
		Backend: Clustered, Shards: 16, TTL: 2 * time.Second, Duration: 8 * time.Second,
		Nemesis: ClusterScriptFlush(clusterSchedule{Quiet0: 200 * time.Millisecond, Quiet1: time.Second, MinFaults: 5}),
	},
}

// TestChaosCluster runs the cluster tier and prints its summary table.
func TestChaosCluster(t *testing.T) {
	gated(t)
	start := time.Now()
	var res Results
	t.Cleanup(func() {
		t.Logf("chaos cluster summary (master seed %d, %v):\n%s", Seed, time.Since(start).Round(time.Second), res.Table())
	})
	for _, sc := range slices.Concat(clusterScenarios, shardedClusterScenarios) {
		t.Run(sc.Name, func(t *testing.T) {
			res.Add(Run(t, sc))
		})
	}
}

// The hand-off gap check on hand-made histories: n hand-offs of gap each
// before a fault at 10 s, and n after the heal at 11 s.
func TestHandoffGapCheck(t *testing.T) {
	hist := func(n int, before, after time.Duration) []Event {
		ms := int64(time.Millisecond)
		evs := []Event{{Type: EvNote, Proc: -1, Detail: "warm", T: 0}}
		handoffs := func(from int64, gap time.Duration) {
			for i := range int64(n) {
				r := from + i*300*ms
				evs = append(evs,
					Event{Type: EvEnd, How: "release", Kind: Mutex, Res: "m0", T: r},
					Event{Type: EvGrant, Kind: Mutex, Res: "m0", Call: r - 100*ms, T: r + int64(gap)},
					// a grant to a worker that was not waiting is no sample
					Event{Type: EvEnd, How: "release", Kind: Mutex, Res: "m0", T: r + 200*ms},
					Event{Type: EvGrant, Kind: Mutex, Res: "m0", Call: r + 210*ms, T: r + 250*ms})
			}
		}
		handoffs(100*ms, before)
		evs = append(evs, Event{Type: EvFault, Proc: -1, T: 10_000 * ms}, Event{Type: EvHeal, Proc: -1, T: 11_000 * ms})
		handoffs(11_100*ms, after)
		return evs
	}
	for _, tc := range []struct {
		name          string
		n             int
		before, after time.Duration
		want          string // "", "violation" or "few"
	}{
		{"same", 12, 500 * time.Microsecond, 600 * time.Microsecond, ""},
		{"below the floor", 12, 500 * time.Microsecond, 40 * time.Millisecond, ""},
		{"slower", 12, 500 * time.Microsecond, time.Second, "violation"},
		{"slower, above the floor", 12, 20 * time.Millisecond, 60 * time.Millisecond, "violation"},
		{"too few", gapMinSamples - 1, 500 * time.Microsecond, time.Second, "few"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Summary{}
			handoff(t, &Scenario{Backend: Clustered, TTL: time.Second}, hist(tc.n, tc.before, tc.after), 20_000*int64(time.Millisecond), s)
			got := ""
			switch {
			case len(s.Violations) > 0:
				got = "violation"
			case s.GapFew:
				got = "few"
			}
			if got != tc.want || s.GapBeforeN != tc.n || s.GapAfterN != tc.n {
				t.Fatalf("got %q with %d/%d samples (%.2f/%.2fms), want %q with %d each", got, s.GapBeforeN, s.GapAfterN, s.GapBeforeMs, s.GapAfterMs, tc.want, tc.n)
			}
		})
	}
}
