package scripts

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
)

// checkBatch sends calls one by one with one in single's world, and as one
// flight in batch's (set up alike), sending each call the flight answered
// slow with one again; it checks that every call got the same reply in
// both (same), that wantSlow of them were slow, and that both worlds hold
// the same state afterwards.
func checkBatch[C, R any](t *testing.T, single, batch *batchWorld, calls []C,
	one func(*batchWorld, C) R, flight func(*batchWorld, []C) []R,
	slow func(R) bool, same func(got, want R) bool, wantSlow int) {
	t.Helper()
	want := make([]R, len(calls))
	for i, x := range calls {
		want[i] = one(single, x)
	}
	got := flight(batch, calls)
	n := 0
	for i, x := range calls {
		r := got[i]
		if slow(r) {
			n++
			r = one(batch, x)
		}
		if !same(r, want[i]) {
			t.Errorf("call %d %+v: batch %+v (slow %v), single %+v", i, x, r, slow(got[i]), want[i])
		}
	}
	if n != wantSlow {
		t.Errorf("%d calls answered slow, want %d", n, wantSlow)
	}
	if s, b := single.state(), batch.state(); !slices.Equal(s, b) {
		t.Errorf("state after the calls differs:\nsingle %v\nbatch  %v", s, b)
	}
}

// checkAcquireBatch is checkBatch for acquire attempts.
func checkAcquireBatch[C any](t *testing.T, single, batch *batchWorld, calls []C,
	one func(*batchWorld, C) (Grant, error), flight func(*batchWorld, []C) []attemptResult, wantSlow int) {
	t.Helper()
	checkBatch(t, single, batch, calls, func(w *batchWorld, x C) (r attemptResult) {
		r.g, r.err = one(w, x)
		return r
	}, flight, func(r attemptResult) bool { return r.slow }, func(r, w attemptResult) bool {
		return fmt.Sprint(r.err) == fmt.Sprint(w.err) && r.g.Status == w.g.Status && r.g.Position == w.g.Position &&
			r.g.Resource == w.g.Resource && (r.g.Wait > 0) == (w.g.Wait > 0)
	}, wantSlow)
}

// checkReleaseBatch is checkBatch for releases.
func checkReleaseBatch[C any](t *testing.T, single, batch *batchWorld, calls []C,
	one func(*batchWorld, C) (Released, error), flight func(*batchWorld, []C) []releaseResult, wantSlow int) {
	t.Helper()
	checkBatch(t, single, batch, calls, func(w *batchWorld, x C) (r releaseResult) {
		r.r, r.err = one(w, x)
		return r
	}, flight, func(r releaseResult) bool { return r.slow }, func(r, w releaseResult) bool {
		return fmt.Sprint(r.err) == fmt.Sprint(w.err) && r.r == w.r
	}, wantSlow)
}

// kindAcquire and kindRelease send one call with the single scripts.
func kindAcquire(w *batchWorld, x kindCall) (Grant, error) {
	return w.e.acquireCall(w.ctx, x)
}
func kindRelease(w *batchWorld, x kindCall) (Released, error) {
	return w.e.release(w.ctx, x.r, x.hid, false)
}

