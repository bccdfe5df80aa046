package rwmutex_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.LeakOptions...) }

// waitQueue waits until rw's queue is want: "r" and "w" per waiter, in order.
func waitQueue(t *testing.T, ctx context.Context, rw *rwmutex.RWMutex, want string) {
	t.Helper()
	testutil.WaitFor(t, ctx, func() bool { return queueOf(t, ctx, rw) == want })
}

func queueOf(t *testing.T, ctx context.Context, rw *rwmutex.RWMutex) string {
	t.Helper()
	st, err := rw.Holders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q := ""
	for _, w := range st.Queue {
		if w.Shared {
			q += "r"
		} else {
			q += "w"
		}
	}
	return q
}

func release(t *testing.T, ctx context.Context, hs ...*session.Hold) {
	t.Helper()
	for _, h := range hs {
		if err := h.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
}

// lock runs a blocking RLock or Lock in a goroutine and returns its result.
func lock(ctx context.Context, rw *rwmutex.RWMutex, shared bool) <-chan *session.Hold {
	got := make(chan *session.Hold, 1)
	go func() {
		var h *session.Hold
		var err error
		if shared {
			h, err = rw.RLock(ctx)
		} else {
			h, err = rw.Lock(ctx)
		}
		if err != nil {
			h = nil
		}
		got <- h
	}()
	return got
}

func recv(t *testing.T, ctx context.Context, c <-chan *session.Hold, what string) *session.Hold {
	t.Helper()
	select {
	case h := <-c:
		if h == nil {
			t.Fatalf("%s: not granted", what)
		}
		return h
	case <-ctx.Done():
		t.Fatalf("%s: not granted before the test's deadline", what)
		return nil
	}
}

func TestReadersShareWritersExclude(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 20*time.Second)
	a := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second})
	ra, rb := rwmutex.New(a, "cat"), rwmutex.New(b, "cat")

	r1, err := ra.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rb.TryRLock(ctx) // another session shares it
	if err != nil {
		t.Fatalf("TryRLock beside a reader: %v", err)
	}
	if r2.Token() <= r1.Token() || r1.Resource() != "cat" {
		t.Fatalf("reader tokens %d then %d, resource %q", r1.Token(), r2.Token(), r1.Resource())
	}
	if _, err := rb.TryLock(ctx); !errors.Is(err, rwmutex.ErrLocked) {
		t.Fatalf("TryLock with readers: %v, want ErrLocked", err)
	}
	wc := lock(ctx, rb, false)
	waitQueue(t, ctx, ra, "w")
	if _, err := ra.TryRLock(ctx); !errors.Is(err, rwmutex.ErrLocked) {
		t.Fatalf("TryRLock with a writer waiting: %v, want ErrLocked", err)
	}
	st, err := ra.Holders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Writer != nil || len(st.Readers) != 2 || st.QueuedWriters() != 1 || st.QueuedReaders() != 0 ||
		st.Queue[0].Session != b.ID() || st.Token != r2.Token() {
		t.Fatalf("Holders = %+v", st)
	}
	for _, r := range st.Readers {
		if r.TTL <= 0 || r.Owner == "" || !r.Shared || (r.Token != r1.Token() && r.Token != r2.Token()) {
			t.Fatalf("reader %+v", r)
		}
	}
	release(t, ctx, r1)
	// The release's script would have granted the writer: Redis says it did not.
	if st, err := ra.Holders(ctx); err != nil || st.Writer != nil || len(st.Readers) != 1 || st.QueuedWriters() != 1 {
		t.Fatalf("after one reader left, Holders = %+v, %v; want the other reader holding and the writer queued", st, err)
	}
	release(t, ctx, r2)
	w := recv(t, ctx, wc, "writer")
	if w.Token() <= r2.Token() {
		t.Fatalf("writer token %d not above reader's %d", w.Token(), r2.Token())
	}
	st, err = ra.Holders(ctx)
	if err != nil || st.Writer == nil || st.Writer.Session != b.ID() || st.Writer.Token != w.Token() || len(st.Readers) != 0 {
		t.Fatalf("Holders with a writer = %+v, %v", st, err)
	}
	if _, err := ra.TryRLock(ctx); !errors.Is(err, rwmutex.ErrLocked) {
		t.Fatalf("TryRLock with a writer: %v, want ErrLocked", err)
	}
	if _, err := ra.TryLock(ctx); !errors.Is(err, rwmutex.ErrLocked) {
		t.Fatalf("TryLock with a writer: %v, want ErrLocked", err)
	}
	release(t, ctx, w)
	w2, err := ra.TryLock(ctx)
	if err != nil || w2.Token() <= w.Token() {
		t.Fatalf("TryLock of a free mutex: %v", err)
	}
	release(t, ctx, w2)
}

