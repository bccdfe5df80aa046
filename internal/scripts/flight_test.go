package scripts_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestFlightStoreFenced: only the live holder of a flight key's mutex
// stores, never below the newest token stored, and never a computation that
// Forget overtook; a rejected store writes nothing.
func TestFlightStoreFenced(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	c := testutil.Client(t, addr)
	ctx := testutil.Ctx(t, 10*time.Second)
	testutil.InitEpoch(t, addr, ns)
	e := scripts.Env{C: c, K: scripts.NewKeys(ns), Grace: time.Minute}
	const name = "g:k"
	m := scripts.Resource{Kind: scripts.Mutex, Name: scripts.FlightMutex(name)}
	for _, sid := range []string{"a", "b"} {
		if ok, _, err := e.OpenLease(ctx, sid, "test", time.Minute, 0); err != nil || !ok {
			t.Fatalf("OpenLease %s = %v, %v", sid, ok, err)
		}
	}
	grant := func(hid string) int64 {
		t.Helper()
		g, err := e.Acquire(ctx, m, hid, false)
		if err != nil || g.Status != scripts.Granted {
			t.Fatalf("Acquire %s = %+v, %v", hid, g, err)
		}
		return g.Token
	}
	get := func() scripts.FlightEntry {
		t.Helper()
		f, err := e.FlightGet(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	store := func(hid string, tok int64, isErr bool, v string, want scripts.FlightStored) {
		t.Helper()
		before := get()
		got, err := e.FlightStore(ctx, name, hid, tok, isErr, []byte(v), time.Minute, time.Minute)
		if err != nil || got != want {
			t.Fatalf("FlightStore(%s, %d, %q) = %v, %v; want %v", hid, tok, v, got, err, want)
		}
		if after := get(); want != scripts.FlightSaved && !sameEntry(before, after) {
			t.Fatalf("a rejected store changed the entry: %+v -> %+v", before, after)
		}
	}

	if f := get(); f.HasValue() || f.Latest() != 0 {
		t.Fatalf("empty entry read as %+v", f)
	}
	a1 := scripts.HoldID("a", 1)
	t1 := grant(a1)
	store(scripts.HoldID("b", 9), t1, false, "not the holder", scripts.FlightNotHolder)
	store(a1, t1, false, "v1", scripts.FlightSaved)
	if f := get(); string(f.Value) != "v1" || f.ValueToken != t1 || !f.ValueFresh || f.ErrToken != 0 {
		t.Fatalf("after store: %+v", f)
	}
	store(a1, t1-1, false, "older token", scripts.FlightStale)
	store(a1, t1, true, "boom", scripts.FlightSaved) // an error keeps the value for ServeStale
	if f := get(); string(f.Value) != "v1" || f.Err != "boom" || f.ErrToken != t1 || !f.ErrFresh {
		t.Fatalf("after error store: %+v", f)
	}
	if _, err := e.Release(ctx, m, a1, false); err != nil {
		t.Fatal(err)
	}
	store(a1, t1, false, "released", scripts.FlightNotHolder)

	// A holder whose lease is gone (expired, or its process paused past it)
	// cannot store, though the mutex still names it.
	b1 := scripts.HoldID("b", 1)
	t2 := grant(b1)
	if err := c.Do(ctx, c.B().Del().Key(e.K.Lease("b")).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	store(b1, t2, false, "lease gone", scripts.FlightNotHolder)

	// Forget while a computation runs: it cannot store afterwards; the next
	// holder can.
	a2 := scripts.HoldID("a", 2)
	t3 := grant(a2) // b's dead hold is cleared by the grant
	if had, err := e.FlightForget(ctx, name, time.Minute); err != nil || !had {
		t.Fatalf("FlightForget = %v, %v; want true", had, err)
	}
	if f := get(); f.HasValue() || f.Latest() != 0 {
		t.Fatalf("after Forget: %+v", f)
	}
	store(a2, t3, false, "overtaken", scripts.FlightForgotten)
	if _, err := e.Release(ctx, m, a2, false); err != nil {
		t.Fatal(err)
	}
	a3 := scripts.HoldID("a", 3)
	t4 := grant(a3)
	store(a3, t4, false, "v2", scripts.FlightSaved)
	if f := get(); string(f.Value) != "v2" || f.ValueToken != t4 || f.ErrToken != 0 {
		t.Fatalf("after store following Forget: %+v", f)
	}
	// The entry expires: kept at least keep, with a TTL.
	if pttl, err := c.Do(ctx, c.B().Pttl().Key(e.K.Flight(name)).Build()).AsInt64(); err != nil || pttl <= 0 {
		t.Fatalf("entry PTTL = %d, %v; want an expiry", pttl, err)
	}
}

func sameEntry(a, b scripts.FlightEntry) bool {
	return string(a.Value) == string(b.Value) && a.ValueToken == b.ValueToken && a.Err == b.Err && a.ErrToken == b.ErrToken
}
