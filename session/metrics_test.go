package session_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/internal/redistest"
	tu "github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// TestMetrics: the collectors appear on the registry and follow what the
// sessions do.
func TestMetrics(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := tu.Ctx(t, 30*time.Second)
	reg := prometheus.NewRegistry()
	o := session.Options{TTL: 600 * time.Millisecond, Metrics: reg}
	a := tu.Dial(t, addr, ns, o)
	b := tu.Dial(t, addr, ns, o)
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
		next:
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
						continue next
					}
				}
				switch {
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				}
			}
		}
		return 0
	}
	if got := value("leasehold_sessions", map[string]string{"state": "alive"}); got != 2 {
		t.Fatalf("leasehold_sessions{alive} = %v, want 2", got)
	}
	h, err := mutex.New(a, "m").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := value("leasehold_holds", map[string]string{"kind": "mutex"}); got != 1 {
		t.Fatalf("leasehold_holds{mutex} = %v, want 1", got)
	}
	got := make(chan *session.Hold, 1)
	go func() {
		hb, err := mutex.New(b, "m").Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- hb
	}()
	tu.WaitFor(t, ctx, func() bool {
		in, err := mutex.New(a, "m").Holder(ctx)
		return err == nil && in.Waiters == 1
	})
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	hb := <-got
	if v := value("leasehold_handoffs_total", map[string]string{"kind": "mutex"}); v != 1 {
		t.Fatalf("leasehold_handoffs_total{mutex} = %v, want 1", v)
	}
	if v := value("leasehold_acquire_wait_seconds", map[string]string{"kind": "mutex"}); v != 2 {
		t.Fatalf("leasehold_acquire_wait_seconds{mutex} count = %v, want 2", v)
	}
	beats := value("leasehold_heartbeats_total", map[string]string{"result": "ok"})
	tu.WaitFor(t, ctx, func() bool { return value("leasehold_heartbeats_total", map[string]string{"result": "ok"}) > beats })
	if v := value("leasehold_lease_deadline_remaining_seconds", map[string]string{"session": a.ID()}); v <= 0 || v > 0.6 {
		t.Fatalf("deadline remaining = %v, want in (0, TTL]", v)
	}
	if _, err := mutex.New(a, "m").Reset(ctx); err != nil {
		t.Fatal(err)
	}
	<-hb.Done()
	tu.WaitFor(t, ctx, func() bool {
		return value("leasehold_holds_lost_total", map[string]string{"kind": "mutex", "cause": "revoked"}) == 1
	})
	a.Close()
	b.Close()
	if got := value("leasehold_sessions", map[string]string{"state": "alive"}); got != 0 {
		t.Fatalf("leasehold_sessions{alive} after Close = %v, want 0", got)
	}
	if got := value("leasehold_sessions_ended_total", map[string]string{"cause": "closed"}); got != 2 {
		t.Fatalf("leasehold_sessions_ended_total{closed} = %v, want 2", got)
	}
	// Hold ends are counted by context.AfterFunc callbacks: wait for them.
	tu.WaitFor(t, ctx, func() bool { return value("leasehold_holds", map[string]string{"kind": "mutex"}) == 0 })
}