// TestSemBatchScriptsMatchSingle: a batch of semaphore acquire attempts,
// and one of releases, leaves Redis as the single scripts sent one by one
// in the same order do, and answers each call as the single script would,
// or R_SLOW without writing anything, which the single script then
// answers.
func TestSemBatchScriptsMatchSingle(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sem := func(name string, n, limit int64) Resource {
		return Resource{Kind: Semaphore, Name: name, N: n, Limit: limit}
	}
	setup := func(w *batchWorld) {
		for _, x := range []struct {
			r   Resource
			hid string
		}{
			{sem("idle", 1, 2), HoldID("b", 9)},
			{sem("full", 1, 1), HoldID("b", 1)},
			{sem("some", 1, 3), HoldID("b", 2)},
			{sem("mine", 1, 2), HoldID("a", 7)},
			{sem("queued", 1, 1), HoldID("b", 3)},
		} {
			if g, err := w.e.acquire(ctx, x.r, x.hid, false); err != nil || g.Status != Granted {
				t.Fatalf("grant %+v to %s: %+v, %v", x.r, x.hid, g, err)
			}
		}
		if r, err := w.e.release(ctx, sem("idle", 1, 2), HoldID("b", 9), false); err != nil || r != Freed {
			t.Fatalf("release: %v, %v", r, err)
		}
		if g, err := w.e.acquire(ctx, sem("queued", 1, 1), HoldID("c", 3), true); err != nil || g.Status != Busy {
			t.Fatalf("queue c.3: %+v, %v", g, err)
		}
		w.e.withdrawForTest(ctx, t, HoldID("a", 8))
	}
	attempts := []kindCall{
		{r: sem("idle", 1, 2), hid: HoldID("a", 1)},                // fits, has a token: granted
		{r: sem("idle", 1, 2), hid: HoldID("a", 2)},                // the second permit: granted
		{r: sem("idle", 1, 2), hid: HoldID("a", 3)},                // full now: slow (busy)
		{r: sem("some", 2, 3), hid: HoldID("a", 4)},                // two of three, one held: granted
		{r: sem("fresh", 1, 2), hid: HoldID("a", 5)},               // no meta yet: slow (granted)
		{r: sem("full", 1, 1), hid: HoldID("a", 6), wait: true},    // held: slow (queued)
		{r: sem("mine", 1, 2), hid: HoldID("a", 7)},                // a retried grant: slow
		{r: sem("idle", 1, 2), hid: HoldID("a", 8)},                // withdrawn: slow
		{r: sem("some", 1, 5), hid: HoldID("a", 9)},                // another limit: slow (mismatch)
		{r: sem("queued", 1, 1), hid: HoldID("a", 10), wait: true}, // waiters: slow (queued)
	}
	single, batch := newBatchWorld(t, ctx, c), newBatchWorld(t, ctx, c)
	setup(single)
	setup(batch)
	semAcq := func(w *batchWorld, xs []kindCall) []attemptResult { return w.e.semAcquireFlight(ctx, xs) }
	semRel := func(w *batchWorld, xs []kindCall) []releaseResult { return w.e.semReleaseFlight(ctx, xs) }
	checkAcquireBatch(t, single, batch, attempts, kindAcquire, semAcq, 7)
	checkReleaseBatch(t, single, batch, []kindCall{
		{r: sem("idle", 1, 2), hid: HoldID("a", 1)},  // one of two holders: freed
		{r: sem("idle", 1, 2), hid: HoldID("a", 2)},  // the last: freed, idle expiry
		{r: sem("some", 2, 3), hid: HoldID("a", 4)},  // freed
		{r: sem("some", 1, 3), hid: HoldID("a", 99)}, // not held: slow
		{r: sem("full", 1, 1), hid: HoldID("b", 1)},  // a waiter to serve: slow
	}, kindRelease, semRel, 2)
}

