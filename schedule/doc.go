// Package schedule runs cron jobs once per slot across a fleet: every
// replica runs the same job, and each slot of its spec runs on one of them.
//
//	m := session.NewManager(client, session.Options{TTL: 10 * time.Second})
//	defer m.Close()
//	job, err := schedule.New(m, "nightly-report", "0 2 * * *", schedule.Options{})
//	if err != nil {
//		return err
//	}
//	return job.Run(ctx, func(ctx context.Context, r schedule.Run) error {
//		return report(ctx, r.Slot, r.Token) // stop when ctx ends; fence writes with the token
//	})
//
// A slot is a time the spec names: a cron expression of five fields, in
// Options.Location (UTC by default), or a descriptor (@hourly, @daily,
// @every 10s, ...). The slots of @every d are the multiples of d, so every
// node computes the same ones; d is at most five years, the horizon
// within which a cron spec must name a time. Run waits for the next slot,
// takes the job's mutex (package mutex, named "schedule:<name>") and asks
// Redis to claim the slot; fn runs only if Redis says yes.
//
// # How a slot is claimed
//
// One Lua script decides, atomically, against the Redis server's clock and
// the job's record of the last slot run ({ns}:job:<name>), and records the
// slot as run when it says yes. It says yes only if:
//
//   - the caller holds the job's mutex (its hold id is the mutex's holder
//     and its lease exists), and its token is above the last run's;
//   - the slot is after the last slot run;
//   - the slot's time has come by the server's clock (TIME);
//   - the slot is at most Options.Grace late (with RunLatest and a record,
//     any lateness);
//   - when the job has no record, the slot is after the namespace's last
//     data loss (see below).
//
// The local clock only says when to ask: each reply carries the server's
// time, and the next slot is computed from the server's clock as last
// seen. A node whose clock is late asks late and is told the slot ran; one
// whose clock is early asks early and is told to wait. Neither can run a
// slot twice or before its time by the server's clock, whatever its skew.
//
// # Guarantees and limits
//
// Each slot runs at most once across every process running the job on the
// namespace: the record only moves forward, and only the mutex's holder
// moves it. Runs never overlap, within the limits of package mutex: fn's
// ctx is canceled when the run's hold ends, before any other process can
// take the mutex, and provided that fn stops when it is (a process paused
// past its lease may still act late; pass Run.Token to what fn writes and
// let it reject older tokens, see package fence).
//
// A run that outlasts its interval makes the slots that come due meanwhile
// skip: when it ends, the latest slot due runs at once if it is within
// Grace (RunLatest: however late), and the ones before it are skipped. The
// skipped slots are counted in Record.Skipped and Job.Skipped, and logged
// with the session's Logger. The same holds for any slot that no process
// could claim before the next one came due, or within Grace (every process
// down, Redis unreachable, or a stall of a whole interval): only the latest
// slot due is ever run, never a backlog.
//
// The record lives three of the job's intervals (plus two session TTLs)
// after the last claim or end of run, renewed by every run; then a job
// nobody runs leaves no keys behind. A record that expired cannot make a
// slot run twice: the slot proposed is always the latest due, and the
// record of a slot outlives the next slot's time.
//
// If Redis loses its data (a restart without persistence, FLUSHALL, a
// replica promoted empty), the record goes with it. A slot is then claimed
// without a record only if its time is after the moment the loss was
// noticed (the epoch marker records it): a slot run before the loss was
// claimed before it. So at most the slots due while the loss is noticed
// and the restart grace lasts are missed, and none runs twice. With
// session.Options.ReplicaAck, each claim waits for that many replicas, and
// a claim they did not acknowledge is not run, so that a failover cannot
// lose a claim that ran; without it a failover can lose a claim and run
// its slot again (unsupported, like every grant without ReplicaAck). A
// restart from an older snapshot (RDB, or any persistence that loses
// acknowledged writes but keeps the epoch marker) rolls the record back
// and can run a slot again too: exactly once holds where the mutex's P1
// holds (docs/guarantees.md), and the chaos suite measures both
// exceptions (sentinel-failover-noack, rdb-snapshot-restart).
//
// History reads the latest Options.History runs. A record whose End is
// zero and that is not Running was lost with its process.
//
// A Redis ACL user needs nothing beyond what the other primitives need
// (README, "Install"): the job's scripts call HMGET, HSET, HGET, HDEL,
// HKEYS, HGETALL, GET, EXISTS, PEXPIRE and TIME.
package schedule
