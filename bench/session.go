package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/session"
)

// ---- heartbeat cost versus holds per session (leasehold only) ----

// hbTTL is the lease TTL of the heartbeat runs: a short one (heartbeat
// TTL/3 = 100 ms) so that a window of a few seconds sees enough heartbeats.
const hbTTL = 300 * time.Millisecond

type hbRun struct {
	Holds           float64
	Beats           float64 // heartbeat scripts seen in the window (one per lease copy per beat when sharded)
	IntervalsInWin  float64 // window / heartbeat interval
	BeatsPerInt     float64 // heartbeats per heartbeat interval
	ReqPerBeat      float64 // every request the session sent / heartbeats
	SrvUsPerBeat    float64 // INFO commandstats usec of evalsha / calls
	SrvCallsPerBeat float64 // evalsha calls / heartbeat requests: 1 if nothing else ran
	TripsPerInt     float64 // round trips (requests or pipelines) the session sent per interval
	ClientUsPerInt  float64 // bench process CPU per interval, µs
}

type hbRow struct {
	Holds  int
	Shards int // session.Options.Shards; 0 for an unsharded session
	Rounds []hbRun
	Med    hbRun
	Err    string `json:",omitempty"`
}

func leaseholdMutex() contender {
	for _, c := range contenders() {
		if c.name == "leasehold mutex" {
			return c
		}
	}
	panic("no leasehold mutex contender")
}

// hbShards and hbShardHolds make the sharded row of the heartbeat
// scenario: hbShardHolds holds over hbShards shards, so that every shard
// has a lease copy to renew (issue 30: one request per master per
// interval, and a cost per copy that should not matter).
const hbShards, hbShardHolds = 16, 100

func (h *harness) runHeartbeat(ctx context.Context) {
	rows := make([]hbRow, 0, len(h.cfg.HBHolds)+1)
	for _, n := range h.cfg.HBHolds {
		rows = append(rows, hbRow{Holds: n})
	}
	rows = append(rows, hbRow{Holds: hbShardHolds, Shards: hbShards})
	for _, row := range rows {
		for range h.cfg.HBRounds {
			r, err := h.heartbeat(ctx, row.Holds, row.Shards)
			if err != nil {
				row.Err = err.Error()
				h.harnessErr("heartbeat %d holds, %d shards: %v", row.Holds, row.Shards, err)
				break
			}
			row.Rounds = append(row.Rounds, r)
		}
		row.Med = medianOf(row.Rounds)
		h.res.Heartbeat = append(h.res.Heartbeat, row)
		h.logf("heartbeat with %d holds, %d shards done", row.Holds, row.Shards)
	}
}

// takeHolds takes n distinct mutexes with p, 64 at a time.
func takeHolds(ctx context.Context, p *lhProc, prefix string, n int) ([]*session.Hold, error) {
	holds := make([]*session.Hold, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cctx, cancel := callCtx(ctx)
			defer cancel()
			holds[i], errs[i] = p.tryHold(cctx, fmt.Sprintf("%s%d", prefix, i))
		})
	}
	wg.Wait()
	return holds, errors.Join(errs...)
}

func (h *harness) heartbeat(ctx context.Context, n, shards int) (hbRun, error) {
	if err := h.adm.flush(ctx); err != nil {
		return hbRun{}, err
	}
	c := leaseholdMutex()
	ps, err := h.openProcs(ctx, c, 1, procOpts{ns: h.ns(), ttl: hbTTL, shards: shards})
	if err != nil {
		return hbRun{}, err
	}
	defer h.closeProcs(c, ps)
	p := ps[0].(*lhProc)
	holds, err := takeHolds(ctx, p, "h", n)
	if err != nil {
		return hbRun{}, fmt.Errorf("take %d holds: %w", n, err)
	}
	interval := p.s.Options().Heartbeat
	cnt := p.counter()
	if err := sleepCtx(ctx, interval); err != nil { // let the acquisitions settle
		return hbRun{}, err
	}
	a, err := h.snap(ctx, ps)
	if err != nil {
		return hbRun{}, err
	}
	l0 := cnt.lease.Load()
	if err := sleepCtx(ctx, h.cfg.HBWindow); err != nil {
		return hbRun{}, err
	}
	b, err := h.snap(ctx, ps)
	if err != nil {
		return hbRun{}, err
	}
	beats := float64(cnt.lease.Load() - l0)
	d := b.srv.sub(a.srv)
	lost := 0
	for _, hd := range holds {
		if hd.Err() != nil {
			lost++
		}
	}
	if lost > 0 || p.s.Err() != nil {
		return hbRun{}, fmt.Errorf("%d holds lost during the window (session: %v)", lost, p.s.Err())
	}
	if beats == 0 {
		return hbRun{}, errors.New("no heartbeat in the window")
	}
	intervals := b.t.Sub(a.t).Seconds() / interval.Seconds()
	calls := float64(d.calls["evalsha"] + d.calls["eval"])
	usec := float64(d.usec["evalsha"] + d.usec["eval"])
	return hbRun{
		Holds: float64(n), Beats: beats, IntervalsInWin: intervals,
		BeatsPerInt:     beats / intervals,
		ReqPerBeat:      float64(b.reqs-a.reqs) / beats,
		SrvUsPerBeat:    usec / max(calls, 1),
		SrvCallsPerBeat: calls / beats,
		TripsPerInt:     float64(b.trips-a.trips) / intervals,
		ClientUsPerInt:  float64((b.cpu - a.cpu).Microseconds()) / intervals,
	}, nil
}

