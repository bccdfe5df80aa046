package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// openProcs opens n procs of c, a few at a time.
func (h *harness) openProcs(ctx context.Context, c contender, n int, o procOpts) ([]proc, error) {
	ps := make([]proc, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			addr := o.addr
			if addr == "" {
				addr = h.srv.addr()
			}
			ps[i], errs[i] = c.open(ctx, addr, o)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		var opened []proc
		for _, p := range ps {
			if p != nil {
				opened = append(opened, p)
			}
		}
		h.closeProcs(c, opened)
		return nil, fmt.Errorf("open %s: %w", c.name, err)
	}
	return ps, nil
}

// closeProcs closes ps; Close calls that do not return within 30s are a
// harness error.
func (h *harness) closeProcs(c contender, ps []proc) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, p := range ps {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			_ = p.Close() // a failed cleanup of a run that is over changes no figure
		})
	}
	if !waitTimeout(&wg, 30*time.Second) {
		h.harnessErr("%s: Close did not return within 30s", c.name)
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// snapshot is the state of counters at one instant.
type snapshot struct {
	t     time.Time
	cpu   time.Duration // bench process CPU
	reqs  int64         // client requests of the procs
	lease int64         // of which leasehold lease commands (heartbeats)
	trips int64         // round trips of the procs (a pipeline counts once)
	srv   srvStats
}

func (h *harness) snap(ctx context.Context, ps []proc) (snapshot, error) {
	s := snapshot{t: time.Now(), cpu: procCPU()}
	for _, p := range ps {
		s.reqs += p.counter().total()
		s.lease += p.counter().lease.Load()
		s.trips += p.counter().trips.Load()
	}
	var err error
	s.srv, err = h.adm.stats(ctx)
	return s, err
}

// window is the measured interval of a run: opened after the warm-up,
// closed after the duration.
type window struct {
	on    atomic.Bool
	d     time.Duration // wall time between the snapshots
	cpu   time.Duration // bench process CPU
	reqs  int64
	lease int64
	srv   srvDelta
}

// measure warms up, opens the window for d and closes it, taking snapshots
// around it. prof, when set, is the CPU profile file for the window.
func (h *harness) measure(ctx context.Context, ps []proc, w *window, d time.Duration, prof string) error {
	if err := sleepCtx(ctx, h.cfg.Warmup); err != nil {
		return err
	}
	a, err := h.snap(ctx, ps)
	if err != nil {
		return err
	}
	stopProf := startProfile(prof)
	w.on.Store(true)
	sleepErr := sleepCtx(ctx, d)
	w.on.Store(false)
	stopProf()
	if sleepErr != nil {
		return sleepErr
	}
	b, err := h.snap(ctx, ps)
	if err != nil {
		return err
	}
	w.d, w.cpu, w.reqs, w.lease, w.srv = b.t.Sub(a.t), b.cpu-a.cpu, b.reqs-a.reqs, b.lease-a.lease, b.srv.sub(a.srv)
	return nil
}

// startProfile starts a CPU profile into path ("" for none) and returns
// the function that stops it. A profile that cannot be written is skipped.
func startProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// errSamples keeps the first few distinct error messages.
type errSamples struct {
	mu   sync.Mutex
	msgs []string
}

func (e *errSamples) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.msgs) < 3 && !slices.Contains(e.msgs, err.Error()) {
		e.msgs = append(e.msgs, err.Error())
	}
}

func (e *errSamples) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.msgs)
}

func (h *harness) profPath(scenario string, c contender, round int) string {
	if h.cfg.ProfileDir == "" || (c.group != "leasehold" && c.group != "raw") || round != 0 {
		return ""
	}
	name := strings.ReplaceAll(c.name, " ", "-")
	return filepath.Join(h.cfg.ProfileDir, scenario+"-"+name+".pprof")
}

// roundRobin runs each contender (names) once per round, in an order
// rotated every round (order), and leaves a contender out of later rounds
// once a run of it failed. It returns each contender's runs and the error
// that ended them ("" if none); scen names the scenario in harness errors
// and in the log.
func roundRobin[R any](h *harness, scen string, names []string, run func(i, round int) (R, error)) (runs [][]R, errs []string) {
	runs, errs = make([][]R, len(names)), make([]string, len(names))
	for r := range h.cfg.Rounds {
		for _, i := range order(indexes(len(names)), r) {
			if errs[i] != "" {
				continue
			}
			x, err := run(i, r)
			if err != nil {
				errs[i] = err.Error()
				h.harnessErr("%s %s: %v", scen, names[i], err)
				continue
			}
			runs[i] = append(runs[i], x)
		}
		h.logf("%s round %d/%d done", scen, r+1, h.cfg.Rounds)
	}
	return runs, errs
}

func contenderNames(cs []contender) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.name
	}
	return out
}
