package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// grantSlack bounds how long after a lock delay's end a waiter is granted:
// it re-checks when the delay ends (the reply's wait hint), not on its 1 s
// fallback for an unknown wait.
const grantSlack = 400 * time.Millisecond

// pttl returns the remaining TTL of key k (negative: none, or no key).
func pttl(t *testing.T, ctx context.Context, probe rueidis.Client, k string) time.Duration {
	t.Helper()
	ms, err := probe.Do(ctx, probe.B().Pttl().Key(k).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ms) * time.Millisecond
}

// TestLockDelay: the permits of a hold whose session's lease is gone (lost,
// not released) stay in use for that session's LockDelay from when a
// request notices the loss, then come back: to TryAcquire, and to a waiting
// Acquire within grantSlack of the delay's end. Only the lost permits are
// delayed, and the lost hold is no live holder in Stats.
func TestLockDelay(t *testing.T) {
	for _, mode := range []string{"TryAcquire", "Acquire"} {
		t.Run(mode, func(t *testing.T) {
			addr := redistest.Addr(t)
			ns := redistest.Namespace(t)
			ctx := testutil.Ctx(t, 30*time.Second)
			const delay = 400 * time.Millisecond
			a, crashA := testutil.Crashable(t, ctx, addr, ns, session.Options{TTL: 3 * time.Second, LockDelay: delay})
			b := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second})
			semB := semaphore.New(b, "ld", 3)
			lost, err := semaphore.New(a, "ld", 3).TryAcquire(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			crashA()
			start := time.Now()
			// The first request that does not fit notices the loss.
			if _, err := semB.TryAcquire(ctx, 2); !errors.Is(err, semaphore.ErrNoPermits) {
				t.Fatalf("TryAcquire(2) right after the holder was lost: %v, want ErrNoPermits (lock delay)", err)
			}
			one, err := semB.TryAcquire(ctx, 1)
			if err != nil {
				t.Fatalf("TryAcquire(1) of the permit the lost hold did not have: %v", err)
			}
			wantStats(t, stats(t, ctx, semB), 3, 0, holder{b.ID(), 1, one.Token()})
			release(t, ctx, one)

			var h *session.Hold
			if mode == "TryAcquire" {
				testutil.WaitFor(t, ctx, func() bool {
					h, err = semB.TryAcquire(ctx, 2)
					if err != nil && !errors.Is(err, semaphore.ErrNoPermits) {
						t.Fatalf("TryAcquire(2): %v", err)
					}
					return err == nil
				})
			} else {
				results := make(chan acquired, 1)
				acquireAsync(ctx, semB, 2, 0, results)
				r := receive(t, results, delay+grantSlack, "waiter for the lost permits")
				if r.err != nil {
					t.Fatal(r.err)
				}
				h = r.h
			}
			waited := time.Since(start)
			t.Logf("%s granted the lost permits %v after the loss was noticed (LockDelay %v)", mode, waited, delay)
			if waited < delay-2*time.Millisecond {
				t.Fatalf("granted %v after the loss was noticed; LockDelay is %v", waited, delay)
			}
			if mode == "Acquire" && waited > delay+grantSlack {
				t.Fatalf("waiter granted %v after the loss was noticed, over %v past the LockDelay %v", waited, grantSlack, delay)
			}
			if h.Token() <= lost.Token() {
				t.Fatalf("token %d after the lost hold's %d", h.Token(), lost.Token())
			}
			wantStats(t, stats(t, ctx, semB), 3, 0, holder{b.ID(), 2, h.Token()})
			release(t, ctx, h)
		})
	}
}

// TestLockDelayOnlyForLostHolds: a released hold's permits come back at
// once whatever its session's LockDelay, and so do a lost hold's when its
// session has none; lost at the same time as one with a LockDelay, only
// the latter's permits stay in use.
func TestLockDelayOnlyForLostHolds(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const delay = 10 * time.Second // far beyond the test: nothing here waits for it
	a, crashA := testutil.Crashable(t, ctx, addr, ns, session.Options{TTL: 3 * time.Second, LockDelay: delay})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second})
	c, crashC := testutil.Crashable(t, ctx, addr, ns, session.Options{TTL: 3 * time.Second})
	semA, semB, semC := semaphore.New(a, "only", 3), semaphore.New(b, "only", 3), semaphore.New(c, "only", 3)

	// Released: back at once.
	h, err := semA.TryAcquire(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	release(t, ctx, h)
	h, err = semB.TryAcquire(ctx, 3)
	if err != nil {
		t.Fatalf("TryAcquire(3) after a Release by a session with LockDelay %v: %v", delay, err)
	}
	release(t, ctx, h)

	// Lost, one session with a LockDelay and one without.
	if _, err := semA.TryAcquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := semC.TryAcquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	crashA()
	crashC()
	if _, err := semB.TryAcquire(ctx, 3); !errors.Is(err, semaphore.ErrNoPermits) {
		t.Fatalf("TryAcquire(3) with a lost hold in its LockDelay: %v, want ErrNoPermits", err)
	}
	h, err = semB.TryAcquire(ctx, 2)
	if err != nil {
		t.Fatalf("TryAcquire(2) of the permits lost by a session without LockDelay: %v", err)
	}
	if _, err := semB.TryAcquire(ctx, 1); !errors.Is(err, semaphore.ErrNoPermits) {
		t.Fatalf("TryAcquire(1) of the permit in its LockDelay: %v, want ErrNoPermits", err)
	}
	wantStats(t, stats(t, ctx, semB), 3, 0, holder{b.ID(), 2, h.Token()})
	release(t, ctx, h)
}

