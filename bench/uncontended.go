package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Uncontended lock+release.

type uncRun struct {
	OpsPerSec   float64 // lock+release pairs per second
	ReqPerOp    float64 // client requests per lock+release
	SrvCmdPerOp float64 // server commands (inside scripts too) per lock+release
	ClientCPUus float64 // bench process CPU per lock+release, µs
	SrvCPUus    float64 // redis-server CPU per lock+release, µs
	P50us       float64 // median time of one lock+release, µs
	P99us       float64 // its 99th percentile, µs
	// Socket reads Redis made per lock+release (INFO stats): below the
	// request count when the client batched requests into one write.
	SrvReadsPerOp float64
	Errors        float64
	Ops           float64 // lock+release pairs counted
	Reqs          float64 // requests they sent, heartbeats apart
	Heartbeats    float64 // heartbeats sent meanwhile (leasehold)
	// Commands Redis ran per lock+release, by name (scripts' inner calls
	// included), and a few of the errors seen; not part of the medians.
	ServerCommands map[string]float64 `json:",omitempty"`
	ErrorSamples   []string           `json:",omitempty"`
}

type uncRow struct {
	Contender   string
	Group       string
	Note        string
	Serial      []uncRun
	Parallel    []uncRun
	SerialMed   uncRun
	ParallelMed uncRun
	// OneCPU: the serial run with the bench and redis-server on one CPU
	// (pinTogether), which measures their CPU work without the wake-ups
	// of another CPU; none where pinning failed (results' OneCPUErr).
	OneCPU    []uncRun `json:",omitempty"`
	OneCPUMed uncRun
	// OneCPUErr: the error that ended this contender's runs on one CPU;
	// it leaves the other runs (and Err) alone.
	OneCPUErr string `json:",omitempty"`
	Err       string `json:",omitempty"`
}

// uncMode is one of the uncontended scenario's runs.
type uncMode int

const (
	uncSerial   uncMode = iota // one goroutine, one key
	uncParallel                // Workers goroutines, a key each
	uncOneCPU                  // uncSerial with the bench and Redis on one CPU
)

