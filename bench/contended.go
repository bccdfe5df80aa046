package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Contended hand-off.

type contRun struct {
	AcqPerSec        float64 // acquisitions per second, re-acquisitions included
	HandoffsPerSec   float64 // acquisitions by another worker than the last releaser, per second
	ReacqPct         float64 // share of acquisitions by the worker that released last, %
	GapP50us         float64 // release call -> next (other) owner's Lock returned, µs
	GapP99us         float64
	ReleaseP50us     float64 // duration of the Release call
	PingP50us        float64 // PING round trip from another client under the same load
	TryP50us         float64 // failed TryLock of the same contender (another key) under the same load
	ReqPerHandoff    float64 // requests the holders sent from Lock to Release done, per hand-off (heartbeats apart)
	BeatsPerHandoff  float64 // leasehold heartbeats sent in the window, per hand-off
	ReqPerLock       float64 // requests a worker sent during one Lock call (heartbeats excluded)
	PollingLocksPct  float64 // Lock calls that sent more than one request, %
	SrvCmdPerHandoff float64
	ClientCPUus      float64 // bench process CPU per acquisition (the holders' busy-wait excluded), µs
	SrvCPUus         float64 // redis-server CPU per acquisition, µs
	HoldUs           float64 // mean time a holder held, µs
	Acquisitions     float64
	Handoffs         float64
	LockErrors       float64
	ReleaseErrors    float64
	Overlaps         float64 // two holders at once: must be 0

	ErrorSamples []string `json:",omitempty"`
}

type contRow struct {
	Contender string
	Group     string
	Note      string
	Rounds    []contRun
	Med       contRun
	Err       string `json:",omitempty"`
}

func (h *harness) runContended(ctx context.Context) {
	var cs []contender
	for _, c := range contenders() {
		if c.mutex {
			cs = append(cs, c)
		}
	}
	rows := make([]*contRow, len(cs))
	for i, c := range cs {
		rows[i] = &contRow{Contender: c.name, Group: c.group, Note: c.note}
	}
	for r := range h.cfg.Rounds {
		for _, i := range order(indexes(len(cs)), r) {
			if rows[i].Err != "" {
				continue
			}
			cr, err := h.contended(ctx, cs[i], r)
			if err != nil {
				rows[i].Err = err.Error()
				h.harnessErr("contended %s: %v", cs[i].name, err)
				continue
			}
			rows[i].Rounds = append(rows[i].Rounds, cr)
		}
		h.logf("contended round %d/%d done", r+1, h.cfg.Rounds)
	}
	for _, row := range rows {
		row.Med = medianOf(row.Rounds)
		h.res.Contended = append(h.res.Contended, *row)
	}
}

// workerStats is what one contended worker saw inside the window.
type workerStats struct {
	acq, reacq, handoffs     int64
	locks, lockReqs, polling int64
	iterReqs                 int64
	lockErrs, relErrs        int64
	hold, spinCPU            time.Duration
	gaps, rel                []time.Duration
}