// TestFairness: with a writer holding, waiters R1 R2 W2 R3 R4 queue in
// that order. The writer's release grants R1 and R2 together; R3 and R4,
// which arrived after W2, wait for it; W2's release grants R3 and R4
// together. Tokens increase in grant order.
func TestFairness(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 20*time.Second)
	var ss []*session.Session
	for range 3 {
		ss = append(ss, testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second}))
	}
	rw := func(i int) *rwmutex.RWMutex { return rwmutex.New(ss[i%3], "fair") }
	w1, err := rw(0).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r1 := lock(ctx, rw(1), true)
	waitQueue(t, ctx, rw(0), "r")
	r2 := lock(ctx, rw(2), true)
	waitQueue(t, ctx, rw(0), "rr")
	w2 := lock(ctx, rw(0), false)
	waitQueue(t, ctx, rw(0), "rrw")
	r3 := lock(ctx, rw(1), true)
	waitQueue(t, ctx, rw(0), "rrwr")
	r4 := lock(ctx, rw(2), true)
	waitQueue(t, ctx, rw(0), "rrwrr")

	release(t, ctx, w1)
	h1, h2 := recv(t, ctx, r1, "R1"), recv(t, ctx, r2, "R2")
	// Both readers were granted by the release itself: the queue moved on
	// in that one call, and later readers stay behind W2.
	if q := queueOf(t, ctx, rw(0)); q != "wrr" {
		t.Fatalf("queue after the writer's release = %q, want \"wrr\"", q)
	}
	if !(w1.Token() < h1.Token() && h1.Token() < h2.Token()) {
		t.Fatalf("tokens W1 %d R1 %d R2 %d", w1.Token(), h1.Token(), h2.Token())
	}
	release(t, ctx, h1)
	// The release's script would have granted W2: Redis says it did not.
	if st, err := rw(0).Holders(ctx); err != nil || st.Writer != nil || len(st.Readers) != 1 || !strings.HasPrefix(queueOf(t, ctx, rw(0)), "w") {
		t.Fatalf("after R1 left, Holders = %+v, %v; want R2 holding and W2 first in the queue", st, err)
	}
	release(t, ctx, h2)
	hw := recv(t, ctx, w2, "W2")
	if q := queueOf(t, ctx, rw(0)); q != "rr" {
		t.Fatalf("queue while W2 holds = %q, want \"rr\"", q)
	}
	release(t, ctx, hw)
	h3, h4 := recv(t, ctx, r3, "R3"), recv(t, ctx, r4, "R4")
	if !(h2.Token() < hw.Token() && hw.Token() < h3.Token() && h3.Token() < h4.Token()) {
		t.Fatalf("tokens R2 %d W2 %d R3 %d R4 %d", h2.Token(), hw.Token(), h3.Token(), h4.Token())
	}
	release(t, ctx, h3, h4)
}

// TestCanceledWriterLetsReadersIn: readers queued behind a writer whose
// wait is canceled are granted at once by its withdrawal.
func TestCanceledWriterLetsReadersIn(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 20*time.Second)
	a := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second})
	r0, err := rwmutex.New(a, "c").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	wc := lock(wctx, rwmutex.New(b, "c"), false)
	waitQueue(t, ctx, rwmutex.New(a, "c"), "w")
	rc := lock(ctx, rwmutex.New(a, "c"), true)
	waitQueue(t, ctx, rwmutex.New(a, "c"), "wr")
	cancel()
	if h := <-wc; h != nil {
		t.Fatal("canceled writer granted")
	}
	r1 := recv(t, ctx, rc, "reader behind the canceled writer")
	release(t, ctx, r0, r1)
}

