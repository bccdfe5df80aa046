package scripts_test

import (
	"slices"
	"testing"

	"github.com/leasehold/leasehold/internal/scripts"
)

// TestVerify: verify.lua reports exactly the holds whose resource no
// longer records them, for every kind: none while all are recorded; each
// once its keys are gone, as after a failover to a replica that missed the
// grants; and all of them once the lease is gone.
func TestVerify(t *testing.T) {
	_, c, ctx, e := leaseWorld(t, "a")
	if _, _, err := e.PoolChange(ctx, "p", "add", []string{"k"}); err != nil {
		t.Fatal(err)
	}
	resources := []scripts.Resource{
		{Kind: scripts.Mutex, Name: "m"},
		{Kind: scripts.Semaphore, Name: "s", N: 1, Limit: 2},
		{Kind: scripts.Pool, Name: "p"},
		{Kind: scripts.Election, Name: "e", Value: "v"},
		{Kind: scripts.RWMutex, Name: "w"},
		{Kind: scripts.RWMutex, Name: "r", Shared: true},
	}
	// The keys that record each hold.
	keys := [][]string{
		{e.K.Mutex("m")},
		{e.K.SemaphoreHolders("s")},
		{e.K.PoolBase("p") + "h"},
		{e.K.Election("e")},
		{e.K.RWMutex("w")},
		{e.K.RWMutexReaders("r")},
	}
	var held []scripts.Held
	for i, r := range resources {
		hid := scripts.HoldID("a", uint64(i+1))
		g, err := e.Acquire(ctx, r, hid, false)
		if err != nil || g.Status != scripts.Granted {
			t.Fatalf("%v: %+v, %v", r.Kind, g, err)
		}
		held = append(held, scripts.Held{R: r, HoldID: hid, Token: g.Token, Member: g.Resource})
	}
	if lost, err := e.Verify(ctx, "a", held); err != nil || len(lost) != 0 {
		t.Fatalf("Verify with every hold recorded = %v, %v; want none", lost, err)
	}
	var want []string
	for i, h := range held {
		if err := c.Do(ctx, c.B().Del().Key(keys[i]...).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		want = append(want, h.HoldID)
		lost, err := e.Verify(ctx, "a", held)
		if err != nil || !slices.Equal(lost, want) {
			t.Fatalf("Verify after deleting the keys of %v = %v, %v; want %v", held[:i+1], lost, err, want)
		}
	}
	if err := c.Do(ctx, c.B().Del().Key(e.K.Lease("a")).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if lost, err := e.Verify(ctx, "a", held[:1]); err != nil || len(lost) != 1 {
		t.Fatalf("Verify without the lease = %v, %v; want every hold", lost, err)
	}
}
