package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// ---- lock-loss detection: SIGSTOP Redis while holding ----
//
// A round takes a lock, waits until the server-side expiry was just set by a
// renewal (or the grant), waits a random phase, reads the absolute expiry of
// the key(s) (PEXPIRETIME, server clock = this machine's clock) and SIGSTOPs
// Redis. The margin is expiry − loss signal: positive when the holder was told
// before anyone else could be granted the lock.

type lossRun struct {
	MarginMs float64 // key expiry − loss signal
	SignalMs float64 // loss signal − SIGSTOP
	ExpiryMs float64 // key expiry − SIGSTOP
	NoSignal bool    `json:",omitempty"`
}

type lossRow struct {
	Contender string
	Group     string
	Note      string
	Rounds    []lossRun
	MinMs     float64
	MedMs     float64
	MaxMs     float64
	NA        string `json:",omitempty"` // why there is no measurement
	Err       string `json:",omitempty"`
}

func (h *harness) runLoss(ctx context.Context) {
	srv := h.lossSrv
	adm, err := newAdmin(srv.addr())
	if err != nil {
		h.harnessErr("loss: %v", err)
		return
	}
	defer adm.close()

	var rows []*lossRow
	type lossFn func(ctx context.Context, c contender) (lossRun, error)
	fns := map[string]lossFn{}
	for _, c := range contenders() {
		if !c.mutex || c.variant {
			continue
		}
		row := &lossRow{Contender: c.name, Group: c.group}
		switch {
		case c.name == "leasehold mutex":
			row.Note = fmt.Sprintf("TTL %v, heartbeat %v", h.cfg.LeaseholdLossTTL, h.cfg.LeaseholdLossTTL/3)
			fns[c.name] = func(ctx context.Context, c contender) (lossRun, error) { return h.lossLeasehold(ctx, srv, adm, c) }
		case c.name == "rueidislock":
			row.Note = "defaults: KeyValidity 5s, extended every 2.5s; lock lost when 2 of 3 keys expired"
			fns[c.name] = func(ctx context.Context, c contender) (lossRun, error) { return h.lossRueidislock(ctx, srv, adm, c, 2) }
		case c.name == "rueidislock KeyMajority 1":
			row.Note = "KeyValidity 5s, extended every 2.5s"
			fns[c.name] = func(ctx context.Context, c contender) (lossRun, error) { return h.lossRueidislock(ctx, srv, adm, c, 1) }
		default:
			row.NA = "no loss signal: the API gives the holder no context or callback"
		}
		rows = append(rows, row)
	}
	cs := contenders()
	for r := range h.cfg.LossRounds {
		for _, row := range order(rows, r) {
			fn := fns[row.Contender]
			if fn == nil || row.Err != "" {
				continue
			}
			var c contender
			for _, x := range cs {
				if x.name == row.Contender {
					c = x
				}
			}
			lr, err := fn(ctx, c)
			if err != nil {
				row.Err = err.Error()
				h.harnessErr("loss %s: %v", c.name, err)
				continue
			}
			row.Rounds = append(row.Rounds, lr)
			h.logf("loss %s: margin %.1f ms (signal %.0f ms, expiry %.0f ms after SIGSTOP)", c.name, lr.MarginMs, lr.SignalMs, lr.ExpiryMs)
		}
	}
	for _, row := range rows {
		var m []float64
		for _, r := range row.Rounds {
			m = append(m, r.MarginMs)
		}
		if len(m) > 0 {
			slices.Sort(m)
			row.MinMs, row.MedMs, row.MaxMs = m[0], median(m), m[len(m)-1]
		}
		h.res.Loss = append(h.res.Loss, *row)
	}
}

// expiryAt converts an absolute server expiry (Unix ms) into local time,
// which carries the monotonic reading of now.
func expiryAt(now time.Time, unixMs int64) time.Time {
	return now.Add(time.Duration(unixMs*int64(time.Millisecond) - now.UnixNano()))
}