// ---- scale: many sessions with holds, heartbeat 1 s ----

type scaleResult struct {
	Sessions        int
	HoldsPerSession int
	TTL             string
	Heartbeat       string
	Duration        string
	LeasesLost      int
	HoldsLost       int
	RedisCPUPct     float64 // of one core, over the run
	ClientCPUPct    float64
	HeartbeatsPerS  float64 // heartbeat requests sent per second
	SrvUsPerBeat    float64
	BeatP50us       float64 // heartbeat round trip seen by the client
	BeatP99us       float64
	BeatMaxus       float64
	MinSlackMs      float64 // least time left before any session's local deadline, sampled every 250 ms
	Err             string  `json:",omitempty"`
}

func (h *harness) runScale(ctx context.Context) {
	r, err := h.scale(ctx)
	if err != nil {
		r.Err = err.Error()
		h.harnessErr("scale: %v", err)
	}
	h.res.Scale = &r
}

func (h *harness) scale(ctx context.Context) (scaleResult, error) {
	const ttl = 3 * time.Second
	res := scaleResult{Sessions: h.cfg.ScaleSessions, HoldsPerSession: h.cfg.ScaleHolds,
		TTL: ttl.String(), Heartbeat: (ttl / 3).String(), Duration: h.cfg.ScaleDuration.String()}
	if err := h.adm.flush(ctx); err != nil {
		return res, err
	}
	c := leaseholdMutex()
	t0 := time.Now()
	ps, err := h.openProcs(ctx, c, h.cfg.ScaleSessions, procOpts{ns: h.ns(), ttl: ttl, small: true, latency: true})
	if err != nil {
		return res, err
	}
	defer h.closeProcs(c, ps)
	var all []*session.Hold
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(ps))
	sem := make(chan struct{}, 8)
	for i, p := range ps {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			hs, err := takeHolds(ctx, p.(*lhProc), fmt.Sprintf("s%d-", i), h.cfg.ScaleHolds)
			errs[i] = err
			mu.Lock()
			all = append(all, hs...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("take holds: %w", err)
	}
	h.logf("scale: %d sessions with %d holds each open in %v; running %v",
		len(ps), h.cfg.ScaleHolds, time.Since(t0).Round(time.Millisecond), h.cfg.ScaleDuration)
	var beats0 int64
	for _, p := range ps {
		p.counter().leaseLat.take()
		beats0 += p.counter().lease.Load()
	}
	a, err := h.snap(ctx, nil)
	if err != nil {
		return res, err
	}
	minSlack := time.Duration(1<<63 - 1)
	end := time.Now().Add(h.cfg.ScaleDuration)
	for time.Now().Before(end) {
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return res, err
		}
		now := time.Now()
		for _, p := range ps {
			s := p.(*lhProc).s
			if s.Err() == nil {
				minSlack = min(minSlack, s.Deadline().Sub(now))
			}
		}
	}
	b, err := h.snap(ctx, nil)
	if err != nil {
		return res, err
	}
	var lat []time.Duration
	var beats int64
	for _, p := range ps {
		lat = append(lat, p.counter().leaseLat.take()...)
		beats += p.counter().lease.Load()
		if p.(*lhProc).s.Err() != nil {
			res.LeasesLost++
		}
	}
	for _, hd := range all {
		if hd.Err() != nil {
			res.HoldsLost++
		}
	}
	el := b.t.Sub(a.t).Seconds()
	d := b.srv.sub(a.srv)
	res.RedisCPUPct = 100 * d.cpu / el
	res.ClientCPUPct = 100 * (b.cpu - a.cpu).Seconds() / el
	res.HeartbeatsPerS = float64(beats-beats0) / el
	res.SrvUsPerBeat = float64(d.usec["evalsha"]+d.usec["eval"]) / float64(max(d.calls["evalsha"]+d.calls["eval"], 1))
	res.BeatP50us, res.BeatP99us, res.BeatMaxus = us(pct(lat, 50)), us(pct(lat, 99)), us(pct(lat, 100))
	res.MinSlackMs = float64(minSlack.Microseconds()) / 1000
	return res, nil
}
