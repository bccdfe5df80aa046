package scripts_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestMutexWaiterMark: the mutex fast paths skip the queue's LLEN and trust
// the waiter mark of the mutex string instead (its last field, see
// mutex_lib.lua), so the mark must be set whenever a
// waiter is queued. A waiter queued behind a holder that then left without
// handing over is served before a newcomer (the mark sends the newcomer down
// the full path); the release that
// leaves the queue empty clears the mark and lets the idle mutex expire.
func TestMutexWaiterMark(t *testing.T) {
	ns, c, ctx, e := leaseWorld(t, "a", "b", "c")
	m := scripts.Resource{Kind: scripts.Mutex, Name: "m"}
	key := "{" + ns + "}:m:m"
	// The mutex string: "<hid>|<tok>|<ld>|<i>|<free>|<w>".
	fields := func() []string {
		t.Helper()
		v, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Split(v, "|")
		if len(f) != 6 {
			t.Fatalf("mutex %q: %d fields, want 6", v, len(f))
		}
		return f
	}
	mark := func() bool { return fields()[5] == "1" }
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
	f := fields()
	f[0] = ""
	if err := c.Do(ctx, c.B().Set().Key(key).Value(strings.Join(f, "|")).Build()).Error(); err != nil {
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

// TestRWMutexWaiterMark: the read-write mutex fast paths trust the waiter
// mark 'q' of its hash rather than the queue, so a newcomer never overtakes
// a waiter: not when the mutex is free with the waiter still queued (as a
// release during a restart grace leaves it), nor when the hash expired while
// the waiter was queued (the mark goes with the token, which the fast paths
// need). The release that leaves the queue empty clears the mark and lets
// the idle hash expire.
func TestRWMutexWaiterMark(t *testing.T) {
	ns, c, ctx, e := leaseWorld(t, "a", "b", "c")
	key := "{" + ns + "}:rw:rw"
	read := scripts.Resource{Kind: scripts.RWMutex, Name: "rw", Shared: true}
	write := scripts.Resource{Kind: scripts.RWMutex, Name: "rw"}
	mark := func() bool { return hasField(t, ctx, c, key, "q") }
	acquire := func(r scripts.Resource, hid string, queue bool, want scripts.Status) scripts.Grant {
		t.Helper()
		g, err := e.Acquire(ctx, r, hid, queue)
		if err != nil || g.Status != want {
			t.Fatalf("Acquire(%s, shared=%v, queue=%v) = %+v, %v; want status %v", hid, r.Shared, queue, g, err, want)
		}
		return g
	}
	do := func(args ...string) {
		t.Helper()
		if err := c.Do(ctx, c.B().Arbitrary(args...).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}

	for i, lose := range []string{"writer", "hash"} {
		n := uint64(10 * (i + 1))
		ha, hb, hc := scripts.HoldID("a", n), scripts.HoldID("b", n), scripts.HoldID("c", n)
		g := acquire(write, ha, false, scripts.Granted)
		if mark() {
			t.Fatal("waiter mark set with nobody waiting")
		}
		acquire(write, hb, true, scripts.Busy)
		if !mark() {
			t.Fatal("waiter mark not set after a waiter queued")
		}
		switch lose {
		case "writer": // free, b still queued
			do("HDEL", key, "w", "wld")
		case "hash": // expired with b queued; a still "holds" nothing
			do("DEL", key)
		}
		acquire(read, hc, false, scripts.Busy)
		acquire(write, hc, false, scripts.Busy)
		gb := acquire(write, hb, true, scripts.Granted)
		if gb.Token <= g.Token {
			t.Fatalf("%s: token %d after %d", lose, gb.Token, g.Token)
		}
		if r, err := e.Release(ctx, write, hb, false); err != nil || r != scripts.Freed {
			t.Fatalf("Release(%s) = %v, %v; want Freed", hb, r, err)
		}
		if mark() {
			t.Fatalf("%s: waiter mark still set after the release that left the queue empty", lose)
		}
		if pttl, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64(); err != nil || pttl <= 0 {
			t.Fatalf("%s: PTTL of the idle hash = %d, %v; want > 0", lose, pttl, err)
		}
		gc := acquire(read, hc, false, scripts.Granted)
		if gc.Token <= gb.Token {
			t.Fatalf("%s: token %d after %d", lose, gc.Token, gb.Token)
		}
		if r, err := e.Release(ctx, read, hc, false); err != nil || r != scripts.Freed {
			t.Fatalf("Release(%s) = %v, %v; want Freed", hc, r, err)
		}
	}
}

// hasField reports whether hash key has field f.
func hasField(t *testing.T, ctx context.Context, c rueidis.Client, key, f string) bool {
	t.Helper()
	n, err := c.Do(ctx, c.B().Hexists().Key(key).Field(f).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestMutexOlderLayout: a mutex kept as a hash by an older leasehold (a
// holder's grant, still held) is read as such and rewritten as the mutex
// string by the next script that writes it: the holder keeps it, a
// newcomer is refused, and tokens go on increasing after the release.
func TestMutexOlderLayout(t *testing.T) {
	ns, c, ctx, e := leaseWorld(t, "a", "b")
	m := scripts.Resource{Kind: scripts.Mutex, Name: "old"}
	key := "{" + ns + "}:m:old"
	ha, hb := scripts.HoldID("a", 1), scripts.HoldID("b", 1)
	old := c.B().Hset().Key(key).FieldValue().FieldValue("hid", ha).FieldValue("tok", "100").
		FieldValue("ld", "0").FieldValue("i", "20000").Build()
	if err := c.Do(ctx, old).Error(); err != nil {
		t.Fatal(err)
	}
	if in, err := e.MutexInspect(ctx, "old"); err != nil || in.HoldID != ha || in.Token != 100 {
		t.Fatalf("MutexInspect of the hash = %+v, %v; want %s holding, token 100", in, err, ha)
	}
	if g, err := e.Acquire(ctx, m, hb, false); err != nil || g.Status != scripts.Busy {
		t.Fatalf("newcomer's Acquire = %+v, %v; want Busy", g, err)
	}
	if typ, err := c.Do(ctx, c.B().Type().Key(key).Build()).ToString(); err != nil || typ != "string" {
		t.Fatalf("TYPE after a write = %q, %v; want string", typ, err)
	}
	if r, err := e.Release(ctx, m, ha, false); err != nil || r != scripts.Freed {
		t.Fatalf("holder's Release = %v, %v; want Freed", r, err)
	}
	if g, err := e.Acquire(ctx, m, hb, false); err != nil || g.Status != scripts.Granted || g.Token <= 100 {
		t.Fatalf("Acquire after the release = %+v, %v; want granted with a token above 100", g, err)
	}
}

// TestSemaphoreWaiterMark: the semaphore fast paths trust the waiter mark
// 'q' of its meta hash rather than the queue's LLEN, so a newcomer never
// overtakes a waiter: not when permits are free with the waiter still
// queued (as a release during a restart grace leaves it). The full path
// that finds the queue empty clears the mark, and the fast path serves
// again.
func TestSemaphoreWaiterMark(t *testing.T) {
	ns, c, ctx, e := leaseWorld(t, "a", "b", "c")
	sem := scripts.Resource{Kind: scripts.Semaphore, Name: "s", N: 1, Limit: 1}
	meta, holders := "{"+ns+"}:sem:s", "{"+ns+"}:semh:s"
	mark := func() bool { return hasField(t, ctx, c, meta, "q") }
	acquire := func(hid string, queue bool, want scripts.Status) scripts.Grant {
		t.Helper()
		g, err := e.Acquire(ctx, sem, hid, queue)
		if err != nil || g.Status != want {
			t.Fatalf("Acquire(%s, queue=%v) = %+v, %v; want status %v", hid, queue, g, err, want)
		}
		return g
	}
	release := func(hid string) {
		t.Helper()
		if r, err := e.Release(ctx, sem, hid, false); err != nil || r != scripts.Freed {
			t.Fatalf("Release(%s) = %v, %v; want Freed", hid, r, err)
		}
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
	// a's permit comes back without a hand-off, as a release during a
	// restart grace leaves it: c must not overtake b.
	if err := c.Do(ctx, c.B().Hdel().Key(holders).Field(ha).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().Hincrby().Key(meta).Field("used").Increment(-1).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	acquire(hc, false, scripts.Busy)
	g := acquire(hb, true, scripts.Granted)
	if mark() {
		t.Fatal("waiter mark still set after the queue emptied")
	}
	release(hb)
	g2 := acquire(hc, false, scripts.Granted)
	if g2.Token <= g.Token {
		t.Fatalf("token %d after %d: not increasing", g2.Token, g.Token)
	}
	release(hc)
	pttl, err := c.Do(ctx, c.B().Pttl().Key(meta).Build()).AsInt64()
	if err != nil || pttl <= 0 {
		t.Fatalf("PTTL of the idle semaphore = %d, %v; want > 0", pttl, err)
	}
}

// leaseWorld starts a Redis with namespace ns marked intact (a fresh server
// is not a restart here) and a lease for each of sids, and returns a client
// of it, a ctx and the scripts' Env.
func leaseWorld(t *testing.T, sids ...string) (string, rueidis.Client, context.Context, scripts.Env) {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	c := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 10*time.Second)
	testutil.InitEpoch(t, srv.Addr(), ns)
	e := scripts.Env{C: c, K: scripts.NewKeys(ns), Grace: time.Minute}
	for _, sid := range sids {
		if ok, _, err := e.OpenLease(ctx, sid, "test", time.Minute, 0); err != nil || !ok {
			t.Fatalf("OpenLease(%s) = %v, %v", sid, ok, err)
		}
	}
	return ns, c, ctx, e
}
