package election_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/session"
)

// TestRunFailsOver: two processes run election.Run; when the leader is cut
// off from Redis its lead ctx is canceled before the other is elected, and
// once the partition heals the old one campaigns again on a new session.
func TestRunFailsOver(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	probe := testutil.Client(t, addr)
	testutil.InitEpoch(t, addr, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The checker: when a lead starts, the previous lead's context must be
	// done already (canceled before the new leader was elected).
	var current atomic.Pointer[context.Context]
	var overlaps atomic.Int32
	type term struct{ who string }
	started := make(chan term, 8)
	proxies := map[string]*redistest.Proxy{}
	run := func(who string) <-chan error {
		px := redistest.StartProxy(t, addr)
		proxies[who] = px
		m := session.NewManager(testutil.Client(t, px.Addr()), session.Options{Namespace: ns, TTL: time.Second})
		t.Cleanup(func() { m.Close() })
		done := make(chan error, 1)
		go func() {
			done <- election.Run(ctx, m, "leader", who, func(lctx context.Context) error {
				if prev := current.Swap(&lctx); prev != nil && (*prev).Err() == nil {
					overlaps.Add(1)
				}
				if h := election.Leadership(lctx); h == nil || h.Err() != nil {
					t.Errorf("lead: Leadership(ctx) = %v, want the live leadership hold", h)
				}
				started <- term{who}
				<-lctx.Done()
				return nil
			})
		}()
		return done
	}
	d1, d2 := run("one"), run("two")

	var first term
	select {
	case first = <-started:
	case err := <-d1:
		t.Fatalf("Run one ended before anyone led: %v", err)
	case err := <-d2:
		t.Fatalf("Run two ended before anyone led: %v", err)
	}
	proxies[first.who].Blackhole(true)
	var second term
	select {
	case second = <-started:
	case <-ctx.Done():
		t.Fatal("no new leader after the leader's lease vanished")
	}
	if second.who == first.who {
		t.Fatalf("%s led again; want the other candidate", first.who)
	}
	// The old leader is a candidate again, on a new session.
	proxies[first.who].Blackhole(false)
	e := election.New(testutil.Dial(t, addr, ns, session.Options{TTL: time.Second}), "leader")
	testutil.WaitFor(t, ctx, func() bool {
		n, err := probe.Do(ctx, probe.B().Llen().Key("{"+ns+"}:q:el:leader").Build()).AsInt64()
		return err == nil && n == 1
	})
	if l, err := e.Leader(ctx); err != nil || l.Value != second.who {
		t.Fatalf("Leader = %+v, %v; want %s", l, err, second.who)
	}
	cancel()
	for _, d := range []<-chan error{d1, d2} {
		if err := <-d; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run after cancel: %v, want context.Canceled", err)
		}
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d times two leads ran at once", n)
	}
}

// TestReset: an operator's Reset ends only the leader's hold, with ErrLost,
// and elects the next candidate with a newer term.
func TestReset(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	a := testutil.Dial(t, addr, ns, session.Options{TTL: 2 * time.Second})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 2 * time.Second})
	admin := testutil.Dial(t, addr, ns, session.Options{TTL: 2 * time.Second})
	h, err := election.New(a, "reset").Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan *session.Hold, 1)
	go func() {
		hb, err := election.New(b, "reset").Campaign(ctx, "b")
		if err != nil {
			t.Error(err)
		}
		next <- hb
	}()
	testutil.WaitFor(t, ctx, func() bool {
		n, err := hook.Env(admin, "reset").C.Do(ctx, hook.Env(admin, "reset").C.B().Llen().Key("{"+ns+"}:q:el:reset").Build()).AsInt64()
		return err == nil && n == 1
	})
	if ok, err := election.New(admin, "reset").Reset(ctx); err != nil || !ok {
		t.Fatalf("Reset = %v, %v; want true", ok, err)
	}
	<-h.Done()
	if !errors.Is(h.Err(), session.ErrLost) || errors.Is(h.Err(), session.ErrLeaseLost) {
		t.Fatalf("reset leader's cause %v, want ErrLost (not ErrLeaseLost)", h.Err())
	}
	hb := <-next
	if hb == nil || hb.Token() <= h.Token() {
		t.Fatal("next candidate not elected with a newer term")
	}
	l, err := election.New(admin, "reset").Leader(ctx)
	if err != nil || l.Value != "b" || l.Session != b.ID() {
		t.Fatalf("Leader = %+v, %v; want b", l, err)
	}
	if ok, err := election.New(admin, "nobody").Reset(ctx); err != nil || ok {
		t.Fatalf("Reset with nobody leading = %v, %v; want false", ok, err)
	}
}
