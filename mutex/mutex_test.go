package mutex_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.LeakOptions...) }

func TestLockTryLockRelease(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	a := testutil.Dial(t, addr, ns, session.Options{TTL: 2 * time.Second})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 2 * time.Second})

	h, err := mutex.New(a, "m").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if h.Resource() != "m" || h.Token() <= 0 || h.Err() != nil {
		t.Fatalf("hold: resource %q token %d err %v", h.Resource(), h.Token(), h.Err())
	}
	if _, err := mutex.New(b, "m").TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock of a held mutex: got %v, want ErrLocked", err)
	}
	info, err := mutex.New(b, "m").Holder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Session != a.ID() || info.Token != h.Token() || info.TTL <= 0 || info.Owner == "" {
		t.Fatalf("Holder = %+v, want session %s token %d", info, a.ID(), h.Token())
	}
	if err := h.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if !errors.Is(h.Err(), session.ErrReleased) {
		t.Fatalf("hold Err after Release = %v, want ErrReleased", h.Err())
	}
	if err := h.Release(ctx); err != nil {
		t.Fatalf("second Release: %v, want nil", err)
	}
	h2, err := mutex.New(b, "m").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock of a free mutex: %v", err)
	}
	if h2.Token() <= h.Token() {
		t.Fatalf("token %d after %d: not increasing", h2.Token(), h.Token())
	}
	if err := h2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestContention: 4 sessions x 8 goroutines share one mutex for 2,000
// acquisitions; a checker sees no overlap and strictly increasing tokens.
func TestContention(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 2*time.Minute)
	const sessions, workers, total = 4, 8, 2000
	var (
		inside   atomic.Int32
		overlaps atomic.Int32
		mu       sync.Mutex
		tokens   []int64
		left     atomic.Int64
	)
	left.Store(total)
	var wg sync.WaitGroup
	errs := make(chan error, sessions*workers)
	for range sessions {
		s := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
		for range workers {
			wg.Go(func() {
				m := mutex.New(s, "contended")
				for left.Add(-1) >= 0 {
					h, err := m.Lock(ctx)
					if err != nil {
						errs <- err
						return
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					mu.Lock()
					tokens = append(tokens, h.Token())
					mu.Unlock()
					inside.Add(-1)
					if err := h.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("worker: %v", err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping critical sections", n)
	}
	if len(tokens) != total {
		t.Fatalf("%d acquisitions, want %d", len(tokens), total)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d at acquisition %d after %d: not strictly increasing", tokens[i], i, tokens[i-1])
		}
	}
}

// TestFIFO: waiters from several sessions are served in arrival order.
func TestFIFO(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	var ss []*session.Session
	for range 3 {
		ss = append(ss, testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second}))
	}
	first, err := mutex.New(ss[0], "fifo").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	order := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			h, err := mutex.New(ss[i%3], "fifo").Lock(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- i
			if err := h.Release(ctx); err != nil {
				t.Errorf("waiter %d release: %v", i, err)
			}
		})
		testutil.WaitFor(t, ctx, func() bool {
			info, err := mutex.New(ss[0], "fifo").Holder(ctx)
			return err == nil && info.Waiters == i+1
		})
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("waiter %d served at position %d", got, want)
		}
		want++
	}
	if want != n {
		t.Fatalf("%d waiters served, want %d", want, n)
	}
}

