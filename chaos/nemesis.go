package chaos

import (
	"fmt"
	"strings"
	"time"
)

// The nemeses of the suite. Each injects faults until the run ends and
// heals every fault before it returns; durations are drawn from e.Rand.

// KillRestart kills Redis with SIGKILL, keeps it down for a random time in
// [down0, down1) and restarts it on the same port; quiet is the time between
// faults. With AOF (appendfsync always) the data survives; without, Redis
// comes back empty and the fault is recorded as "restart-empty".
func KillRestart(down0, down1, quiet time.Duration) func(*Env) {
	return func(e *Env) {
		kind := "kill-restart"
		if e.Scenario.Backend == Plain {
			kind = FaultRestartEmpty
		}
		for e.Sleep(quiet) {
			down := e.Between(down0, down1)
			e.Fault(kind, "redis SIGKILL, restart after %v", down.Round(time.Millisecond))
			e.Redis.Kill()
			time.Sleep(down)
			e.Redis.Restart()
			e.Heal("redis restarted")
		}
	}
}

// Flush empties Redis with FLUSHALL or FLUSHDB (drawn at random, SYNC or
// ASYNC) every quiet, the first time no sooner than first after the start
// of the nemesis: a server that has been up longer than the restart grace
// loses its data while it keeps running, which its uptime cannot show.
// Recorded as FaultFlush, so the checker expects holders inside their
// deadline to reclaim.
func Flush(first, quiet time.Duration) func(*Env) {
	return func(e *Env) {
		wait := max(first, quiet)
		for e.Sleep(wait) {
			wait = quiet
			cmd := []string{[]string{"FLUSHALL", "FLUSHDB"}[e.Rand.IntN(2)], []string{"SYNC", "ASYNC"}[e.Rand.IntN(2)]}
			up, _ := e.Redis.Do(e.T, "INFO", "server").ToString()
			e.Fault(FaultFlush, "%s (%s)", strings.Join(cmd, " "), infoField(up, "uptime_in_seconds")+"s uptime")
			if err := e.Redis.Do(e.T, cmd...).Error(); err != nil {
				e.T.Fatalf("chaos: %s: %v", strings.Join(cmd, " "), err)
			}
			e.Heal("flushed")
		}
	}
}

// infoField returns field's value in an INFO reply, or "?".
func infoField(info, field string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return v
		}
	}
	return "?"
}

// StopRedis pauses Redis with SIGSTOP for a random time in [d0, d1).
func StopRedis(d0, d1, quiet time.Duration) func(*Env) {
	return func(e *Env) {
		for e.Sleep(quiet) {
			d := e.Between(d0, d1)
			e.Fault("redis-stop", "redis SIGSTOP for %v", d.Round(time.Millisecond))
			e.Redis.Stop()
			time.Sleep(d)
			e.Redis.Cont()
			e.Heal("redis SIGCONT")
		}
	}
}

func procNames(ps []*Proc) string {
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("p%d", p.Index))
	}
	return strings.Join(s, ",")
}

// Blackhole partitions 1..k random holder processes (sometimes all) from
// Redis for a random time in [d0, d1): connections stay open, bytes stop.
func Blackhole(k int, d0, d1, quiet time.Duration) func(*Env) {
	return func(e *Env) {
		for e.Sleep(quiet) {
			n := 1 + e.Rand.IntN(k)
			if e.Rand.IntN(4) == 0 {
				n = len(e.Procs)
			}
			ps := e.Pick(n)
			d := e.Between(d0, d1)
			e.Fault("blackhole", "%s cut off from redis for %v", procNames(ps), d.Round(time.Millisecond))
			for _, p := range ps {
				p.Proxy.Blackhole(true)
			}
			time.Sleep(d)
			for _, p := range ps {
				p.Proxy.Blackhole(false)
			}
			e.Heal("partition healed")
		}
	}
}

// Latency adds a one-way delay in [l0, l1) to random holder processes'
// traffic (sometimes all) for a random time in [d0, d1).
func Latency(l0, l1, d0, d1, quiet time.Duration) func(*Env) {
	return func(e *Env) {
		for e.Sleep(quiet) {
			n := 1 + e.Rand.IntN(len(e.Procs))
			ps := e.Pick(n)
			l := e.Between(l0, l1)
			d := e.Between(d0, d1)
			e.Fault("latency", "%s: +%v each way for %v", procNames(ps), l.Round(time.Millisecond), d.Round(time.Millisecond))
			for _, p := range ps {
				p.Proxy.Latency(l)
			}
			time.Sleep(d)
			for _, p := range ps {
				p.Proxy.Latency(0)
			}
			e.Heal("latency back to normal")
		}
	}
}

