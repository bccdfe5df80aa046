package scripts_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestMutexWaiterMark: the mutex fast paths skip the queue's LLEN and trust
// the hash's waiter mark 'w' instead, so the mark must be set whenever a
// waiter is queued. A waiter queued behind a holder that then left without
// handing over is served before a newcomer (the mark sends the newcomer down
// the full path); the release that
// leaves the queue empty clears the mark and lets the idle mutex expire.
func TestMutexWaiterMark(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	c := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 10*time.Second)
	e := scripts.Env{C: c, K: scripts.NewKeys(ns)} // no grace: a fresh server is not a restart here
	m := scripts.Resource{Kind: scripts.Mutex, Name: "m"}
	key := "{" + ns + "}:m:m"
	for _, sid := range []string{"a", "b", "c"} {
		if ok, err := e.OpenLease(ctx, sid, "test", time.Minute, 0); err != nil || !ok {
			t.Fatalf("OpenLease(%s) = %v, %v", sid, ok, err)
		}
	}
	mark := func() bool {
		t.Helper()
		n, err := c.Do(ctx, c.B().Hexists().Key(key).Field("w").Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	acquire := func(hid string, queue bool, want scripts.Status) scripts.Grant {
		t.Helper()
		g, err := e.Acquire(ctx, m, hid, queue)
		if err != nil || g.Status != want {
			t.Fatalf("Acquire(%s, queue=%v) = %+v, %v; want status %v", hid, queue, g, err, want)
		}
		return g
	}

	ha, hb, hc := scripts.HoldID("a", 1), scripts.HoldID("b", 1), scripts.HoldID("c", 1)
	acquire(ha, false, scripts.Granted)
	if mark() {
		t.Fatal("waiter mark set with nobody waiting")
	}
	acquire(hb, true, scripts.Busy)
	if !mark() {
		t.Fatal("waiter mark not set after a waiter queued")
	}
	// The mutex is free with b waiting, as a release during a restart grace
	// (which hands over to nobody) leaves it: c must not overtake b.
	if err := c.Do(ctx, c.B().Hdel().Key(key).Field("hid").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	acquire(hc, false, scripts.Busy)
	g := acquire(hb, true, scripts.Granted)
	if r, err := e.Release(ctx, m, hb, false); err != nil || r != scripts.Freed {
		t.Fatalf("Release(%s) = %v, %v; want Freed", hb, r, err)
	}
	if mark() {
		t.Fatal("waiter mark still set after the release that left the queue empty")
	}
	pttl, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil || pttl <= 0 {
		t.Fatalf("PTTL of the idle mutex = %d, %v; want > 0", pttl, err)
	}
	g2 := acquire(hc, false, scripts.Granted)
	if g2.Token <= g.Token {
		t.Fatalf("token %d after %d: not increasing", g2.Token, g.Token)
	}
}
