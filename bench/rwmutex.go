package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/session"
)

// ---- read-write mutex versus mutex, contended (leasehold only) ----

// rwMixes are the shares of reads of the rwmutex runs: read-heavy and
// write-heavy.
var rwMixes = []float64{0.9, 0.1}

type rwRun struct {
	OpsPerSec       float64 // grants (reads + writes) per second
	ReadsPerSec     float64
	WritesPerSec    float64
	ReadersPerPhase float64 // reads / read phases (a phase starts when a read is granted with no read held): readers admitted together
	MaxReaders      float64 // most reads held at once
	Ops             float64
	LockErrors      float64
	ReleaseErrors   float64
	Overlaps        float64 // a write beside any other hold: must be 0
}

type rwRow struct {
	Contender string // "leasehold rwmutex" or "leasehold mutex" (every operation exclusive)
	ReadPct   int
	Rounds    []rwRun
	Med       rwRun
	Err       string `json:",omitempty"`
}

// runRWMutex runs, for each mix, the same workload on a read-write mutex
// and on a mutex (which makes every operation exclusive), round-robin.
func (h *harness) runRWMutex(ctx context.Context) {
	for _, readP := range rwMixes {
		rows := []*rwRow{
			{Contender: "leasehold rwmutex", ReadPct: int(readP * 100)},
			{Contender: "leasehold mutex", ReadPct: int(readP * 100)},
		}
		for round := range h.cfg.Rounds {
			for i := range rows {
				row := rows[(i+round)%len(rows)]
				if row.Err != "" {
					continue
				}
				r, err := h.rwContended(ctx, readP, row.Contender == "leasehold mutex", round)
				if err != nil {
					row.Err = err.Error()
					h.harnessErr("rwmutex %s %d%% reads: %v", row.Contender, row.ReadPct, err)
					continue
				}
				row.Rounds = append(row.Rounds, r)
			}
		}
		for _, row := range rows {
			row.Med = medianOf(row.Rounds)
			h.res.RWMutex = append(h.res.RWMutex, *row)
		}
		h.logf("rwmutex with %d%% reads done", int(readP*100))
	}
}

// rwState is what the holders of one run check and count.
type rwState struct {
	mu                    sync.Mutex
	readers, writers      int
	phases, reads, writes int
	maxReaders            int
	overlaps              int
}

func (st *rwState) enter(shared, count bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.writers > 0 || (!shared && st.readers > 0) {
		st.overlaps++
	}
	if shared {
		if st.readers == 0 && count {
			st.phases++
		}
		st.readers++
		st.maxReaders = max(st.maxReaders, st.readers)
		if count {
			st.reads++
		}
	} else {
		st.writers++
		if count {
			st.writes++
		}
	}
}

func (st *rwState) leave(shared bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if shared {
		st.readers--
	} else {
		st.writers--
	}
}

// rwContended runs h.cfg.Holders holders, each with its own client and
// session, on one name for h.cfg.ContDuration after h.cfg.Warmup: a share
// readP of the operations are reads. With exclusive, every operation takes
// a mutex instead.
func (h *harness) rwContended(ctx context.Context, readP float64, exclusive bool, round int) (rwRun, error) {
	ps, err := h.openProcs(ctx, leaseholdMutex(), h.cfg.Holders, procOpts{ns: h.ns()})
	if err != nil {
		return rwRun{}, err
	}
	defer h.closeProcs(leaseholdMutex(), ps)
	var st rwState
	var lockErrs, relErrs atomic.Int64
	var samples errSamples
	start := time.Now()
	from, until := start.Add(h.cfg.Warmup), start.Add(h.cfg.Warmup+h.cfg.ContDuration)
	var wg sync.WaitGroup
	for i, p := range ps {
		s := p.(*lhProc).s
		rnd := rand.New(rand.NewPCG(uint64(round), uint64(i)))
		wg.Go(func() {
			for time.Now().Before(until) && ctx.Err() == nil {
				shared := rnd.Float64() < readP
				cctx, cancel := callCtx(ctx)
				var hd *session.Hold
				var err error
				switch {
				case exclusive:
					hd, err = mutex.New(s, "rw").Lock(cctx)
				case shared:
					hd, err = rwmutex.New(s, "rw").RLock(cctx)
				default:
					hd, err = rwmutex.New(s, "rw").Lock(cctx)
				}
				cancel()
				if err != nil {
					lockErrs.Add(1)
					samples.add(err)
					continue
				}
				now := time.Now()
				in := now.After(from) && now.Before(until)
				st.enter(shared && !exclusive, in)
				h.holdFor(h.cfg.Hold)
				st.leave(shared && !exclusive)
				cctx, cancel = callCtx(ctx)
				if err := hd.Release(cctx); err != nil {
					relErrs.Add(1)
					samples.add(err)
				}
				cancel()
			}
		})
	}
	if !waitTimeout(&wg, h.cfg.Warmup+h.cfg.ContDuration+2*callTimeout) {
		return rwRun{}, errors.New("holders did not stop")
	}
	secs := h.cfg.ContDuration.Seconds()
	r := rwRun{
		OpsPerSec: float64(st.reads+st.writes) / secs, ReadsPerSec: float64(st.reads) / secs,
		WritesPerSec: float64(st.writes) / secs, MaxReaders: float64(st.maxReaders),
		Ops: float64(st.reads + st.writes), LockErrors: float64(lockErrs.Load()),
		ReleaseErrors: float64(relErrs.Load()), Overlaps: float64(st.overlaps),
	}
	if st.phases > 0 {
		r.ReadersPerPhase = float64(st.reads) / float64(st.phases)
	}
	if es := samples.list(); len(es) > 0 {
		h.logf("rwmutex errors: %s", strings.Join(es, "; "))
	}
	return r, nil
}

// rwMarkdown is the rwmutex section of the report.
func (h *harness) rwMarkdown(b *strings.Builder) {
	if len(h.res.RWMutex) == 0 {
		return
	}
	fmt.Fprintf(b, "## Read-write mutex, contended\n\n%d holders, each with its own client and session, on one name; "+
		"each operation holds %v. `leasehold mutex` runs the same mix with every operation exclusive. "+
		"Readers per phase: reads / read phases (a phase starts when a read is granted while none is held), "+
		"i.e. how many readers one hand-off admits together. %v window per run.\n\n", h.cfg.Holders, h.cfg.Hold, h.cfg.ContDuration)
	base := map[int]float64{}
	for _, r := range h.res.RWMutex {
		if r.Contender == "leasehold mutex" {
			base[r.ReadPct] = r.Med.OpsPerSec
		}
	}
	t := newTable(b, "contender", "reads", "ops/s", "x mutex", "reads/s", "writes/s", "readers per phase", "max readers", "errors", "overlaps")
	for _, r := range h.res.RWMutex {
		if r.Err != "" {
			t.row(r.Contender, fmt.Sprintf("%d%%", r.ReadPct), "error: "+r.Err, "", "", "", "", "", "", "")
			continue
		}
		m := r.Med
		t.row(r.Contender, fmt.Sprintf("%d%%", r.ReadPct), num(m.OpsPerSec), ratio(m.OpsPerSec, base[r.ReadPct]),
			num(m.ReadsPerSec), num(m.WritesPerSec), num(m.ReadersPerPhase), num(m.MaxReaders),
			num(m.LockErrors+m.ReleaseErrors), num(m.Overlaps))
	}
	b.WriteString("\n")
}
