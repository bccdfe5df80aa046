package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Failed TryLock.

type tryRun struct {
	P50us     float64
	P99us     float64
	OpsPerSec float64
	ReqPerOp  float64
	Errors    float64 // errors other than "busy"; a success is an error too

	ErrorSamples []string `json:",omitempty"`
}

type tryRow struct {
	Contender string
	Group     string
	Rounds    []tryRun
	Med       tryRun
	Err       string `json:",omitempty"`
}

func (h *harness) runTryLock(ctx context.Context) {
	var cs []contender
	for _, c := range contenders() {
		if c.mutex {
			cs = append(cs, c)
		}
	}
	runs, errs := roundRobin(h, "trylock", contenderNames(cs), func(i, _ int) (tryRun, error) { return h.tryLock(ctx, cs[i]) })
	for i, c := range cs {
		h.res.TryLock = append(h.res.TryLock, tryRow{Contender: c.name, Group: c.group, Rounds: runs[i], Med: medianOf(runs[i]), Err: errs[i]})
	}
}

// tryLock holds a key with one proc and times TryLock on it from another.
func (h *harness) tryLock(ctx context.Context, c contender) (tryRun, error) {
	if err := h.adm.flush(ctx); err != nil {
		return tryRun{}, err
	}
	ps, err := h.openProcs(ctx, c, 2, procOpts{ns: h.ns()})
	if err != nil {
		return tryRun{}, err
	}
	defer h.closeProcs(c, ps)
	// The holder's ctx must outlive the Lock call: rueidislock ends the lock
	// with the ctx it was taken with.
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	guard := time.AfterFunc(callTimeout, hcancel)
	u, err := ps[0].Lock(hctx, "t")
	guard.Stop()
	if err != nil {
		return tryRun{}, fmt.Errorf("hold the key: %w", err)
	}
	defer func() { _ = u(context.Background()) }()

	var w window
	var lat []time.Duration
	var errs int64
	var samples errSamples
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for wctx.Err() == nil {
			t0 := time.Now()
			u2, err := ps[1].TryLock(wctx, "t")
			d := time.Since(t0)
			if !w.on.Load() {
				if u2 != nil {
					_ = u2(context.Background())
				}
				continue
			}
			switch {
			case errors.Is(err, errBusy):
				lat = append(lat, d)
			case err == nil:
				errs++ // granted while held: a broken lock
				samples.add(errors.New("TryLock granted while another client held the lock"))
				_ = u2(context.Background())
			case wctx.Err() == nil:
				errs++
				samples.add(err)
			}
		}
	}()
	merr := h.measure(ctx, ps[1:], &w, h.cfg.TryDuration, "")
	stop()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		h.harnessErr("trylock %s: worker did not end within 30s", c.name)
		return tryRun{}, errors.New("worker did not end")
	}
	if merr != nil {
		return tryRun{}, merr
	}
	if len(lat) == 0 {
		return tryRun{}, fmt.Errorf("no failed TryLock in the window (%d errors)", errs)
	}
	n := float64(len(lat))
	return tryRun{
		P50us: us(pct(lat, 50)), P99us: us(pct(lat, 99)),
		OpsPerSec: n / w.d.Seconds(), ReqPerOp: float64(w.reqs) / n, Errors: float64(errs),
		ErrorSamples: samples.list(),
	}, nil
}
