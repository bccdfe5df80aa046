package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ---- memory: idle resources leave no key behind (leasehold only) ----

// memTTL is the lease TTL of the memory run: an idle resource's keys expire
// within 2 x TTL + 1 s of its release.
const memTTL = 2 * time.Second

type memResult struct {
	Names      int     // distinct mutex names, each locked and released once
	KeysBase   int64   // DBSIZE before: the epoch marker and the lease
	KeysPeak   int64   // right after the last release
	KeysAfter  int64   // once back at the baseline, or at the bound
	MemBase    int64   // INFO memory used_memory, bytes
	MemPeak    int64   //
	MemAfter   int64   //
	BackMs     float64 // last release -> DBSIZE back at KeysBase; -1 if never within the bound
	BoundMs    float64 // 2 x TTL + 1 s
	BytesPerID float64 // (MemPeak - MemBase) / Names: what an idle name costs until it expires
	Err        string  `json:",omitempty"`
}

func (h *harness) runMemory(ctx context.Context) {
	n := 100_000
	if h.cfg.Quick {
		n = 20_000
	}
	r, err := h.memory(ctx, n)
	if err != nil {
		r.Err = err.Error()
		h.harnessErr("memory: %v", err)
	}
	h.res.Memory = &r
}

func (h *harness) memory(ctx context.Context, n int) (memResult, error) {
	r := memResult{Names: n, BoundMs: float64((2*memTTL + time.Second).Milliseconds()), BackMs: -1}
	if err := h.adm.flush(ctx); err != nil {
		return r, err
	}
	c := leaseholdMutex()
	ps, err := h.openProcs(ctx, c, 1, procOpts{ns: h.ns(), ttl: memTTL})
	if err != nil {
		return r, err
	}
	defer h.closeProcs(c, ps)
	p := ps[0].(*lhProc)
	if r.KeysBase, r.MemBase, err = h.adm.memory(ctx); err != nil {
		return r, err
	}
	errs := make([]error, 64)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := range errs {
		wg.Go(func() {
			for i := range next {
				if errs[w] != nil {
					continue
				}
				cctx, cancel := callCtx(ctx)
				hd, err := p.tryHold(cctx, "n"+strconv.Itoa(i))
				if err == nil {
					err = hd.Release(cctx)
				}
				cancel()
				errs[w] = err
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return r, fmt.Errorf("lock+release of %d names: %w", n, err)
	}
	released := time.Now()
	if r.KeysPeak, r.MemPeak, err = h.adm.memory(ctx); err != nil {
		return r, err
	}
	r.BytesPerID = float64(r.MemPeak-r.MemBase) / float64(n)
	bound := released.Add(time.Duration(r.BoundMs)*time.Millisecond + 2*time.Second)
	for {
		keys, mem, err := h.adm.memory(ctx)
		if err != nil {
			return r, err
		}
		r.KeysAfter, r.MemAfter = keys, mem
		if keys <= r.KeysBase {
			r.BackMs = float64(time.Since(released).Milliseconds())
			break
		}
		if time.Now().After(bound) {
			break
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return r, err
		}
	}
	if p.s.Err() != nil {
		return r, fmt.Errorf("session lost: %w", p.s.Err())
	}
	return r, nil
}

// memory returns DBSIZE and INFO memory's used_memory.
func (a *admin) memory(ctx context.Context) (keys, used int64, err error) {
	if keys, err = a.do(ctx, "DBSIZE").AsInt64(); err != nil {
		return 0, 0, fmt.Errorf("DBSIZE: %w", err)
	}
	s, err := a.do(ctx, "INFO", "memory").ToString()
	if err != nil {
		return 0, 0, fmt.Errorf("INFO memory: %w", err)
	}
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			used, err = strconv.ParseInt(v, 10, 64)
			return keys, used, err
		}
	}
	return 0, 0, errors.New("INFO memory: no used_memory")
}

func (h *harness) memoryTarget() target {
	m := h.res.Memory
	name := "idle resources: no key left 2 x TTL + 1 s after release"
	if m == nil || m.Err != "" {
		return notMeasured(name, "memory scenario not run or failed")
	}
	measured := fmt.Sprintf("%s names: %s keys, %s MiB at the last release; %s keys, %s MiB after %s",
		count(m.Names), count(int(m.KeysPeak)), mib(m.MemPeak), count(int(m.KeysAfter)), mib(m.MemAfter), backStr(m))
	if m.BackMs >= 0 && m.BackMs <= m.BoundMs {
		return target{Target: name, Measured: measured, Status: "MET"}
	}
	return target{Target: name, Measured: measured, Status: "MISSED",
		Detail: fmt.Sprintf("%s keys left above the baseline of %d after %.0f ms", count(int(m.KeysAfter-m.KeysBase)), m.KeysBase, m.BoundMs)}
}

func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

func backStr(m *memResult) string {
	if m.BackMs < 0 {
		return "the bound"
	}
	return fmt.Sprintf("%.1f s", m.BackMs/1000)
}

func (h *harness) memoryMarkdown(b *strings.Builder) {
	m := h.res.Memory
	if m == nil {
		return
	}
	fmt.Fprintf(b, "## Redis memory after %s distinct names (leasehold)\n\n", count(m.Names))
	fmt.Fprintf(b, "One session (TTL %v) locks and releases each name once, 64 at a time; Redis' DBSIZE and used_memory before, at the last release, and once DBSIZE is back at its baseline (bound 2 x TTL + 1 s).\n\n", memTTL)
	t := newTable(b, "", "keys", "used_memory MiB")
	t.row("before", count(int(m.KeysBase)), mib(m.MemBase))
	t.row("at the last release", count(int(m.KeysPeak)), mib(m.MemPeak))
	t.row("after "+backStr(m), count(int(m.KeysAfter)), mib(m.MemAfter))
	fmt.Fprintf(b, "\nAn idle name costs %.0f bytes until it expires.\n\n", m.BytesPerID)
}