// TestResetEndsOnlyThatHold: Reset by another client ends only that hold
// with ErrLost within one heartbeat interval, through the heartbeat (the
// holder never subscribed) and through the notification (it did); the next
// waiter gets the mutex; the stale holder cannot release the new grant.
func TestResetEndsOnlyThatHold(t *testing.T) {
	for _, subscribed := range []bool{false, true} {
		t.Run("subscribed="+strconv.FormatBool(subscribed), func(t *testing.T) {
			addr := redistest.Addr(t)
			ns := redistest.Namespace(t)
			ctx := testutil.Ctx(t, 30*time.Second)
			const ttl = 900 * time.Millisecond
			a := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
			b := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
			admin := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})

			var h1 *session.Hold
			var err error
			if subscribed {
				h1, err = mutex.New(a, "r1").Lock(ctx) // Lock subscribes
			} else {
				h1, err = mutex.New(a, "r1").TryLock(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			h2, err := mutex.New(a, "r2").TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan *session.Hold, 1)
			go func() {
				h, err := mutex.New(b, "r1").Lock(ctx)
				if err != nil {
					t.Error(err)
				}
				got <- h
			}()
			testutil.WaitFor(t, ctx, func() bool {
				in, err := mutex.New(admin, "r1").Holder(ctx)
				return err == nil && in.Waiters == 1
			})
			reset := time.Now()
			if ok, err := mutex.New(admin, "r1").Reset(ctx); err != nil || !ok {
				t.Fatalf("Reset = %v, %v; want true", ok, err)
			}
			testutil.EndsTakenAway(t, "Reset", h1, h2, a, reset, ttl/3)
			hb := <-got
			if hb == nil || hb.Token() <= h1.Token() {
				t.Fatal("waiter not granted with a newer token after Reset")
			}
			if err := h1.Release(ctx); !errors.Is(err, session.ErrLost) {
				t.Fatalf("Release of the reset hold: %v, want ErrLost", err)
			}
			in, err := mutex.New(admin, "r1").Holder(ctx)
			if err != nil || in.Session != b.ID() || in.Token != hb.Token() {
				t.Fatalf("after stale Release: Holder = %+v, %v; want session %s token %d", in, err, b.ID(), hb.Token())
			}
			if err := h2.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWaiterLeaseLost: a waiter whose own session dies stops waiting with
// ErrLeaseLost, and is never granted the mutex afterwards.
func TestWaiterLeaseLost(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = 600 * time.Millisecond
	a := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	probe := testutil.Client(t, addr)

	h, err := mutex.New(a, "w").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := mutex.New(b, "w").Lock(ctx)
		errc <- err
	}()
	testutil.WaitFor(t, ctx, func() bool {
		in, err := mutex.New(a, "w").Holder(ctx)
		return err == nil && in.Waiters == 1
	})
	// The waiter's lease disappears (as if it had expired).
	if err := probe.Do(ctx, probe.B().Del().Key("{"+ns+"}:s:"+b.ID()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, session.ErrLeaseLost) {
			t.Fatalf("waiter: %v, want ErrLeaseLost", err)
		}
	case <-time.After(ttl):
		t.Fatal("waiter still waiting one TTL after its lease was gone")
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	in, err := mutex.New(a, "w").Holder(ctx)
	if err != nil || in.Session != "" {
		t.Fatalf("after release: Holder = %+v, %v; want free (dead waiter skipped)", in, err)
	}
}

// TestLockCanceledWithdraws: a waiter whose ctx ends leaves the queue and is
// never granted.
func TestLockCanceledWithdraws(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	a := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	h, err := mutex.New(a, "c").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := mutex.New(b, "c").Lock(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with an expiring ctx: %v, want DeadlineExceeded", err)
	}
	testutil.WaitFor(t, ctx, func() bool {
		in, err := mutex.New(a, "c").Holder(ctx)
		return err == nil && in.Waiters == 0
	})
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if in, err := mutex.New(a, "c").Holder(ctx); err != nil || in.Session != "" {
		t.Fatalf("Holder = %+v, %v; want free", in, err)
	}
}

// TestInvalidNames: bad names fail with ErrInvalidName and write nothing.
func TestInvalidNames(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, srv.Addr())
	keys := func() []string { return testutil.Keys(t, ctx, probe) }
	before, err := probe.Do(ctx, probe.B().Dbsize().Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	keysBefore := keys()
	for _, name := range testutil.InvalidNames() {
		m := mutex.New(s, name)
		if _, err := m.Lock(ctx); !errors.Is(err, session.ErrInvalidName) {
			t.Errorf("Lock(%.8q): %v, want ErrInvalidName", name, err)
		}
		if _, err := m.TryLock(ctx); !errors.Is(err, session.ErrInvalidName) {
			t.Errorf("TryLock(%.8q): %v, want ErrInvalidName", name, err)
		}
		if _, err := m.Holder(ctx); !errors.Is(err, session.ErrInvalidName) {
			t.Errorf("Holder(%.8q): %v, want ErrInvalidName", name, err)
		}
		if _, err := m.Reset(ctx); !errors.Is(err, session.ErrInvalidName) {
			t.Errorf("Reset(%.8q): %v, want ErrInvalidName", name, err)
		}
	}
	after, err := probe.Do(ctx, probe.B().Dbsize().Build()).AsInt64()
	if err != nil || after != before {
		t.Fatalf("DBSIZE %d → %d (%v): invalid input changed Redis", before, after, err)
	}
	if ks := keys(); !slices.Equal(ks, keysBefore) {
		t.Fatalf("keys %q → %q: invalid input changed Redis", keysBefore, ks)
	}

	// The probe is sound: the same calls on a valid name write.
	h, err := mutex.New(s, "café").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock on a valid non-ASCII name: %v", err)
	}
	if ks := keys(); slices.Equal(ks, keysBefore) {
		t.Fatal("a valid Lock wrote no key: the probe proves nothing")
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockDelay: a mutex whose holder was lost (its lease vanished, no
// Release) stays unavailable for the holder's LockDelay once that is noticed.
func TestLockDelay(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const delay = 400 * time.Millisecond
	a := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second, LockDelay: delay})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second})
	probe := testutil.Client(t, addr)
	if _, err := mutex.New(a, "ld").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := probe.Do(ctx, probe.B().Del().Key("{"+ns+"}:s:"+a.ID()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := mutex.New(b, "ld").TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock right after the holder was lost: %v, want ErrLocked (lock delay)", err)
	}
	h, err := mutex.New(b, "ld").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < delay-2*time.Millisecond {
		t.Fatalf("granted %v after the loss was noticed; lock delay is %v", waited, delay)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Release (not loss) imposes no delay.
	h2, err := mutex.New(b, "ld").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after a Release: %v", err)
	}
	_ = h2.Release(ctx)
}

// TestLockDelayAfterOwnLoss: a session that finds its own lease gone does
// not release its holds on the way out when it has a LockDelay: the lock
// delay starts when another session notices the loss, as if the holder had
// crashed. (Releasing them there, as a session without LockDelay does,
// would hand the mutex on at once: the chaos suite's holder-pause-lockdelay
// caught it, the holder's heartbeats stopped by SIGSTOP.)
func TestLockDelayAfterOwnLoss(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const delay = 2 * time.Second
	a := testutil.Dial(t, addr, ns, session.Options{TTL: time.Second, LockDelay: delay})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second})
	probe := testutil.Client(t, addr)
	h, err := mutex.New(a, "own").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.Do(ctx, probe.B().Del().Key("{"+ns+"}:s:"+a.ID()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	<-h.Done() // a's next heartbeat finds its lease gone
	if cause := context.Cause(h.Context()); !errors.Is(cause, session.ErrLeaseLost) {
		t.Fatalf("hold ended with %v, want ErrLeaseLost", cause)
	}
	_ = a.Close() // returns once a's way out (its cleanup in Redis) is done
	start := time.Now()
	if _, err := mutex.New(b, "own").TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock after the holder's session ended by loss: %v, want ErrLocked (lock delay)", err)
	}
	h2, err := mutex.New(b, "own").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < delay-2*time.Millisecond {
		t.Fatalf("granted %v after the loss was noticed; lock delay is %v", waited, delay)
	}
	_ = h2.Release(ctx)
}

// TestConcurrentCallsShareScriptCalls: the Lock and Release calls that many
// goroutines of one session make at once go to Redis together, several per
// script call (internal/scripts/batch.go), and each still gets exactly its
// own outcome: every Lock its own mutex, tokens increasing per mutex, and
// on a mutex shared by some of the goroutines never two holders at once.
func TestConcurrentCallsShareScriptCalls(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, addr, ns)
	ctx := testutil.Ctx(t, time.Minute)
	cc := &testutil.CountingClient{Client: testutil.Client(t, addr)}
	s, err := session.New(ctx, cc, session.Options{Namespace: ns, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const own, shared, rounds = 32, 8, 100
	sessions := make([]*session.Session, own+shared)
	names := make([]string, own+shared)
	for g := range names {
		sessions[g], names[g] = s, "shared"
		if g < own {
			names[g] = "own" + strconv.Itoa(g)
		}
	}
	before := cc.N.Load()
	if err := testutil.LockRounds(ctx, sessions, names, rounds); err != nil {
		t.Fatal(err)
	}
	// Alone, each Lock and each Release is one request: 2 per round.
	calls := 2 * (own + shared) * rounds
	reqs := cc.N.Load() - before
	t.Logf("%d requests for %d Lock and Release calls", reqs, calls)
	if reqs*4 > int64(calls)*3 {
		t.Fatalf("%d requests for %d calls: not sent together", reqs, calls)
	}
}