// Reset resets (RST) every connection of random holder processes, every
// [q0, q1).
func Reset(q0, q1 time.Duration) func(*Env) {
	return func(e *Env) {
		for e.Sleep(e.Between(q0, q1)) {
			ps := e.Pick(1 + e.Rand.IntN(len(e.Procs)))
			n := 0
			for _, p := range ps {
				n += p.Proxy.Reset()
			}
			e.Fault("reset", "%s: %d connections reset", procNames(ps), n)
			e.Heal("reset done")
		}
	}
}

// PauseHolder stops, with SIGSTOP, a holder process that holds something
// (or any, if none does) for a random time in [d0, d1) — a GC or VM pause
// beyond the TTL.
func PauseHolder(d0, d1, quiet time.Duration) func(*Env) {
	return func(e *Env) {
		for e.Sleep(quiet) {
			p := e.holding()
			d := e.Between(d0, d1)
			e.Fault("holder-pause", "p%d SIGSTOP for %v", p.Index, d.Round(time.Millisecond))
			p.Pause()
			time.Sleep(d)
			p.Resume()
			e.Heal("p%d SIGCONT", p.Index)
		}
	}
}

// holding returns a random process among those holding something now (a
// resource or semaphore permits), or a random process.
func (e *Env) holding() *Proc {
	open := map[string]int{}
	for _, ev := range e.Hist.Events() {
		switch ev.Type {
		case EvGrant:
			open[ev.Hold] = ev.Proc
		case EvEnd:
			delete(open, ev.Hold)
		}
	}
	var procs []int
	for _, p := range open {
		procs = append(procs, p)
	}
	if len(procs) == 0 {
		return e.Pick(1)[0]
	}
	return e.Procs[procs[e.Rand.IntN(len(procs))]]
}

// ManualFailover runs SENTINEL FAILOVER, then waits (up to settle) for the
// Sentinels to turn the old master into a replica of the new one.
func ManualFailover(settle time.Duration) func(*Env) {
	return func(e *Env) {
		for e.Sleep(e.Between(2*time.Second, 4*time.Second)) {
			e.Fault("failover", "SENTINEL FAILOVER")
			oldM, newM := e.Sentinel.Failover()
			e.T.Logf("failover: %s -> %s; waiting for the old master to become a replica", oldM, newM)
			e.Sentinel.WaitReplicaOf(oldM, newM, settle)
			e.Heal("failover done: master %s, replica %s in sync", newM, oldM)
		}
	}
}

// KillMaster kills the master with SIGKILL, waits for the Sentinels to
// promote the replica, and restarts the old master as a replica of the new.
func KillMaster() func(*Env) {
	return func(e *Env) {
		for e.Sleep(e.Between(2*time.Second, 4*time.Second)) {
			e.Fault("kill-master", "master SIGKILL")
			oldM, newM := e.Sentinel.KillMaster()
			e.T.Logf("sentinels promoted %s; restarting %s as its replica", newM, oldM)
			e.Sentinel.RejoinAsReplica(oldM, newM)
			e.Heal("failover done: master %s, replica %s in sync", newM, oldM)
		}
	}
}

// SnapshotRestart takes an RDB snapshot (BGSAVE), lets the workload run for
// [age0, age1), then kills Redis and restarts it at once: it comes back with
// the snapshot, an older state that still has the epoch marker.
func SnapshotRestart(age0, age1, quiet time.Duration) func(*Env) {
	return func(e *Env) {
		for e.Sleep(quiet) {
			if err := e.Redis.Do(e.T, "SAVE").Error(); err != nil {
				e.T.Fatalf("SAVE: %v", err)
			}
			age := e.Between(age0, age1)
			time.Sleep(age)
			e.Fault("snapshot-restart", "redis SIGKILL and restart from an RDB snapshot %v old", age.Round(time.Millisecond))
			e.Redis.Kill()
			e.Redis.Restart()
			e.Heal("redis restarted from the snapshot")
		}
	}
}
