package pool_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/session"
)

// grantSlack bounds how long after a lock delay's end a waiter is granted:
// it re-checks when the delay ends (the reply's wait hint), not on its 1 s
// fallback for an unknown wait.
const grantSlack = 400 * time.Millisecond

// TestLockDelay: a member held by a hold whose session's lease is gone
// (lost, not released) stays unavailable for that session's LockDelay from
// when a request notices the loss, then is granted: to TryAcquire, and to
// a waiting Acquire or AcquireKey within grantSlack of the delay's end.
// Meanwhile Stats shows it held by the lost session with no owner, not
// free; a released member is available at once.
func TestLockDelay(t *testing.T) {
	for _, mode := range []string{"TryAcquire", "Acquire", "AcquireKey"} {
		t.Run(mode, func(t *testing.T) {
			addr := redistest.Addr(t)
			ns := redistest.Namespace(t)
			ctx := testutil.Ctx(t, 30*time.Second)
			const delay = 400 * time.Millisecond
			a, crashA := testutil.Crashable(t, ctx, addr, ns, session.Options{TTL: 3 * time.Second, LockDelay: delay})
			b := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second})
			pb := pool.New(b, "ld")
			if err := pb.Add(ctx, "x", "y"); err != nil {
				t.Fatal(err)
			}
			lost, err := pool.New(a, "ld").AcquireKey(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			crashA()
			hy, err := pb.TryAcquire(ctx)
			if err != nil || hy.Resource() != "y" {
				t.Fatalf("TryAcquire with y free = %v, %v; want y", hy, err)
			}
			start := time.Now()
			// Nothing is free: this request notices the loss.
			if _, err := pb.TryAcquire(ctx); !errors.Is(err, pool.ErrExhausted) {
				t.Fatalf("TryAcquire right after the holder of x was lost: %v, want ErrExhausted (lock delay)", err)
			}
			st := stats(t, ctx, pb)
			if st.Free != 0 || len(st.Held) != 2 || !slices.Equal(st.Members, []string{"x", "y"}) ||
				st.Held[0] != (pool.Holder{Key: "x", Session: a.ID(), Token: lost.Token()}) || st.Held[1].Session != b.ID() {
				t.Fatalf("Stats during the lock delay = %+v; want x held by the lost session %s with no owner, y by %s",
					st, a.ID(), b.ID())
			}
			// A released member is available at once.
			if err := hy.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if hy, err = pb.TryAcquire(ctx); err != nil || hy.Resource() != "y" {
				t.Fatalf("TryAcquire after y's Release = %v, %v; want y", hy, err)
			}

			var h *session.Hold
			switch mode {
			case "TryAcquire":
				testutil.WaitFor(t, ctx, func() bool {
					h, err = pb.TryAcquire(ctx)
					if err != nil && !errors.Is(err, pool.ErrExhausted) {
						t.Fatalf("TryAcquire: %v", err)
					}
					return err == nil
				})
			default:
				done := make(chan error, 1)
				go func() {
					var err error
					if mode == "Acquire" {
						h, err = pb.Acquire(ctx)
					} else {
						h, err = pb.AcquireKey(ctx, "x")
					}
					done <- err
				}()
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(delay + grantSlack):
					t.Fatalf("%s not granted within %v of the loss", mode, delay+grantSlack)
				}
			}
			waited := time.Since(start)
			t.Logf("%s granted x %v after the loss was noticed (LockDelay %v)", mode, waited, delay)
			if waited < delay-2*time.Millisecond {
				t.Fatalf("granted %v after the loss was noticed; LockDelay is %v", waited, delay)
			}
			if mode != "TryAcquire" && waited > delay+grantSlack {
				t.Fatalf("waiter granted %v after the loss was noticed, over %v past the LockDelay %v", waited, grantSlack, delay)
			}
			if h.Resource() != "x" || h.Token() <= lost.Token() {
				t.Fatalf("got %q token %d; want x with a token above %d", h.Resource(), h.Token(), lost.Token())
			}
			if st := stats(t, ctx, pb); len(st.Held) != 2 || st.Held[0].Session != b.ID() || st.Held[0].Token != h.Token() {
				t.Fatalf("Stats after the lock delay = %+v; want x held by %s with token %d", st, b.ID(), h.Token())
			}
			for _, h := range []*session.Hold{h, hy} {
				if err := h.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestLockDelayOnlyForLostHolds: a released member is available at once
// whatever its session's LockDelay, and so is a lost one when its session
// has none; lost at the same time as one with a LockDelay, only the latter
// stays unavailable. Removing a member in its lock delay (an operator's
// action) drops it at once: added again, it is free.
func TestLockDelayOnlyForLostHolds(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const delay = 10 * time.Second // far beyond the test: nothing here waits for it
	a, crashA := testutil.Crashable(t, ctx, addr, ns, session.Options{TTL: 3 * time.Second, LockDelay: delay})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second})
	c, crashC := testutil.Crashable(t, ctx, addr, ns, session.Options{TTL: 3 * time.Second})
	pa, pb, pc := pool.New(a, "only"), pool.New(b, "only"), pool.New(c, "only")
	if err := pb.Add(ctx, "x", "y"); err != nil {
		t.Fatal(err)
	}

	// Released: available at once.
	var held []*session.Hold
	for _, k := range []string{"x", "y"} {
		h, err := pa.AcquireKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
	}
	for _, h := range held {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	held = nil
	for range 2 {
		h, err := pb.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("TryAcquire after Releases by a session with LockDelay %v: %v", delay, err)
		}
		held = append(held, h)
	}
	for _, h := range held {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Lost, by a session with a LockDelay and by one without.
	if _, err := pa.AcquireKey(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.AcquireKey(ctx, "y"); err != nil {
		t.Fatal(err)
	}
	crashA()
	crashC()
	hy, err := pb.TryAcquire(ctx)
	if err != nil || hy.Resource() != "y" {
		t.Fatalf("TryAcquire with y lost by a session without LockDelay = %v, %v; want y", hy, err)
	}
	if _, err := pb.TryAcquire(ctx); !errors.Is(err, pool.ErrExhausted) {
		t.Fatalf("TryAcquire with x in its LockDelay: %v, want ErrExhausted", err)
	}

	// Removed during its lock delay: gone at once, free when added again.
	if err := pb.Remove(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, ctx, pb); !slices.Equal(st.Members, []string{"y"}) {
		t.Fatalf("Members after removing x = %v, want [y]", st.Members)
	}
	if err := pb.Add(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	hx, err := pb.TryAcquire(ctx)
	if err != nil || hx.Resource() != "x" {
		t.Fatalf("TryAcquire after x was removed and added again = %v, %v; want x", hx, err)
	}
	for _, h := range []*session.Hold{hx, hy} {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
