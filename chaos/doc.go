// Package chaos is leasehold's fault-injection suite: real redis-server
// processes (plain, AOF with appendfsync always, Sentinel, Redis Cluster), a
// TCP fault proxy between every holder process and Redis, and holders that
// run in separate processes (the test binary re-executed with
// -test.run=^TestHelperProcess$) so that a holder can be paused with SIGSTOP
// like a long GC pause.
//
// A scenario starts the servers and the holder processes, runs a nemesis (a
// schedule of faults drawn from a seeded random source), heals every fault,
// waits for liveness, stops the holders and checks the recorded history:
//
//   - no two critical sections of one mutex, election or pool member overlap:
//     a grant is observed only after the previous holder's hold context was
//     canceled or its Release called (both on CLOCK_MONOTONIC, which is
//     comparable across processes of one machine);
//   - semaphore permits in use never exceed the limit;
//   - with a LockDelay, a holder's resource (or its semaphore permits) is
//     granted to no one within LockDelay of its deadline when its session
//     was lost, also when its process was stopped;
//   - fencing tokens strictly increase per resource;
//   - every holder process runs one scheduled job (package schedule,
//     @every 1s): no slot runs twice, its runs never overlap, and the slots
//     no run covered are counted;
//   - every hold's context is canceled no later than the send time of its
//     session's last confirmed heartbeat + TTL (Session.Deadline, sampled);
//   - a fenced store that rejects stale tokens loses no update, and no write it
//     accepted came from a holder that had been superseded there;
//   - after the last fault heals, every primitive grants again within a bound;
//   - overlaps (and permit excesses) are reported with their window, from
//     the later grant to the first end observed; the measured (unsupported)
//     scenarios report the longest;
//   - on Redis Cluster, the median mutex hand-off gap (release to a waiter's
//     grant) after the last heal is at most twice the one before the first
//     fault (or under 2 ms);
//   - with a sharded namespace (Scenario.Shards), every check above holds
//     per hold against its own shard's lease copy, the leak check reads
//     every shard, and a session of another shard count that tries to open
//     across a restart-empty of the guard's master is refused
//     (ClusterShardsChange).
//
// The history of a scenario is written as JSON when it fails (or always, to
// the directory named by LEASEHOLD_CHAOS_HISTORY). LEASEHOLD_CHAOS_SEED
// replays a run's random choices. The package is test support: only its tests
// and those of chaos/docker import it.
package chaos