// TestLockDelayKeepsKeys: a lock delay that starts when the semaphore's
// keys would expire before its end keeps them until it ends (the delay is
// still honoured), and once it has ended and nothing is held the keys
// expire again.
func TestLockDelayKeepsKeys(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const (
		ttl   = 500 * time.Millisecond
		delay = 2 * time.Second
	)
	a, crashA := testutil.Crashable(t, ctx, addr, ns, session.Options{TTL: ttl, LockDelay: delay})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second})
	probe := testutil.Client(t, addr)
	meta := "{" + ns + "}:sem:keep"
	semB := semaphore.New(b, "keep", 1)
	if _, err := semaphore.New(a, "keep", 1).TryAcquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	crashA()
	// Nothing renews the keys now: wait until they would expire well
	// before a delay started now could end.
	testutil.WaitFor(t, ctx, func() bool {
		d := pttl(t, ctx, probe, meta)
		if d < 0 {
			t.Fatalf("semaphore key gone (PTTL %v) before the loss was noticed", d)
		}
		return d < delay/4
	})
	start := time.Now()
	if _, err := semB.TryAcquire(ctx, 1); !errors.Is(err, semaphore.ErrNoPermits) {
		t.Fatalf("TryAcquire right after the loss was noticed: %v, want ErrNoPermits (lock delay)", err)
	}
	if d := pttl(t, ctx, probe, meta); d < delay-time.Since(start)-2*time.Millisecond {
		t.Fatalf("semaphore key PTTL %v with a lock delay of %v started %v ago", d, delay, time.Since(start))
	}
	var h *session.Hold
	testutil.WaitFor(t, ctx, func() bool {
		var err error
		h, err = semB.TryAcquire(ctx, 1)
		if err != nil && !errors.Is(err, semaphore.ErrNoPermits) {
			t.Fatalf("TryAcquire: %v", err)
		}
		return err == nil
	})
	if waited := time.Since(start); waited < delay-2*time.Millisecond {
		t.Fatalf("granted %v after the loss was noticed; LockDelay is %v", waited, delay)
	}
	release(t, ctx, h)
	// Idle again: kept twice b's TTL (see "Idle resources expire").
	if d := pttl(t, ctx, probe, meta); d <= 0 || d > 2*3*time.Second {
		t.Fatalf("idle semaphore key PTTL %v, want within (0, %v]", d, 2*3*time.Second)
	}
}

// TestLockDelayIdleRelease: a release that leaves the semaphore idle while
// another hold's lock delay runs keeps its key until the delay ends, and
// the delay still holds its permits.
func TestLockDelayIdleRelease(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const delay = 3 * time.Second
	a, crashA := testutil.Crashable(t, ctx, addr, ns, session.Options{TTL: 3 * time.Second, LockDelay: delay})
	// b's idle expiry (2 x TTL) is far below the delay.
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 500 * time.Millisecond})
	probe := testutil.Client(t, addr)
	meta := "{" + ns + "}:sem:idle"
	semB := semaphore.New(b, "idle", 2)
	if _, err := semaphore.New(a, "idle", 2).TryAcquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	crashA()
	start := time.Now()
	if _, err := semB.TryAcquire(ctx, 2); !errors.Is(err, semaphore.ErrNoPermits) {
		t.Fatalf("TryAcquire(2) with a permit in its lock delay: %v, want ErrNoPermits", err)
	}
	h, err := semB.TryAcquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	release(t, ctx, h)
	if d := pttl(t, ctx, probe, meta); d < delay-time.Since(start)-2*time.Millisecond {
		t.Fatalf("semaphore key PTTL %v after an idle release, with a lock delay of %v started %v ago", d, delay, time.Since(start))
	}
	if _, err := semB.TryAcquire(ctx, 2); !errors.Is(err, semaphore.ErrNoPermits) && time.Since(start) < delay {
		t.Fatalf("TryAcquire(2) after an idle release, during the lock delay: %v, want ErrNoPermits", err)
	}
}
