package chaos

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/jobctx"
	"github.com/leasehold/leasehold/schedule"
	"github.com/leasehold/leasehold/session"
)

// Job is the kind of the scheduled-job worker: every holder process runs
// job jobName, @every 1s, with package schedule on a session.Manager of its
// own. Each run is a grant of resource jobName (so that the overlap, token
// and deadline checks cover runs as they do holds), with its slot (RFC
// 3339) in Detail; the checker also counts slots run twice and slots
// missed (jobSlots).
const Job = "job"

// jobName is the scheduled job every holder process runs.
const jobName = "tick"

// runJob runs job jobName until ctx ends: each run it wins lasts like a
// short hold, and ends early if its hold is lost.
func (w *worker) runJob(ctx context.Context) {
	opt := w.sm.clientOption()
	opt.DisableCache, opt.ConnWriteTimeout = true, w.cfg.TTL/2
	c, err := rueidis.NewClient(opt)
	if err != nil {
		w.em.emit(Event{Type: EvFail, Kind: Job, Cause: "client: " + err.Error()})
		return
	}
	defer c.Close()
	m := session.NewManager(c, session.Options{
		Namespace:    w.cfg.Namespace,
		TTL:          w.cfg.TTL,
		LockDelay:    w.cfg.LockDelay,
		RestartGrace: w.cfg.RestartGrace,
		ReplicaAck:   w.cfg.ReplicaAck,
		Shards:       w.cfg.Shards,
		Owner:        "chaos-p" + strconv.Itoa(w.cfg.Proc) + "-job",
		Logger:       w.sm.log,
	})
	defer m.Close()
	job, err := schedule.New(m, jobName, "@every 1s", schedule.Options{})
	if err != nil {
		w.em.emit(Event{Type: EvFail, Kind: Job, Cause: err.Error()})
		return
	}
	err = job.Run(ctx, func(rctx context.Context, r schedule.Run) error {
		s, h := jobctx.From(rctx)
		dl := holdDeadline(rctx, w.em, s, shardName(Job, jobName), h)
		w.em.emit(Event{Type: EvGrant, Kind: Job, Res: jobName, Hold: h.ID(), Token: r.Token, N: 1, Call: Mono(),
			Deadline: monoOf(dl.Deadline()), Detail: r.Slot.UTC().Format(time.RFC3339)})
		t := time.NewTimer(w.between(w.cfg.HoldMin, w.cfg.HoldMax))
		defer t.Stop()
		select {
		case <-t.C:
		case <-rctx.Done():
		}
		if h.Err() != nil {
			w.lost(dl, h, jobName)
			return nil
		}
		w.em.emit(Event{Type: EvEnd, How: "release", Kind: Job, Res: jobName, Hold: h.ID(), Token: h.Token(),
			Deadline: monoOf(dl.Deadline())})
		return nil
	})
	if ctx.Err() == nil {
		w.em.emit(Event{Type: EvFail, Kind: Job, Cause: fmt.Sprint("schedule: Run: ", err)})
	}
}