// TestContention: 4 sessions x 8 goroutines, readers and writers mixed. A
// checker never sees a writer beside anyone, sees readers overlap, and sees
// a writer's token above every earlier grant's and a reader's above every
// earlier writer's; all tokens differ.
func TestContention(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 2*time.Minute)
	const sessions, workers, ops = 4, 8, 12
	var ss []*session.Session
	for range sessions {
		ss = append(ss, testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second}))
	}
	var (
		mu          sync.Mutex
		readers     int
		writers     int
		maxReaders  int
		maxToken    int64 // of every grant registered so far
		maxWToken   int64 // of every writer registered so far
		tokens      = map[int64]bool{}
		violations  []string
		grantsR     atomic.Int64
		grantsW     atomic.Int64
		readOverlap atomic.Bool
	)
	enter := func(shared bool, tok int64) {
		mu.Lock()
		defer mu.Unlock()
		if tokens[tok] {
			violations = append(violations, "token repeated")
		}
		tokens[tok] = true
		if shared {
			if writers > 0 {
				violations = append(violations, "reader beside a writer")
			}
			if tok <= maxWToken {
				violations = append(violations, "reader token not above an earlier writer's")
			}
			readers++
			if readers > 1 {
				readOverlap.Store(true)
			}
			maxReaders = max(maxReaders, readers)
		} else {
			if writers > 0 || readers > 0 {
				violations = append(violations, "writer beside another holder")
			}
			if tok <= maxToken {
				violations = append(violations, "writer token not above every earlier grant's")
			}
			writers++
			maxWToken = tok
		}
		maxToken = max(maxToken, tok)
	}
	leave := func(shared bool) {
		mu.Lock()
		defer mu.Unlock()
		if shared {
			readers--
		} else {
			writers--
		}
	}
	var wg sync.WaitGroup
	for i := range sessions * workers {
		rnd := rand.New(rand.NewPCG(uint64(i), 1))
		rw := rwmutex.New(ss[i%sessions], "hot")
		wg.Go(func() {
			for range ops {
				shared := rnd.IntN(4) != 0
				var h *session.Hold
				var err error
				if shared {
					h, err = rw.RLock(ctx)
				} else {
					h, err = rw.Lock(ctx)
				}
				if err != nil {
					t.Errorf("lock: %v", err)
					return
				}
				enter(shared, h.Token())
				if shared {
					grantsR.Add(1)
				} else {
					grantsW.Add(1)
				}
				time.Sleep(time.Duration(rnd.IntN(2000)) * time.Microsecond) // work, not synchronisation
				if h.Err() != nil {
					t.Errorf("hold ended while held: %v", h.Err())
				}
				leave(shared)
				if err := h.Release(ctx); err != nil {
					t.Errorf("release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if len(violations) > 0 {
		t.Fatalf("%d violations, first: %s", len(violations), violations[0])
	}
	if !readOverlap.Load() {
		t.Fatal("readers never overlapped")
	}
	if n := grantsR.Load() + grantsW.Load(); n != sessions*workers*ops {
		t.Fatalf("%d grants, want %d", n, sessions*workers*ops)
	}
	t.Logf("%d reads, %d writes, up to %d readers at once", grantsR.Load(), grantsW.Load(), maxReaders)
}

// TestResetTakesEveryReader: Reset ends every reader's hold with ErrLost
// and grants the queued writer.
func TestResetTakesEveryReader(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 20*time.Second)
	const ttl = 900 * time.Millisecond
	a := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	admin := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	r1, err := rwmutex.New(a, "x").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rwmutex.New(b, "x").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wc := lock(ctx, rwmutex.New(admin, "x"), false)
	waitQueue(t, ctx, rwmutex.New(a, "x"), "w")
	n, err := rwmutex.New(admin, "x").Reset(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Reset = %d, %v; want 2", n, err)
	}
	w := recv(t, ctx, wc, "writer after Reset")
	for _, r := range []*session.Hold{r1, r2} {
		select {
		case <-r.Done():
		case <-time.After(ttl):
			t.Fatal("reader not ended one TTL after Reset")
		}
		if !errors.Is(r.Err(), session.ErrLost) || errors.Is(r.Err(), session.ErrLeaseLost) {
			t.Fatalf("reader's cause %v, want ErrLost", r.Err())
		}
		if err := r.Release(ctx); !errors.Is(err, session.ErrLost) {
			t.Fatalf("Release of a reset reader: %v, want ErrLost", err)
		}
	}
	if a.Err() != nil || b.Err() != nil {
		t.Fatal("Reset ended a session")
	}
	release(t, ctx, w)
}

// TestLockDelay: a lost reader keeps writers out for its LockDelay, but not
// readers; a lost writer keeps everyone out.
func TestLockDelay(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 20*time.Second)
	const delay = 300 * time.Millisecond
	probe := testutil.Client(t, addr)
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second})
	lose := func(s *session.Session) {
		if err := probe.Do(ctx, probe.B().Del().Key("{"+ns+"}:s:"+s.ID()).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for _, shared := range []bool{true, false} {
		a := testutil.Dial(t, addr, ns, session.Options{TTL: 3 * time.Second, LockDelay: delay})
		name := "ld-w"
		if shared {
			name = "ld-r"
		}
		var err error
		if shared {
			_, err = rwmutex.New(a, name).RLock(ctx)
		} else {
			_, err = rwmutex.New(a, name).Lock(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		lose(a)
		start := time.Now()
		if _, err := rwmutex.New(b, name).TryLock(ctx); !errors.Is(err, rwmutex.ErrLocked) {
			t.Fatalf("shared=%v: TryLock right after the loss: %v, want ErrLocked", shared, err)
		}
		r, err := rwmutex.New(b, name).TryRLock(ctx)
		if shared && err != nil {
			t.Fatalf("TryRLock after a lost reader: %v, want granted", err)
		}
		if !shared && !errors.Is(err, rwmutex.ErrLocked) {
			t.Fatalf("TryRLock after a lost writer: %v, want ErrLocked", err)
		}
		if r != nil {
			release(t, ctx, r)
		}
		w, err := rwmutex.New(b, name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < delay-2*time.Millisecond {
			t.Fatalf("shared=%v: writer granted %v after the loss; lock delay %v", shared, waited, delay)
		}
		release(t, ctx, w)
	}
}

// TestIdleKeysExpire: a released mutex leaves its hash with an expiry of
// at most 2*TTL and no other key; a grant after the expiry still gets a
// larger token.
func TestIdleKeysExpire(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 20*time.Second)
	const ttl = 300 * time.Millisecond
	a := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	probe := testutil.Client(t, addr)
	rw := rwmutex.New(a, "idle")
	r, err := rw.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := lock(ctx, rw, false)
	waitQueue(t, ctx, rw, "w")
	release(t, ctx, r)
	h := recv(t, ctx, w, "writer")
	release(t, ctx, h)
	k := "{" + ns + "}:rw:idle"
	pttl, err := probe.Do(ctx, probe.B().Pttl().Key(k).Build()).AsInt64()
	if err != nil || pttl <= 0 || pttl > int64(2*ttl/time.Millisecond) {
		t.Fatalf("PTTL of the idle hash = %d, %v; want (0, %d]", pttl, err, 2*ttl/time.Millisecond)
	}
	for _, other := range []string{"{" + ns + "}:rwr:idle", "{" + ns + "}:q:rw:idle"} {
		if n, err := probe.Do(ctx, probe.B().Exists().Key(other).Build()).AsInt64(); err != nil || n != 0 {
			t.Fatalf("%s left behind (%d, %v)", other, n, err)
		}
	}
	testutil.WaitFor(t, ctx, func() bool {
		n, err := probe.Do(ctx, probe.B().Exists().Key(k).Build()).AsInt64()
		return err == nil && n == 0
	})
	h2, err := rw.TryRLock(ctx)
	if err != nil || h2.Token() <= h.Token() {
		t.Fatalf("after the expiry: TryRLock = %v, token must exceed %d", err, h.Token())
	}
	release(t, ctx, h2)
}

// TestBadInput: invalid names and a closed session fail with errors that
// errors.Is matches, and change nothing in Redis.
func TestBadInput(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	closed := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	probe := testutil.Client(t, srv.Addr())
	keys := func() []string {
		t.Helper()
		ks, err := probe.Do(ctx, probe.B().Keys().Pattern("*").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ks)
		return ks
	}
	before := keys()
	calls := func(rw *rwmutex.RWMutex) map[string]error {
		out := map[string]error{}
		_, out["RLock"] = rw.RLock(ctx)
		_, out["Lock"] = rw.Lock(ctx)
		_, out["TryRLock"] = rw.TryRLock(ctx)
		_, out["TryLock"] = rw.TryLock(ctx)
		_, out["Holders"] = rw.Holders(ctx)
		_, out["Reset"] = rw.Reset(ctx)
		return out
	}
	for _, name := range testutil.InvalidNames() {
		for call, err := range calls(rwmutex.New(s, name)) {
			if !errors.Is(err, session.ErrInvalidName) {
				t.Errorf("%s(%.8q): %v, want ErrInvalidName", call, name, err)
			}
		}
	}
	for call, err := range calls(rwmutex.New(closed, "ok")) {
		if !errors.Is(err, session.ErrClosed) {
			t.Errorf("%s on a closed session: %v, want ErrClosed", call, err)
		}
	}
	if after := keys(); !slices.Equal(after, before) {
		t.Fatalf("keys %q → %q: bad input changed Redis", before, after)
	}
	h, err := rwmutex.New(s, "café").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(keys(), before) {
		t.Fatal("a valid RLock wrote no key: the probe proves nothing")
	}
	release(t, ctx, h)
}

// TestHandOffKeepsKeys: a hand-off (the release's fast path) keeps the
// keys for the grantee's session, not the releaser's: a writer with a long
// TTL handed the mutex by a reader with a short one, then readers handed
// it by that writer, find the keys kept at least 2 x their TTL.
func TestHandOffKeepsKeys(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	probe := testutil.Client(t, addr)
	short := testutil.Dial(t, addr, ns, session.Options{TTL: time.Second, RestartGrace: 30 * time.Second})
	long := testutil.Dial(t, addr, ns, session.Options{TTL: 30 * time.Second, RestartGrace: 30 * time.Second})
	pttl := func(key string) time.Duration {
		t.Helper()
		n, err := probe.Do(ctx, probe.B().Pttl().Key("{"+ns+"}:"+key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(n) * time.Millisecond
	}

	r, err := rwmutex.New(short, "x").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := lock(ctx, rwmutex.New(long, "x"), false)
	waitQueue(t, ctx, rwmutex.New(short, "x"), "w")
	release(t, ctx, r)
	w := recv(t, ctx, got, "handed-over writer")
	if d := pttl("rw:x"); d < 30*time.Second {
		t.Errorf("writer handed over: rw key PTTL %v, want at least 2 x its TTL (60 s) less the time since", d)
	}

	got = lock(ctx, rwmutex.New(long, "x"), true)
	waitQueue(t, ctx, rwmutex.New(short, "x"), "r")
	release(t, ctx, w)
	r = recv(t, ctx, got, "handed-over reader")
	for _, key := range []string{"rw:x", "rwr:x"} {
		if d := pttl(key); d < 30*time.Second {
			t.Errorf("reader handed over: %s PTTL %v, want at least 2 x its TTL (60 s) less the time since", key, d)
		}
	}
	release(t, ctx, r)
}

// TestConcurrentCallsShareScriptCalls: the Lock and Release calls (and
// RLock calls) that many goroutines of one session make at once go to
// Redis together, several per script call (internal/scripts/batch.go), and
// each still gets its own outcome: every writer its own mutex with tokens
// increasing per mutex. A reader's release goes alone (it checks the
// readers left), so readers are a few.
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
	const writers, readers, rounds = 32, 4, 100
	var (
		wg   sync.WaitGroup
		errs = make(chan error, writers+readers)
	)
	before := cc.N.Load()
	for g := range writers + readers {
		wg.Go(func() {
			name, shared := "w"+strconv.Itoa(g), g >= writers
			if shared {
				name = "shared"
			}
			rw := rwmutex.New(s, name)
			last := int64(0)
			for range rounds {
				lock := rw.Lock
				if shared {
					lock = rw.RLock
				}
				h, err := lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				if !shared && h.Token() <= last {
					errs <- fmt.Errorf("%s: token %d after %d", name, h.Token(), last)
					return
				}
				last = h.Token()
				if err := h.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Alone, each call is one request: 2 per round.
	calls := 2 * (writers + readers) * rounds
	reqs := cc.N.Load() - before
	t.Logf("%d requests for %d lock and release calls", reqs, calls)
	if reqs*4 > int64(calls)*3 {
		t.Fatalf("%d requests for %d calls: not sent together", reqs, calls)
	}
}
