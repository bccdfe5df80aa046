package mutex_test

import (
	"context"
	"errors"
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
		waitFor(t, ctx, func() bool {
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

// waitFor polls cond: it observes Redis state that has no event to wait on.
func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not reached")
		case <-time.After(2 * time.Millisecond):
		}
	}
}