// contended runs Holders workers, each with its own proc (client, session),
// on one key: Lock, hold, Release, again.
func (h *harness) contended(ctx context.Context, c contender, round int) (contRun, error) {
	if err := h.adm.flush(ctx); err != nil {
		return contRun{}, err
	}
	ns := h.ns()
	ps, err := h.openProcs(ctx, c, h.cfg.Holders, procOpts{ns: ns, waits: true})
	if err != nil {
		return contRun{}, err
	}
	defer h.closeProcs(c, ps)
	// Two more procs of the same contender, outside the counted ones: one
	// holds key "probe" for the whole run, the other times a failed TryLock
	// of it under the same load (tryProbe).
	probes, err := h.openProcs(ctx, c, 2, procOpts{ns: ns, waits: true})
	if err != nil {
		return contRun{}, err
	}
	defer h.closeProcs(c, probes)
	pctx, pcancel := context.WithCancel(ctx) // rueidislock ends a lock with its ctx
	defer pcancel()
	guard := time.AfterFunc(callTimeout, pcancel)
	pu, err := probes[0].Lock(pctx, "probe")
	guard.Stop()
	if err != nil {
		return contRun{}, fmt.Errorf("probe: hold the key: %w", err)
	}
	defer func() { _ = pu(context.Background()) }()

	epoch := time.Now()
	since := func() int64 { return int64(time.Since(epoch)) } // monotonic
	var (
		w          window
		holder     atomic.Int64 // worker id holding, 0 when none
		lastRel    atomic.Int64 // when the last holder called Release
		lastWorker atomic.Int64 // who that was
		overlaps   atomic.Int64
	)
	stats := make([]workerStats, len(ps))
	var samples errSamples
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, p := range ps {
		id := int64(i + 1)
		st := &stats[i]
		cnt := p.counter()
		wg.Go(func() {
			for wctx.Err() == nil {
				before := cnt.reqs.Load() // heartbeats (lease commands) are not in reqs
				u, err := p.Lock(wctx, "c")
				got := since()
				if err != nil {
					if wctx.Err() == nil && w.on.Load() {
						st.lockErrs++
						samples.add(fmt.Errorf("Lock: %w", err))
					}
					continue
				}
				lockReqs := cnt.reqs.Load() - before
				if !holder.CompareAndSwap(0, id) {
					overlaps.Add(1)
				}
				prevWorker, prevRel := lastWorker.Load(), lastRel.Load()
				on := w.on.Load()
				if on {
					st.acq++
					st.locks++
					st.lockReqs += lockReqs
					if lockReqs > 1 {
						st.polling++
					}
					switch prevWorker {
					case id:
						st.reacq++
					case 0:
					default:
						st.handoffs++
						st.gaps = append(st.gaps, time.Duration(got-prevRel))
					}
				}
				t0 := time.Now()
				spun := h.holdFor(h.cfg.Hold)
				if on {
					st.hold += time.Since(t0)
					st.spinCPU += spun
				}
				holder.Store(0)
				lastWorker.Store(id)
				lastRel.Store(since())
				relStart := time.Now()
				err = u(context.Background())
				if on {
					st.rel = append(st.rel, time.Since(relStart))
					if err != nil {
						st.relErrs++
						samples.add(fmt.Errorf("Release: %w", err))
					}
					// Everything this worker's client sent from Lock to the
					// end of Release (one worker per client: its session's
					// background requests too, heartbeats apart).
					st.iterReqs += cnt.reqs.Load() - before
				}
			}
		})
	}
	// A probe measures a plain round trip (PING, its own client) under the
	// same load, every 2 ms while the window is open.
	var probeLat []time.Duration
	probeDone := make(chan struct{})
	probe, perr := rueidis.NewClient(rueidisOpt(h.srv.addr(), procOpts{}))
	if perr != nil {
		close(probeDone)
	} else {
		go func() {
			defer close(probeDone)
			for wctx.Err() == nil {
				if w.on.Load() {
					pctx, pcancel := callCtx(wctx)
					t0 := time.Now()
					err := probe.Do(pctx, probe.B().Ping().Build()).Error()
					d := time.Since(t0)
					pcancel()
					if err == nil && w.on.Load() {
						probeLat = append(probeLat, d)
					}
				}
				_ = sleepCtx(wctx, 2*time.Millisecond)
			}
		}()
	}
	// A second probe times a failed TryLock (one round trip of the same
	// contender) under the same load, every 10 ms: the gap target's "one
	// round trip" under the conditions the gap is measured in.
	var tryLat []time.Duration
	tryDone := make(chan struct{})
	go func() {
		defer close(tryDone)
		for wctx.Err() == nil {
			if w.on.Load() {
				t0 := time.Now()
				u, err := probes[1].TryLock(wctx, "probe")
				d := time.Since(t0)
				switch {
				case errors.Is(err, errBusy) && w.on.Load():
					tryLat = append(tryLat, d)
				case err == nil:
					samples.add(errors.New("probe: TryLock granted while another client held the lock"))
					overlaps.Add(1)
					_ = u(context.Background())
				}
			}
			_ = sleepCtx(wctx, 10*time.Millisecond)
		}
	}()
	merr := h.measure(ctx, ps, &w, h.cfg.ContDuration, h.profPath("contended", c, round))
	cancel()
	<-probeDone
	<-tryDone
	if probe != nil {
		probe.Close()
	}
	if !waitTimeout(&wg, 30*time.Second) {
		h.harnessErr("contended %s: workers did not end within 30s", c.name)
		return contRun{}, errors.New("workers did not end")
	}
	if merr != nil {
		return contRun{}, merr
	}
	var t workerStats
	for _, s := range stats {
		t.acq += s.acq
		t.reacq += s.reacq
		t.handoffs += s.handoffs
		t.locks += s.locks
		t.lockReqs += s.lockReqs
		t.iterReqs += s.iterReqs
		t.polling += s.polling
		t.lockErrs += s.lockErrs
		t.relErrs += s.relErrs
		t.hold += s.hold
		t.spinCPU += s.spinCPU
		t.gaps = append(t.gaps, s.gaps...)
		t.rel = append(t.rel, s.rel...)
	}
	if t.acq == 0 {
		return contRun{}, fmt.Errorf("no acquisition in the window (%d lock errors)", t.lockErrs)
	}
	acq, ho := float64(t.acq), float64(max(t.handoffs, 1))
	return contRun{
		AcqPerSec:        acq / w.d.Seconds(),
		HandoffsPerSec:   float64(t.handoffs) / w.d.Seconds(),
		ReacqPct:         100 * float64(t.reacq) / acq,
		GapP50us:         us(pct(t.gaps, 50)),
		GapP99us:         us(pct(t.gaps, 99)),
		ReleaseP50us:     us(pct(t.rel, 50)),
		PingP50us:        us(pct(probeLat, 50)),
		TryP50us:         us(pct(tryLat, 50)),
		ReqPerHandoff:    float64(t.iterReqs) / ho,
		BeatsPerHandoff:  float64(w.lease) / ho,
		ReqPerLock:       float64(t.lockReqs) / float64(t.locks),
		PollingLocksPct:  100 * float64(t.polling) / float64(t.locks),
		SrvCmdPerHandoff: float64(w.srv.commands) / ho,
		ClientCPUus:      float64((w.cpu - t.spinCPU).Microseconds()) / acq,
		SrvCPUus:         w.srv.cpu * 1e6 / acq,
		HoldUs:           us(t.hold) / acq,
		Acquisitions:     acq,
		Handoffs:         float64(t.handoffs),
		LockErrors:       float64(t.lockErrs),
		ReleaseErrors:    float64(t.relErrs),
		Overlaps:         float64(overlaps.Load()),
		ErrorSamples:     samples.list(),
	}, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// holdFor holds the lock for d and returns the CPU the holding itself used
// (the busy-wait), so that it can be left out of the client CPU figure.
// Go's timers cannot sleep 100µs (time.Sleep(100µs) takes ~1.1 ms here), so
// the default is a busy-wait on a locked OS thread.
func (h *harness) holdFor(d time.Duration) time.Duration {
	if h.cfg.HoldMode == "sleep" {
		time.Sleep(d)
		return 0
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := threadCPU()
	for t0 := time.Now(); time.Since(t0) < d; {
	}
	return threadCPU() - c0
}