// TestPoolBatchScriptsMatchSingle: as TestSemBatchScriptsMatchSingle, for
// the pool's batch scripts.
func TestPoolBatchScriptsMatchSingle(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pool := func(name, key string) Resource { return Resource{Kind: Pool, Name: name, Key: key} }
	setup := func(w *batchWorld) {
		for name, members := range map[string][]string{
			"two": {"m1", "m2"}, "one": {"x"}, "busy": {"y"}, "queued": {"z"}, "mine": {"w1", "w2"},
		} {
			if _, _, err := w.e.PoolChange(ctx, name, "add", members); err != nil {
				t.Fatal(err)
			}
		}
		for _, x := range []struct {
			r   Resource
			hid string
		}{
			{pool("busy", ""), HoldID("b", 1)},
			{pool("queued", ""), HoldID("b", 2)},
			{pool("mine", "w1"), HoldID("a", 7)},
		} {
			if g, err := w.e.acquire(ctx, x.r, x.hid, false); err != nil || g.Status != Granted {
				t.Fatalf("grant %+v to %s: %+v, %v", x.r, x.hid, g, err)
			}
		}
		if g, err := w.e.acquire(ctx, pool("queued", ""), HoldID("c", 2), true); err != nil || g.Status != Busy {
			t.Fatalf("queue c.2: %+v, %v", g, err)
		}
		w.e.withdrawForTest(ctx, t, HoldID("a", 8))
		// A stale index entry: a.11 named as the holder of s1, which nobody holds.
		if _, _, err := w.e.PoolChange(ctx, "stale", "add", []string{"s1"}); err != nil {
			t.Fatal(err)
		}
		idx := w.e.K.PoolBase("stale") + keyPoolIndex + "a"
		if err := c.Do(ctx, c.B().Hset().Key(idx).FieldValue().FieldValue(HoldID("a", 11), "s1").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	attempts := []kindCall{
		{r: pool("two", ""), hid: HoldID("a", 1)},                // granted: m1
		{r: pool("two", "m2"), hid: HoldID("a", 2)},              // granted: m2
		{r: pool("two", ""), hid: HoldID("a", 3)},                // none free: slow (busy)
		{r: pool("one", "nope"), hid: HoldID("a", 4)},            // not a member: slow
		{r: pool("busy", ""), hid: HoldID("a", 5), wait: true},   // held: slow (queued)
		{r: pool("mine", "w2"), hid: HoldID("a", 7)},             // a retried grant: slow
		{r: pool("mine", ""), hid: HoldID("a", 7)},               // the same for any member: slow, w2 stays free
		{r: pool("one", ""), hid: HoldID("a", 8)},                // withdrawn: slow
		{r: pool("queued", ""), hid: HoldID("a", 9), wait: true}, // waiters: slow (queued)
		{r: pool("one", "x"), hid: HoldID("a", 10)},              // granted: x
		{r: pool("stale", ""), hid: HoldID("a", 11)},             // a stale index entry: slow, then granted s1
	}
	single, batch := newBatchWorld(t, ctx, c), newBatchWorld(t, ctx, c)
	setup(single)
	setup(batch)
	poolAcq := func(w *batchWorld, xs []kindCall) []attemptResult { return w.e.poolAcquireFlight(ctx, xs) }
	poolRel := func(w *batchWorld, xs []kindCall) []releaseResult { return w.e.poolReleaseFlight(ctx, xs) }
	checkAcquireBatch(t, single, batch, attempts, kindAcquire, poolAcq, 8)
	// The fast path learns that an attempt is a retry from its HSETNX of
	// the index entry, after it chose a member: which must stay free, with
	// its score (0: never released).
	for _, w := range []*batchWorld{single, batch} {
		if sc, err := w.c.Do(ctx, w.c.B().Zscore().Key(w.e.K.PoolFree("mine")).Member("w2").Build()).ToString(); err != nil || sc != "0" {
			t.Errorf("after a retried grant, w2's score in the free set: %q, %v; want \"0\"", sc, err)
		}
	}
	checkReleaseBatch(t, single, batch, []kindCall{
		{r: pool("two", ""), hid: HoldID("a", 1)},   // freed: m1, the most recently released
		{r: pool("two", "m2"), hid: HoldID("a", 2)}, // freed: m2, after m1
		{r: pool("one", ""), hid: HoldID("a", 99)},  // not held: slow
		{r: pool("busy", ""), hid: HoldID("b", 1)},  // a waiter to serve: slow
		{r: pool("one", "x"), hid: HoldID("a", 10)}, // freed
	}, kindRelease, poolRel, 2)
}

// TestRWBatchScriptsMatchSingle: as TestSemBatchScriptsMatchSingle, for
// the read-write mutex's acquire batch script.
func TestRWBatchScriptsMatchSingle(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rw := func(name string, shared bool) Resource { return Resource{Kind: RWMutex, Name: name, Shared: shared} }
	setup := func(w *batchWorld) {
		for _, x := range []struct {
			r   Resource
			hid string
		}{
			{rw("idle", false), HoldID("b", 9)},   // released below: a token, nobody holds
			{rw("ridle", true), HoldID("b", 8)},   // likewise, last held by a reader
			{rw("held", false), HoldID("b", 1)},   // a live writer
			{rw("marked", false), HoldID("b", 2)}, // a live writer, and c.2 waits
			{rw("mine", true), HoldID("a", 7)},    // a's reader: retried below
		} {
			if g, err := w.e.acquire(ctx, x.r, x.hid, false); err != nil || g.Status != Granted {
				t.Fatalf("grant %+v to %s: %+v, %v", x.r, x.hid, g, err)
			}
		}
		for _, x := range []struct {
			r   Resource
			hid string
		}{{rw("idle", false), HoldID("b", 9)}, {rw("ridle", true), HoldID("b", 8)}} {
			if r, err := w.e.release(ctx, x.r, x.hid, false); err != nil || r != Freed {
				t.Fatalf("release %+v: %v, %v", x.r, r, err)
			}
		}
		if g, err := w.e.acquire(ctx, rw("marked", true), HoldID("c", 2), true); err != nil || g.Status != Busy {
			t.Fatalf("queue c.2: %+v, %v", g, err)
		}
		w.e.withdrawForTest(ctx, t, HoldID("a", 8))
	}
	attempts := []kindCall{
		{r: rw("idle", false), hid: HoldID("a", 1)},               // free, a token: granted
		{r: rw("idle", true), hid: HoldID("a", 2)},                // a writer holds now: busy
		{r: rw("ridle", true), hid: HoldID("a", 3)},               // free: granted (read)
		{r: rw("ridle", true), hid: HoldID("a", 4)},               // another reader: granted
		{r: rw("ridle", false), hid: HoldID("a", 5)},              // readers hold: slow (busy)
		{r: rw("fresh", false), hid: HoldID("a", 6)},              // no token yet: slow (granted)
		{r: rw("held", false), hid: HoldID("a", 9), wait: true},   // a live writer: queued
		{r: rw("held", true), hid: HoldID("a", 10), wait: true},   // behind it: queued second
		{r: rw("mine", true), hid: HoldID("a", 7)},                // a retried grant: slow
		{r: rw("idle", false), hid: HoldID("a", 8)},               // withdrawn: slow
		{r: rw("marked", true), hid: HoldID("a", 11), wait: true}, // a live writer, waiters: queued
	}
	single, batch := newBatchWorld(t, ctx, c), newBatchWorld(t, ctx, c)
	setup(single)
	setup(batch)
	rwAcq := func(w *batchWorld, xs []kindCall) []attemptResult { return w.e.rwAcquireFlight(ctx, xs) }
	checkAcquireBatch(t, single, batch, attempts, kindAcquire, rwAcq, 4)
}

// TestRWReleaseBatchMatchesSingle: as TestSemBatchScriptsMatchSingle, for
// the read-write mutex's release batch script (writers' releases).
func TestRWReleaseBatchMatchesSingle(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := func(name string) Resource { return Resource{Kind: RWMutex, Name: name} }
	setup := func(bw *batchWorld) {
		for _, x := range []struct {
			r   Resource
			hid string
		}{
			{w("one"), HoldID("a", 1)},
			{w("two"), HoldID("a", 2)},
			{w("other"), HoldID("b", 1)},
			{w("waited"), HoldID("a", 3)},
		} {
			if g, err := bw.e.acquire(ctx, x.r, x.hid, false); err != nil || g.Status != Granted {
				t.Fatalf("grant %+v to %s: %+v, %v", x.r, x.hid, g, err)
			}
		}
		if g, err := bw.e.acquire(ctx, w("waited"), HoldID("c", 1), true); err != nil || g.Status != Busy {
			t.Fatalf("queue c.1: %+v, %v", g, err)
		}
	}
	single, batch := newBatchWorld(t, ctx, c), newBatchWorld(t, ctx, c)
	setup(single)
	setup(batch)
	rwRel := func(bw *batchWorld, xs []kindCall) []releaseResult { return bw.e.rwReleaseFlight(ctx, xs) }
	checkReleaseBatch(t, single, batch, []kindCall{
		{r: w("one"), hid: HoldID("a", 1)},    // freed, idle expiry
		{r: w("other"), hid: HoldID("a", 9)},  // not held by it: slow
		{r: w("waited"), hid: HoldID("a", 3)}, // a waiter to hand over to: slow
		{r: w("two"), hid: HoldID("a", 2)},    // freed
		{r: w("one"), hid: HoldID("a", 1)},    // already released: slow
	}, kindRelease, rwRel, 3)
}
