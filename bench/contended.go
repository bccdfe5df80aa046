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
	runs, errs := roundRobin(h, "contended", contenderNames(cs), func(i, r int) (contRun, error) { return h.contended(ctx, cs[i], r) })
	for i, c := range cs {
		h.res.Contended = append(h.res.Contended, contRow{Contender: c.name, Group: c.group, Note: c.note,
			Rounds: runs[i], Med: medianOf(runs[i]), Err: errs[i]})
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
	releaseProbe, err := holdProbeKey(ctx, probes[0])
	if err != nil {
		return contRun{}, err
	}
	defer releaseProbe()

	s := &handoffs{epoch: time.Now()}
	stats := make([]workerStats, len(ps))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { h.work(wctx, p, int64(i+1), &stats[i], s) })
	}
	pings := h.pingProbe(wctx, &s.w)
	tries := s.tryProbe(wctx, probes[1])
	merr := h.measure(ctx, ps, &s.w, h.cfg.ContDuration, h.profPath("contended", c, round))
	cancel()
	pingLat, tryLat := pings(), tries()
	if !waitTimeout(&wg, 30*time.Second) {
		h.harnessErr("contended %s: workers did not end within 30s", c.name)
		return contRun{}, errors.New("workers did not end")
	}
	if merr != nil {
		return contRun{}, merr
	}
	return s.result(sumStats(stats), pingLat, tryLat)
}

// holdProbeKey has p hold key "probe"; the returned function releases it.
func holdProbeKey(ctx context.Context, p proc) (release func(), err error) {
	pctx, pcancel := context.WithCancel(ctx) // rueidislock ends a lock with its ctx
	guard := time.AfterFunc(callTimeout, pcancel)
	pu, err := p.Lock(pctx, "probe")
	guard.Stop()
	if err != nil {
		pcancel()
		return nil, fmt.Errorf("probe: hold the key: %w", err)
	}
	return func() {
		_ = pu(context.Background())
		pcancel()
	}, nil
}

// handoffs is what the workers and probes of one contended run share.
type handoffs struct {
	w          window
	epoch      time.Time
	holder     atomic.Int64 // worker id holding, 0 when none
	lastRel    atomic.Int64 // when the last holder called Release, since epoch
	lastWorker atomic.Int64 // who that was
	overlaps   atomic.Int64
	samples    errSamples
}

// since is the time since epoch on the monotonic clock.
func (s *handoffs) since() int64 { return int64(time.Since(s.epoch)) }

// work is worker id on p until ctx ends: Lock, hold, Release, again,
// counting into st what falls in the window (by the state at the grant).
func (h *harness) work(ctx context.Context, p proc, id int64, st *workerStats, s *handoffs) {
	cnt := p.counter()
	for ctx.Err() == nil {
		before := cnt.reqs.Load() // heartbeats (lease commands) are not in reqs
		u, err := p.Lock(ctx, "c")
		got := s.since()
		if err != nil {
			if ctx.Err() == nil && s.w.on.Load() {
				st.lockErrs++
				s.samples.add(fmt.Errorf("Lock: %w", err))
			}
			continue
		}
		lockReqs := cnt.reqs.Load() - before
		if !s.holder.CompareAndSwap(0, id) {
			s.overlaps.Add(1)
		}
		prevWorker, prevRel := s.lastWorker.Load(), s.lastRel.Load()
		on := s.w.on.Load()
		if on {
			st.locked(id, lockReqs, prevWorker, time.Duration(got-prevRel))
		}
		t0 := time.Now()
		spun := h.holdFor(h.cfg.Hold)
		if on {
			st.hold += time.Since(t0)
			st.spinCPU += spun
		}
		s.holder.Store(0)
		s.lastWorker.Store(id)
		s.lastRel.Store(s.since())
		relStart := time.Now()
		err = u(context.Background())
		if on {
			st.released(time.Since(relStart), err, &s.samples)
			// Everything this worker's client sent from Lock to the end of
			// Release (one worker per client: its session's background
			// requests too, heartbeats apart).
			st.iterReqs += cnt.reqs.Load() - before
		}
	}
}

// locked counts a grant to worker id after lockReqs requests, gap after
// prevWorker (0: none yet) called Release.
func (st *workerStats) locked(id, lockReqs, prevWorker int64, gap time.Duration) {
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
		st.gaps = append(st.gaps, gap)
	}
}

// released counts a Release call that took d and returned err.
func (st *workerStats) released(d time.Duration, err error, samples *errSamples) {
	st.rel = append(st.rel, d)
	if err != nil {
		st.relErrs++
		samples.add(fmt.Errorf("Release: %w", err))
	}
}

// pingProbe measures a plain round trip (PING, its own client) under the
// same load, every 2 ms while w is open, until ctx ends. wait waits for
// that end and returns the round trips; none where the client could not
// be opened.
func (h *harness) pingProbe(ctx context.Context, w *window) (wait func() []time.Duration) {
	probe, err := rueidis.NewClient(rueidisOpt(h.srv.addr(), procOpts{}))
	if err != nil {
		return func() []time.Duration { return nil }
	}
	var lat []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if w.on.Load() {
				pctx, pcancel := callCtx(ctx)
				t0 := time.Now()
				err := probe.Do(pctx, probe.B().Ping().Build()).Error()
				d := time.Since(t0)
				pcancel()
				if err == nil && w.on.Load() {
					lat = append(lat, d)
				}
			}
			_ = sleepCtx(ctx, 2*time.Millisecond)
		}
	}()
	return func() []time.Duration {
		<-done
		probe.Close()
		return lat
	}
}

// tryProbe times a failed TryLock of key "probe" by p (one round trip of
// the same contender) under the same load, every 10 ms while the window is
// open, until ctx ends: the gap target's "one round trip" under the
// conditions the gap is measured in. wait waits for that end and returns
// the times.
func (s *handoffs) tryProbe(ctx context.Context, p proc) (wait func() []time.Duration) {
	var lat []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if s.w.on.Load() {
				t0 := time.Now()
				u, err := p.TryLock(ctx, "probe")
				d := time.Since(t0)
				switch {
				case errors.Is(err, errBusy) && s.w.on.Load():
					lat = append(lat, d)
				case err == nil:
					s.samples.add(errors.New("probe: TryLock granted while another client held the lock"))
					s.overlaps.Add(1)
					_ = u(context.Background())
				}
			}
			_ = sleepCtx(ctx, 10*time.Millisecond)
		}
	}()
	return func() []time.Duration {
		<-done
		return lat
	}
}

// sumStats adds up the workers' stats.
func sumStats(stats []workerStats) workerStats {
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
	return t
}

// result is the run's figures from the workers' summed stats t, the
// window and the probes' round trips.
func (s *handoffs) result(t workerStats, pingLat, tryLat []time.Duration) (contRun, error) {
	if t.acq == 0 {
		return contRun{}, fmt.Errorf("no acquisition in the window (%d lock errors)", t.lockErrs)
	}
	w := &s.w
	acq, ho := float64(t.acq), float64(max(t.handoffs, 1))
	return contRun{
		AcqPerSec:        acq / w.d.Seconds(),
		HandoffsPerSec:   float64(t.handoffs) / w.d.Seconds(),
		ReacqPct:         100 * float64(t.reacq) / acq,
		GapP50us:         us(pct(t.gaps, 50)),
		GapP99us:         us(pct(t.gaps, 99)),
		ReleaseP50us:     us(pct(t.rel, 50)),
		PingP50us:        us(pct(pingLat, 50)),
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
		Overlaps:         float64(s.overlaps.Load()),
		ErrorSamples:     s.samples.list(),
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