// stopAndWait SIGSTOPs srv, waits for lost (or the bound), SIGCONTs, and
// returns the round's figures.
func stopAndWait(srv *server, expiry time.Time, lost <-chan struct{}, bound time.Duration) (lossRun, error) {
	stopAt := time.Now()
	if err := srv.stop(); err != nil {
		return lossRun{}, err
	}
	var r lossRun
	select {
	case <-lost:
		sig := time.Now()
		r = lossRun{MarginMs: ms(expiry.Sub(sig)), SignalMs: ms(sig.Sub(stopAt)), ExpiryMs: ms(expiry.Sub(stopAt))}
	case <-time.After(bound):
		r = lossRun{NoSignal: true, MarginMs: ms(expiry.Sub(time.Now())), SignalMs: ms(bound), ExpiryMs: ms(expiry.Sub(stopAt))}
	}
	if err := srv.cont(); err != nil {
		return r, err
	}
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// waitChange polls PEXPIRETIME of key until it differs from old.
func waitChange(ctx context.Context, adm *admin, key string, old int64, bound time.Duration) (int64, error) {
	end := time.Now().Add(bound)
	for time.Now().Before(end) {
		e, err := adm.pexpiretime(ctx, key)
		if err != nil {
			return 0, err
		}
		if e != old {
			return e, nil
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("expiry of %s did not change within %v", key, bound)
}

func randPhase(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo)
}

func (h *harness) lossLeasehold(ctx context.Context, srv *server, adm *admin, c contender) (lossRun, error) {
	if err := adm.flush(ctx); err != nil {
		return lossRun{}, err
	}
	ns := h.ns()
	ttl := h.cfg.LeaseholdLossTTL
	ps, err := h.openProcs(ctx, c, 1, procOpts{addr: srv.addr(), ns: ns, ttl: ttl})
	if err != nil {
		return lossRun{}, err
	}
	defer h.closeProcs(c, ps)
	p := ps[0].(*lhProc)
	cctx, cancel := callCtx(ctx)
	hd, err := p.tryHold(cctx, "l")
	cancel()
	if err != nil {
		return lossRun{}, err
	}
	// The hold is valid through its session's lease {ns}:s:<sid> (docs/design.md).
	lease := "{" + ns + "}:s:" + p.s.ID()
	e0, err := adm.pexpiretime(ctx, lease)
	if err != nil || e0 < 0 {
		return lossRun{}, fmt.Errorf("lease key %s: expiry %d, %v (has the key layout changed?)", lease, e0, err)
	}
	hb := p.s.Options().Heartbeat
	if _, err := waitChange(ctx, adm, lease, e0, 2*hb+time.Second); err != nil {
		return lossRun{}, err
	}
	if err := sleepCtx(ctx, randPhase(50*time.Millisecond, hb-150*time.Millisecond)); err != nil {
		return lossRun{}, err
	}
	e, err := adm.pexpiretime(ctx, lease)
	now := time.Now()
	if err != nil || e < 0 {
		return lossRun{}, fmt.Errorf("lease key %s: expiry %d, %v", lease, e, err)
	}
	return stopAndWait(srv, expiryAt(now, e), hd.Done(), ttl+10*time.Second)
}

func (h *harness) lossRueidislock(ctx context.Context, srv *server, adm *admin, c contender, majority int) (lossRun, error) {
	if err := adm.flush(ctx); err != nil {
		return lossRun{}, err
	}
	ns := h.ns()
	ps, err := h.openProcs(ctx, c, 1, procOpts{addr: srv.addr(), ns: ns})
	if err != nil {
		return lossRun{}, err
	}
	defer h.closeProcs(c, ps)
	p := ps[0].(*rlProc)
	lctx, cancel, err := p.lockCtx(ctx, "l")
	if err != nil {
		return lossRun{}, err
	}
	defer cancel()
	const validity, interval = 5 * time.Second, 2500 * time.Millisecond // rueidislock defaults
	// The grant set the expiry of every key; the first extension comes one
	// interval later.
	if err := sleepCtx(ctx, randPhase(100*time.Millisecond, interval-200*time.Millisecond)); err != nil {
		return lossRun{}, err
	}
	total := 2*majority - 1
	var exp []int64
	now := time.Now()
	for i := range total {
		key := fmt.Sprintf("rueidislock:%d:%s:l", i, ns)
		e, err := adm.pexpiretime(ctx, key)
		if err != nil {
			return lossRun{}, err
		}
		if e == -1 {
			return lossRun{}, fmt.Errorf("key %s has no TTL", key)
		}
		exp = append(exp, e) // -2 (missing) sorts first: a free key
	}
	slices.Sort(exp)
	// Another client can take the lock once `majority` keys are free.
	lockExp := exp[majority-1]
	if lockExp < 0 {
		return lossRun{}, errors.New("lock keys missing right after the grant")
	}
	return stopAndWait(srv, expiryAt(now, lockExp), lctx.Done(), validity+interval+10*time.Second)
}