func (h *harness) runUncontended(ctx context.Context) {
	cs := contenders()
	rows := make([]*uncRow, len(cs))
	for i, c := range cs {
		rows[i] = &uncRow{Contender: c.name, Group: c.group, Note: c.note}
	}
	for r := range h.cfg.Rounds {
		for _, i := range order(indexes(len(cs)), r) {
			c, row := cs[i], rows[i]
			if row.Err != "" {
				continue
			}
			for _, mode := range []uncMode{uncSerial, uncParallel, uncOneCPU} {
				if mode == uncOneCPU && (h.res.OneCPUErr != "" || row.OneCPUErr != "") {
					continue
				}
				u, err := h.uncontended(ctx, c, mode, r)
				var pe pinError
				switch {
				case errors.As(err, &pe):
					h.res.OneCPUErr = pe.Error()
					h.logf("uncontended: no more runs on one CPU: %v", pe)
					continue
				case err != nil && mode == uncOneCPU:
					row.OneCPUErr = err.Error()
					h.logf("uncontended on one CPU %s: %v", c.name, err)
					continue
				}
				if err != nil {
					row.Err = err.Error()
					h.harnessErr("uncontended %s: %v", c.name, err)
					break
				}
				switch mode {
				case uncSerial:
					row.Serial = append(row.Serial, u)
				case uncParallel:
					row.Parallel = append(row.Parallel, u)
				case uncOneCPU:
					row.OneCPU = append(row.OneCPU, u)
				}
			}
		}
		h.logf("uncontended round %d/%d done", r+1, h.cfg.Rounds)
	}
	for _, row := range rows {
		row.SerialMed = medianOf(row.Serial)
		row.ParallelMed = medianOf(row.Parallel)
		row.OneCPUMed = medianOf(row.OneCPU)
		if n := len(row.Serial); n > 0 {
			row.SerialMed.ServerCommands = row.Serial[n-1].ServerCommands
		}
		h.res.Uncontended = append(h.res.Uncontended, *row)
	}
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// pinError is a failure to pin the bench and Redis to one CPU: the
// scenario goes on without its one-CPU runs.
type pinError struct{ err error }

func (e pinError) Error() string { return e.err.Error() }

// oneCPU pins the bench and its Redis to one CPU with GOMAXPROCS 1 (a
// second P would only spin on the same CPU) and returns what undoes both.
// An error putting the old affinity back is a harness error: later
// scenarios would run on one CPU.
func (h *harness) oneCPU() (restore func(), err error) {
	unpin, err := pinTogether(h.srv.pid())
	if err != nil {
		return nil, pinError{err}
	}
	procs := runtime.GOMAXPROCS(1)
	return func() {
		runtime.GOMAXPROCS(procs)
		if err := unpin(); err != nil {
			h.harnessErr("uncontended on one CPU: give the old CPU affinity back: %v", err)
		}
	}, nil
}

// uncontended runs lock+release in a loop: one goroutine on one key, or
// Workers goroutines each on its own key, all sharing one proc (one client);
// serially on one CPU for uncOneCPU, from before the warm-up on.
// The workers warm up, park, and are counted from a common start until a
// stop flag, so that the snapshots around the counted phase see no request
// in flight: requests per lock+release are exact, not window-edge estimates.
func (h *harness) uncontended(ctx context.Context, c contender, mode uncMode, round int) (uncRun, error) {
	if err := h.adm.flush(ctx); err != nil {
		return uncRun{}, err
	}
	ps, err := h.openProcs(ctx, c, 1, procOpts{ns: h.ns()})
	if err != nil {
		return uncRun{}, err
	}
	defer h.closeProcs(c, ps)
	n, scen := 1, "uncontended-serial"
	switch mode {
	case uncParallel:
		n, scen = h.cfg.Workers, "uncontended-parallel"
	case uncOneCPU:
		scen = "uncontended-onecpu"
		restore, err := h.oneCPU()
		if err != nil {
			return uncRun{}, err
		}
		defer restore()
	}
	ws := startUncWorkers(ctx, ps[0], n)
	defer ws.cancel()
	a, b, d, err := h.countUncontended(ctx, ws, ps, scen+" "+c.name, h.profPath(scen, c, round))
	if err != nil {
		return uncRun{}, err
	}
	return ws.result(a, b, d)
}

// uncWorkers are the goroutines of one uncontended run, on one proc.
type uncWorkers struct {
	cancel         context.CancelFunc // ends the workers
	warmDone, stop atomic.Bool        // end of the warm-up, of the counted phase
	parked, wg     sync.WaitGroup     // workers parked after the warm-up; running
	release        chan struct{}      // closed to start the counted phase
	ops, errs      atomic.Int64       // counted lock+release pairs and errors
	samples        errSamples
	lat            latencies // of the counted lock+release pairs
}

// startUncWorkers starts n workers on p, each on its own key; they warm up
// until warmDone.
func startUncWorkers(ctx context.Context, p proc, n int) *uncWorkers {
	ctx, cancel := context.WithCancel(ctx)
	ws := &uncWorkers{cancel: cancel, release: make(chan struct{})}
	ws.parked.Add(n)
	for g := range n {
		key := fmt.Sprintf("u%d", g)
		ws.wg.Go(func() { ws.work(ctx, p, key) })
	}
	return ws
}

// work is one worker: lock+release of key until warmDone, park until
// release, then lock+release counted until stop.
func (ws *uncWorkers) work(ctx context.Context, p proc, key string) {
	for !ws.warmDone.Load() && ctx.Err() == nil {
		_ = lockRelease(ctx, p, key)
	}
	ws.parked.Done()
	select {
	case <-ws.release:
	case <-ctx.Done():
		return
	}
	var mine []time.Duration // merged into lat at the end: no lock per op
	for !ws.stop.Load() && ctx.Err() == nil {
		t := time.Now()
		if err := lockRelease(ctx, p, key); err != nil {
			if ctx.Err() == nil {
				ws.errs.Add(1)
				ws.samples.add(err)
				_ = sleepCtx(ctx, time.Millisecond)
			}
			continue
		}
		mine = append(mine, time.Since(t))
		ws.ops.Add(1)
	}
	ws.lat.mu.Lock()
	ws.lat.d = append(ws.lat.d, mine...)
	ws.lat.mu.Unlock()
}

func lockRelease(ctx context.Context, p proc, key string) error {
	u, err := p.Lock(ctx, key)
	if err != nil {
		return err
	}
	return u(context.Background())
}

// countUncontended ends the workers' warm-up, waits for them to park, and
// counts them for Duration between snapshots a and b of ps; d is the time
// from their start to their end. prof, when set, is the CPU profile file of
// the counted phase; who names the run in harness errors.
func (h *harness) countUncontended(ctx context.Context, ws *uncWorkers, ps []proc, who, prof string) (a, b snapshot, d time.Duration, err error) {
	fail := func(err error) (snapshot, snapshot, time.Duration, error) {
		ws.cancel()
		if !waitTimeout(&ws.wg, 30*time.Second) {
			h.harnessErr("%s: workers did not end within 30s", who)
		}
		return snapshot{}, snapshot{}, 0, err
	}
	if err := sleepCtx(ctx, h.cfg.Warmup); err != nil {
		return fail(err)
	}
	ws.warmDone.Store(true)
	if !waitTimeout(&ws.parked, 30*time.Second) {
		return fail(errors.New("warm-up did not end within 30s"))
	}
	if a, err = h.snap(ctx, ps); err != nil {
		return fail(err)
	}
	stopProf := startProfile(prof)
	t0 := time.Now()
	close(ws.release)
	if err := sleepCtx(ctx, h.cfg.Duration); err != nil {
		stopProf()
		return fail(err)
	}
	ws.stop.Store(true)
	if !waitTimeout(&ws.wg, 30*time.Second) {
		stopProf()
		h.harnessErr("%s: workers did not end within 30s", who)
		return snapshot{}, snapshot{}, 0, errors.New("workers did not end")
	}
	d = time.Since(t0)
	stopProf()
	b, err = h.snap(ctx, ps)
	return a, b, d, err
}

// result is the run's figures from the snapshots a and b around the
// counted phase, which took d.
func (ws *uncWorkers) result(a, b snapshot, d time.Duration) (uncRun, error) {
	o := float64(ws.ops.Load())
	if o == 0 {
		return uncRun{}, fmt.Errorf("no lock+release completed (%d errors: %v)", ws.errs.Load(), ws.samples.list())
	}
	srv := b.srv.sub(a.srv)
	reqs := float64((b.reqs - b.lease) - (a.reqs - a.lease))
	ds := ws.lat.take()
	return uncRun{
		P50us:          us(pct(ds, 50)),
		P99us:          us(pct(ds, 99)),
		OpsPerSec:      o / d.Seconds(),
		ReqPerOp:       reqs / o,
		SrvCmdPerOp:    float64(srv.commands) / o,
		ClientCPUus:    float64((b.cpu - a.cpu).Microseconds()) / o,
		SrvCPUus:       srv.cpu * 1e6 / o,
		SrvReadsPerOp:  float64(srv.reads-1) / o, // the second INFO's read
		Errors:         float64(ws.errs.Load()),
		Ops:            o,
		Reqs:           reqs,
		Heartbeats:     float64(b.lease - a.lease),
		ServerCommands: perOp(srv.calls, o),
		ErrorSamples:   ws.samples.list(),
	}, nil
}

func perOp(calls map[string]int64, ops float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range calls {
		if v > 0 && k != "info" {
			out[k] = float64(v) / ops
		}
	}
	return out
}
