package lease

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
)

// TestGroupRetireRace: calls that take a copy while the Group retires it
// (idle for one tick here) never fail for it: each Lock and Release of 4
// goroutines, pausing up to 4 ticks at random between calls, succeeds, and
// copies were retired and reopened meanwhile.
func TestGroupRetireRace(t *testing.T) {
	defer func(n int) { idleCopyTicks = n }(idleCopyTicks)
	idleCopyTicks = 1
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 4
	g := testGroup(ctx, t, n, 300*time.Millisecond)
	end := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				r := scripts.Resource{Kind: scripts.Mutex, Name: fmt.Sprintf("w%d-%d", w, rand.IntN(n))}
				pub, err := g.ClaimPublic(ctx, r, true)
				if err != nil {
					t.Errorf("Lock %s: %v", r.Name, err)
					return
				}
				if err := pub.(*Hold).Release(ctx); err != nil {
					t.Errorf("Release %s: %v", r.Name, err)
					return
				}
				time.Sleep(rand.N(400 * time.Millisecond)) // let copies go idle now and then
			}
		})
	}
	wg.Wait()
	gens := 0
	for k := range g.shards {
		g.shards[k].opening <- struct{}{}
		gens += g.shards[k].gen
		<-g.shards[k].opening
	}
	if gens < 2*n {
		t.Errorf("%d copies opened over %d shards: too few retired for the test to prove anything", gens, n)
	}
	t.Logf("%d copies opened over %d shards", gens, n)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestGroupRetireInterleavings: a copy retired right after a call found it
// is replaced before the call runs; a retire right after a call counted
// itself on the copy keeps the copy. Either way the call succeeds.
func TestGroupRetireInterleavings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 2
	g := testGroup(ctx, t, n, 2*time.Second)
	r := scripts.Resource{Kind: scripts.Mutex, Name: "x"}
	sh := &g.shards[scripts.ShardOf(r.Name, n)]
	lock := func() *Session {
		t.Helper()
		pub, err := g.ClaimPublic(ctx, r, true)
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
		h := pub.(*Hold)
		if err := h.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		return h.s
	}
	first := lock()
	for _, entered := range []bool{false, true} {
		before := sh.cur.Load()
		useHook = func(e bool, s *Session) {
			if e == entered {
				useHook = nil
				g.retire(sh, s)
			}
		}
		used := lock()
		useHook = nil
		switch {
		case !entered && (used == before || sh.cur.Load() != used):
			t.Fatalf("retired after it was found: the call ran on %p, want a new copy (was %p)", used, before)
		case entered && (used != before || sh.cur.Load() != before || before.usable() != nil):
			t.Fatalf("retired after the call entered: the copy was replaced or closed")
		}
	}
	select {
	case <-first.Done():
	case <-ctx.Done():
		t.Fatal("the copy retired first was not closed")
	}
}

// testGroup opens a Group of n shards with ttl on a new redis-server, its
// shards marked intact; the test's end closes it.
func testGroup(ctx context.Context, t *testing.T, n int, ttl time.Duration) *Group {
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client(t)
	o := Options{Namespace: redistest.Namespace(t), TTL: ttl, Shards: n}
	if err := scripts.MarkIntactShards(ctx, c, o.Namespace, n); err != nil {
		t.Fatal(err)
	}
	g, err := NewGroup(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}
