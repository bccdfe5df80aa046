package scripts_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestAcquireDuringGrace: during a restart grace every acquire script tells
// a caller that does not queue that a grace is pending, with the time left
// (Grace), whether its lease exists (reclaimed, or opened during the grace)
// or is still gone (its session may yet reclaim it), and leaves nothing
// behind for its hold id; a caller that queues is told Busy, queued when
// its lease exists, as before. A free resource is not granted.
func TestAcquireDuringGrace(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	c := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 10*time.Second)
	const grace = 5 * time.Second
	e := scripts.Env{C: c, K: scripts.NewKeys(ns), Grace: grace}
	// The first lease finds no epoch marker: the marker is set with the
	// grace (the server has just started), and the lease records it.
	if ok, _, err := e.OpenLease(ctx, "live", "test", grace, 0); err != nil || !ok {
		t.Fatalf("OpenLease = %v, %v", ok, err)
	}
	if _, _, err := e.PoolChange(ctx, "p", "add", []string{"k"}); err != nil {
		t.Fatalf("pool add: %v", err)
	}
	resources := []scripts.Resource{
		{Kind: scripts.Mutex, Name: "m"},
		{Kind: scripts.Semaphore, Name: "s", N: 1, Limit: 2},
		{Kind: scripts.Pool, Name: "p"},
		{Kind: scripts.Election, Name: "e", Value: "v"},
	}
	queue := map[scripts.Kind]string{scripts.Mutex: "m:m", scripts.Semaphore: "sem:s", scripts.Pool: "pool:p", scripts.Election: "el:e"}
	queueLen := func(r scripts.Resource) int64 {
		t.Helper()
		n, err := c.Do(ctx, c.B().Llen().Key("{"+ns+"}:q:"+queue[r.Kind]).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, sid := range []string{"live", "gone"} { // "gone" has no lease
		for i, r := range resources {
			hid := scripts.HoldID(sid, uint64(i+1))
			for range 2 { // a repeated attempt is answered the same
				g, err := e.Acquire(ctx, r, hid, false)
				if err != nil || g.Status != scripts.Grace || g.Wait <= 0 || g.Wait > grace {
					t.Fatalf("%s, lease %s, without waiting: %+v, %v; want Grace with 0 < time left <= %v", r.Kind, sid, g, err, grace)
				}
			}
			if n := queueLen(r); n != 0 {
				t.Fatalf("%s, lease %s: %d queued after a try; want none", r.Kind, sid, n)
			}
			g, err := e.Acquire(ctx, r, hid, true)
			wantPos := int64(0)
			if sid == "gone" {
				wantPos = -1 // not queued: come back after the grace
			}
			if err != nil || g.Status != scripts.Busy || g.Position != wantPos || g.Wait <= 0 || g.Wait > grace {
				t.Fatalf("%s, lease %s, waiting: %+v, %v; want Busy at position %d, wait <= %v", r.Kind, sid, g, err, wantPos, grace)
			}
			if _, err := e.Release(ctx, r, hid, true); err != nil {
				t.Fatal(err)
			}
		}
	}
}
