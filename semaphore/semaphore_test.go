package semaphore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/hook"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.LeakOptions...) }

// waitFor polls cond: it observes Redis state that has no event to wait on.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("condition not reached: %s", what)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func stats(t *testing.T, ctx context.Context, sem *semaphore.Semaphore) semaphore.Stats {
	t.Helper()
	st, err := sem.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

// waitWaiters waits until Stats reports n live waiters.
func waitWaiters(t *testing.T, ctx context.Context, sem *semaphore.Semaphore, n int) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf("Stats().Waiters == %d", n), func() bool {
		st, err := sem.Stats(ctx)
		return err == nil && st.Waiters == n
	})
}

// waitQueued waits until Stats report n live waiters, failing at once if a
// result arrives on results meanwhile: every request must still be waiting.
func waitQueued(t *testing.T, ctx context.Context, sem *semaphore.Semaphore, n int, results <-chan acquired) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf("Stats().Waiters == %d", n), func() bool {
		nothingFrom(t, results, fmt.Sprintf("while queueing waiter %d", n-1))
		st, err := sem.Stats(ctx)
		return err == nil && st.Waiters == n
	})
}

// holder is what the tests compare Stats.Holders against.
type holder struct {
	sid      string
	n, token int64
}

func holdersOf(st semaphore.Stats) []holder {
	out := make([]holder, 0, len(st.Holders))
	for _, h := range st.Holders {
		out = append(out, holder{h.Session, h.N, h.Token})
	}
	slices.SortFunc(out, func(a, b holder) int { return cmpInt(a.token, b.token) })
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// wantStats fails unless st has exactly the given limit, waiters and holders
// (InUse must be the sum of the holders' permits).
func wantStats(t *testing.T, st semaphore.Stats, limit int64, waiters int, want ...holder) {
	t.Helper()
	var inUse int64
	for _, h := range want {
		inUse += h.n
	}
	slices.SortFunc(want, func(a, b holder) int { return cmpInt(a.token, b.token) })
	got := holdersOf(st)
	if st.Limit != limit || st.InUse != inUse || st.Waiters != waiters || !slices.Equal(got, want) {
		t.Fatalf("Stats = limit %d, in use %d, waiters %d, holders %+v;\nwant    limit %d, in use %d, waiters %d, holders %+v",
			st.Limit, st.InUse, st.Waiters, got, limit, inUse, waiters, want)
	}
}

type acquired struct {
	i   int
	h   *session.Hold
	err error
}

func (r acquired) String() string {
	if r.h != nil {
		return fmt.Sprintf("granted, token %d", r.h.Token())
	}
	return fmt.Sprintf("error %v", r.err)
}

// acquireAsync runs sem.Acquire(ctx, n) in a goroutine that reports on out.
func acquireAsync(ctx context.Context, sem *semaphore.Semaphore, n int64, i int, out chan<- acquired) {
	go func() {
		h, err := sem.Acquire(ctx, n)
		out <- acquired{i, h, err}
	}()
}

// receive waits up to d for one result.
func receive(t *testing.T, ch <-chan acquired, d time.Duration, what string) acquired {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("%s: no result within %v", what, d)
	}
	panic("unreachable")
}

// nothingFrom fails if a result is already there.
func nothingFrom(t *testing.T, ch <-chan acquired, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: waiter %d's Acquire returned (%s) while it must still wait", what, r.i, r)
	default:
	}
}

func release(t *testing.T, ctx context.Context, hs ...*session.Hold) {
	t.Helper()
	for _, h := range hs {
		if err := h.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
}

// TestLimitNeverExceeded: 12 goroutines over 4 sessions make 1,000
// acquisitions of random weights 1..3 on a semaphore of limit 3. Each grant
// is recorded as an interval on a shared clock, from just after Acquire
// returns to just before Release is called: a sub-interval of the real grant,
// so a sweep over these intervals undercounts the permits in use, and any
// count above the limit is a real violation. Inside every hold the server's
// Stats agree. Tokens are unique and respect real time: a grant observed
// before another Acquire was even called has the smaller token.
func TestLimitNeverExceeded(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 3*time.Minute)
	const limit, nsessions, workers, total = 3, 4, 12, 1000

	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("LEASEHOLD_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("LEASEHOLD_SEED: %v", err)
		}
	}
	t.Logf("seed %d (rerun with LEASEHOLD_SEED=%d)", seed, seed)

	ss := make([]*session.Session, nsessions)
	for i := range ss {
		ss[i] = testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	}

	type interval struct {
		w               int
		n, token        int64
		call, got, done int64 // on clock
	}
	var (
		mu       sync.Mutex
		clock    int64
		ivs      []interval
		problems []error
		failed   atomic.Bool
		left     atomic.Int64
		wg       sync.WaitGroup
	)
	tick := func() int64 { // with mu held
		clock++
		return clock
	}
	// report records a problem and stops every worker (after it released
	// what it holds, so that nobody blocks on permits that stay taken).
	report := func(err error) {
		mu.Lock()
		if len(problems) < 20 {
			problems = append(problems, err)
		}
		mu.Unlock()
		failed.Store(true)
	}
	left.Store(total)
	for w := range workers {
		s := ss[w%nsessions]
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			sem := semaphore.New(s, "sweep", limit)
			for !failed.Load() && left.Add(-1) >= 0 {
				n := 1 + rng.Int64N(limit)
				mu.Lock()
				call := tick()
				mu.Unlock()
				h, err := sem.Acquire(ctx, n)
				if err != nil {
					report(fmt.Errorf("worker %d: Acquire(%d): %w", w, n, err))
					return
				}
				mu.Lock()
				got := tick()
				mu.Unlock()

				// The server agrees while we hold: at most limit permits in
				// use by live holders, ours among them.
				if st, err := sem.Stats(ctx); err != nil {
					report(fmt.Errorf("worker %d: Stats: %w", w, err))
				} else {
					if st.InUse > limit || st.Limit != limit {
						report(fmt.Errorf("worker %d: Stats inside a hold: limit %d, in use %d", w, st.Limit, st.InUse))
					}
					if !slices.Contains(holdersOf(st), holder{s.ID(), n, h.Token()}) {
						report(fmt.Errorf("worker %d: own hold (n %d, token %d) missing from Stats %+v", w, n, h.Token(), st.Holders))
					}
				}
				if err := h.Err(); err != nil {
					report(fmt.Errorf("worker %d: hold ended while held: %w", w, err))
				}

				mu.Lock()
				ivs = append(ivs, interval{w: w, n: n, token: h.Token(), call: call, got: got, done: tick()})
				mu.Unlock()
				if err := h.Release(ctx); err != nil {
					report(fmt.Errorf("worker %d: Release: %w", w, err))
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range problems {
		t.Error(err)
	}
	// The checks below also run on a partial record after a failure.
	if !t.Failed() && len(ivs) != total {
		t.Fatalf("%d acquisitions, want %d", len(ivs), total)
	}

	// Sweep line over the recorded intervals.
	type event struct {
		at, delta int64
		iv        int
	}
	events := make([]event, 0, 2*len(ivs))
	for i, iv := range ivs {
		events = append(events, event{iv.got, iv.n, i}, event{iv.done, -iv.n, i})
	}
	sort.Slice(events, func(i, j int) bool { return events[i].at < events[j].at })
	var inUse, peak int64
	open := map[int]bool{}
	for _, e := range events {
		inUse += e.delta
		if e.delta > 0 {
			open[e.iv] = true
		} else {
			delete(open, e.iv)
		}
		if inUse > limit {
			var desc []string
			for i := range open {
				desc = append(desc, fmt.Sprintf("worker %d n=%d token %d", ivs[i].w, ivs[i].n, ivs[i].token))
			}
			t.Fatalf("%d permits in use at once, limit %d: %s", inUse, limit, strings.Join(desc, "; "))
		}
		peak = max(peak, inUse)
	}
	t.Logf("peak permits in use observed: %d of %d", peak, limit)
	if peak < 2 && !t.Failed() {
		t.Fatalf("holds never overlapped (peak %d): the workload exercised nothing", peak)
	}

	// Tokens: positive, unique, and in real-time order. Walking from the
	// largest token down, every grant must have been requested before the
	// earliest observation of any grant with a larger token.
	byToken := slices.Clone(ivs)
	slices.SortFunc(byToken, func(a, b interval) int { return cmpInt(a.token, b.token) })
	minGot := int64(math.MaxInt64)
	for i := len(byToken) - 1; i >= 0; i-- {
		iv := byToken[i]
		if iv.token <= 0 {
			t.Fatalf("token %d <= 0", iv.token)
		}
		if i > 0 && byToken[i-1].token == iv.token {
			t.Fatalf("token %d granted twice", iv.token)
		}
		if minGot < iv.call {
			t.Fatalf("token %d was granted to a request made after a grant with a larger token had been seen", iv.token)
		}
		minGot = min(minGot, iv.got)
	}
	if t.Failed() {
		t.FailNow()
	}
	// Per worker, grants follow each other: tokens strictly increase.
	last := map[int]int64{}
	for _, iv := range ivs {
		if iv.token <= last[iv.w] {
			t.Fatalf("worker %d: token %d after %d", iv.w, iv.token, last[iv.w])
		}
		last[iv.w] = iv.token
	}

	wantStats(t, stats(t, ctx, semaphore.New(ss[0], "sweep", limit)), limit, 0)
}

// TestFIFO: with the semaphore full, waiters of different weights queue one
// at a time, a large request at the head followed by smaller ones. After
// each Release exactly the requests a FIFO model predicts are granted — the
// small ones never overtake a large one ahead of them, even when the free
// permits would fit them — and Stats match the model (holders by session, n
// and token; waiters). Tokens increase in arrival order: grant order is
// arrival order.
func TestFIFO(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, time.Minute)
	const limit = 3
	var ss []*session.Session
	for range 3 {
		ss = append(ss, testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second}))
	}
	sem := func(i int) *semaphore.Semaphore { return semaphore.New(ss[i%len(ss)], "fifo", limit) }

	first, err := sem(0).TryAcquire(ctx, 2) // one permit stays free
	if err != nil {
		t.Fatal(err)
	}
	weights := []int64{3, 1, 1, 2, 1, 3, 2, 1}
	results := make(chan acquired, len(weights))
	for i, n := range weights {
		acquireAsync(ctx, sem(i), n, i, results)
		waitQueued(t, ctx, sem(0), i+1, results)
		// Queued, not granted: the free permit does not go to the small
		// requests behind the large one at the head.
		nothingFrom(t, results, fmt.Sprintf("waiter %d (n=%d)", i, n))
		wantStats(t, stats(t, ctx, sem(0)), limit, i+1, holder{ss[0].ID(), 2, first.Token()})
	}
	if _, err := sem(1).TryAcquire(ctx, 1); !errors.Is(err, semaphore.ErrNoPermits) {
		t.Fatalf("TryAcquire(1) with a free permit but waiters queued: %v, want ErrNoPermits", err)
	}

	// The model: held in grant order, queue in arrival order.
	type held struct {
		i int // -1 for first
		h *session.Hold
		n int64
	}
	heldNow := []held{{-1, first, 2}}
	queue := make([]int, len(weights))
	for i := range queue {
		queue[i] = i
	}
	tokens := make([]int64, len(weights))
	var used int64 = 2
	for len(heldNow) > 0 {
		out := heldNow[0]
		heldNow = heldNow[1:]
		release(t, ctx, out.h)
		used -= out.n
		var want []int
		for len(queue) > 0 && used+weights[queue[0]] <= limit {
			want = append(want, queue[0])
			used += weights[queue[0]]
			queue = queue[1:]
		}
		var got []int
		for range want {
			r := receive(t, results, 10*time.Second, fmt.Sprintf("after releasing waiter %d, grant", out.i))
			if r.err != nil {
				t.Fatalf("waiter %d: %v", r.i, r.err)
			}
			got = append(got, r.i)
			tokens[r.i] = r.h.Token()
			heldNow = append(heldNow, held{r.i, r.h, weights[r.i]})
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("after releasing waiter %d: granted %v, want %v (FIFO)", out.i, got, want)
		}
		// Grants happen in the releasing script: Stats now show all of them.
		var hs []holder
		for _, x := range heldNow {
			hs = append(hs, holder{ss[max(x.i, 0)%len(ss)].ID(), x.n, x.h.Token()})
		}
		wantStats(t, stats(t, ctx, sem(0)), limit, len(queue), hs...)
		nothingFrom(t, results, fmt.Sprintf("after releasing waiter %d", out.i))
	}
	if len(queue) != 0 {
		t.Fatalf("waiters %v never served", queue)
	}
	prev := first.Token()
	for i, tok := range tokens {
		if tok <= prev {
			t.Fatalf("waiter %d got token %d after %d: grant order differs from arrival order", i, tok, prev)
		}
		prev = tok
	}
}

// TestStats: Stats report the stored limit, the permits in use, each live
// holder (session, owner, n, token, lease TTL) and the live waiters; holders
// whose lease is gone are not counted.
func TestStats(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = 5 * time.Second
	a := testutil.Dial(t, addr, ns, session.Options{TTL: ttl, Owner: "alpha"})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: ttl, Owner: "beta"})
	c := testutil.Dial(t, addr, ns, session.Options{TTL: ttl, Owner: "gamma"})
	probe := testutil.Client(t, addr)
	semA, semB, semC := semaphore.New(a, "st", 3), semaphore.New(b, "st", 3), semaphore.New(c, "st", 3)

	st := stats(t, ctx, semA)
	if st.Limit != 0 || st.InUse != 0 || st.Waiters != 0 || len(st.Holders) != 0 {
		t.Fatalf("Stats of an unused semaphore = %+v, want zero", st)
	}
	ha, err := semA.TryAcquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := semB.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if ha.Resource() != "st" || hb.Resource() != "st" || hb.Token() <= ha.Token() {
		t.Fatalf("holds: %q token %d, %q token %d", ha.Resource(), ha.Token(), hb.Resource(), hb.Token())
	}
	results := make(chan acquired, 1)
	acquireAsync(ctx, semC, 2, 0, results)
	waitWaiters(t, ctx, semA, 1)

	st = stats(t, ctx, semB)
	wantStats(t, st, 3, 1, holder{a.ID(), 1, ha.Token()}, holder{b.ID(), 2, hb.Token()})
	for _, h := range st.Holders {
		want := map[string]string{a.ID(): "alpha", b.ID(): "beta"}[h.Session]
		if h.Owner != want || h.TTL <= 0 || h.TTL > ttl {
			t.Fatalf("holder %+v: want owner %q and 0 < TTL <= %v", h, want, ttl)
		}
	}

	// a releases: 1 free, not enough for the waiter's 2.
	release(t, ctx, ha)
	wantStats(t, stats(t, ctx, semC), 3, 1, holder{b.ID(), 2, hb.Token()})
	nothingFrom(t, results, "waiter for 2 with 1 free")

	// b's lease disappears (as if it had expired): its permits no longer
	// count, and the waiter is served by its next re-check.
	if err := probe.Do(ctx, probe.B().Del().Key("{"+ns+"}:s:"+b.ID()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	st = stats(t, ctx, semA)
	var inUse int64
	for _, h := range st.Holders {
		if h.Session == b.ID() {
			t.Fatalf("Stats count a holder whose lease is gone: %+v", st)
		}
		inUse += h.N
	}
	if st.InUse != inUse {
		t.Fatalf("Stats after the holder's lease was deleted: in use %d, holders %+v", st.InUse, st.Holders)
	}
	r := receive(t, results, 2*ttl, "waiter after the holder's lease was gone")
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantStats(t, stats(t, ctx, semA), 3, 0, holder{c.ID(), 2, r.h.Token()})
	if r.h.Token() <= hb.Token() {
		t.Fatalf("token %d after %d", r.h.Token(), hb.Token())
	}
	release(t, ctx, r.h)
	wantStats(t, stats(t, ctx, semA), 3, 0)
}

// snapshot reads the semaphore's three keys.
func snapshot(t *testing.T, ctx context.Context, c rueidis.Client, ns, name string) string {
	t.Helper()
	p := "{" + ns + "}:"
	meta, err := c.Do(ctx, c.B().Hgetall().Key(p+"sem:"+name).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	holders, err := c.Do(ctx, c.B().Hgetall().Key(p+"semh:"+name).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.Do(ctx, c.B().Lrange().Key(p+"q:sem:"+name).Start(0).Stop(-1).Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(meta, holders, q)
}

// TestLimitSemantics: the first user stores the limit; a client with
// another limit gets ErrLimitMismatch and changes nothing; SetLimit changes
// it for everyone; shrinking keeps current holders but makes new grants
// wait; growing serves the waiters that now fit at once.
func TestLimitSemantics(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = 10 * time.Second // fallback re-checks are far away: grants seen are hand-offs
	a := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	c := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	probe := testutil.Client(t, addr)

	semA := semaphore.New(a, "lim", 3)
	h1, err := semA.TryAcquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ctx, probe, ns, "lim")

	semB := semaphore.New(b, "lim", 5)
	if _, err := semB.TryAcquire(ctx, 1); !errors.Is(err, semaphore.ErrLimitMismatch) {
		t.Fatalf("TryAcquire with limit 5 on a limit-3 semaphore: %v, want ErrLimitMismatch", err)
	}
	if _, err := semB.Acquire(ctx, 1); !errors.Is(err, semaphore.ErrLimitMismatch) {
		t.Fatalf("Acquire with limit 5 on a limit-3 semaphore: %v, want ErrLimitMismatch", err)
	}
	if after := snapshot(t, ctx, probe, ns, "lim"); after != before {
		t.Fatalf("a mismatched limit changed Redis:\nbefore %s\nafter  %s", before, after)
	}
	wantStats(t, stats(t, ctx, semB), 3, 0, holder{a.ID(), 2, h1.Token()})

	// Shrink below the permits in use: the holder keeps them.
	if err := semA.SetLimit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := h1.Err(); err != nil {
		t.Fatalf("holder ended by a shrinking SetLimit: %v", err)
	}
	wantStats(t, stats(t, ctx, semA), 1, 0, holder{a.ID(), 2, h1.Token()})
	if _, err := semA.TryAcquire(ctx, 1); !errors.Is(err, semaphore.ErrNoPermits) {
		t.Fatalf("TryAcquire over a shrunk limit: %v, want ErrNoPermits", err)
	}
	semC := semaphore.New(c, "lim", 1)
	results := make(chan acquired, 1)
	acquireAsync(ctx, semC, 1, 0, results)
	waitWaiters(t, ctx, semA, 1)
	nothingFrom(t, results, "waiter over a shrunk limit")
	if err := h1.Err(); err != nil {
		t.Fatalf("holder ended: %v", err)
	}

	// Grow: the waiter fits now and is granted by SetLimit itself.
	if err := semB.SetLimit(ctx, 4); err != nil {
		t.Fatal(err)
	}
	st := stats(t, ctx, semB)
	if st.Limit != 4 || st.InUse != 3 || st.Waiters != 0 {
		t.Fatalf("Stats right after growing to 4: %+v, want limit 4, in use 3, no waiters", st)
	}
	r := receive(t, results, 3*time.Second, "waiter after the limit grew")
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	wantStats(t, st, 4, 0, holder{a.ID(), 2, h1.Token()}, holder{c.ID(), 1, r.h.Token()})

	// An operator's limit overrides every client's: a client that still
	// passes another limit (semD: 7) is served under 4, not refused.
	if !st.Set {
		t.Fatalf("Stats after SetLimit: %+v, want Set", st)
	}
	semD := semaphore.New(c, "lim", 7)
	h3, err := semD.TryAcquire(ctx, 1)
	if err != nil {
		t.Fatalf("TryAcquire with limit 7 under an operator's limit 4: %v", err)
	}
	if _, err := semD.TryAcquire(ctx, 1); !errors.Is(err, semaphore.ErrNoPermits) {
		t.Fatalf("TryAcquire past the operator's limit 4: %v, want ErrNoPermits", err)
	}
	if _, err := semD.TryAcquire(ctx, 5); !errors.Is(err, semaphore.ErrLimitMismatch) {
		t.Fatalf("TryAcquire(5) under an operator's limit 4: %v, want ErrLimitMismatch", err)
	}

	// Cleared, the stored limit is b's again and another one is refused.
	if err := semB.ClearLimit(ctx); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, ctx, semB); st.Set || st.Limit != 4 {
		t.Fatalf("Stats after ClearLimit: %+v, want limit 4, not Set", st)
	}
	release(t, ctx, h3)
	h3, err = semB.TryAcquire(ctx, 1)
	if err != nil {
		t.Fatalf("TryAcquire with the stored limit: %v", err)
	}
	before = snapshot(t, ctx, probe, ns, "lim")
	for _, sem := range []*semaphore.Semaphore{semA, semD} {
		if _, err := sem.TryAcquire(ctx, 1); !errors.Is(err, semaphore.ErrLimitMismatch) {
			t.Fatalf("TryAcquire with another limit after ClearLimit: %v, want ErrLimitMismatch", err)
		}
	}
	if after := snapshot(t, ctx, probe, ns, "lim"); after != before {
		t.Fatalf("a mismatched limit changed Redis:\nbefore %s\nafter  %s", before, after)
	}
	release(t, ctx, h1, r.h, h3)
	wantStats(t, stats(t, ctx, semA), 4, 0)
}

// TestOperatorLimitIsKept: an operator's limit is configuration: the
// semaphore's key does not expire while idle; after ClearLimit it does,
// like any idle resource.
func TestOperatorLimitIsKept(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	s := testutil.Dial(t, addr, ns, session.Options{TTL: 10 * time.Second})
	probe := testutil.Client(t, addr)
	meta := "{" + ns + "}:sem:kept"
	pttl := func() int64 {
		t.Helper()
		v, err := probe.Do(ctx, probe.B().Pttl().Key(meta).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	sem := semaphore.New(s, "kept", 2)
	if err := sem.SetLimit(ctx, 3); err != nil { // never used before: no grant recorded an idle time
		t.Fatal(err)
	}
	if got := pttl(); got != -1 {
		t.Fatalf("PTTL of an idle semaphore with an operator's limit = %d, want -1 (kept)", got)
	}
	h, err := sem.TryAcquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	release(t, ctx, h)
	if got := pttl(); got != -1 {
		t.Fatalf("PTTL after the last release under an operator's limit = %d, want -1 (kept)", got)
	}
	if err := sem.ClearLimit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pttl(); got <= 0 || got > 20000 {
		t.Fatalf("PTTL of the idle semaphore after ClearLimit = %d, want 0 < PTTL <= 2 x TTL", got)
	}
	if err := semaphore.New(s, "never-used", 2).ClearLimit(ctx); err != nil {
		t.Fatalf("ClearLimit on a semaphore with no stored limit: %v", err)
	}
	if n, err := probe.Do(ctx, probe.B().Exists().Key("{"+ns+"}:sem:never-used").Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("ClearLimit on an unused semaphore left a key: EXISTS = %d, %v", n, err)
	}
	// Cleared while held: the limit is a client's again, and meta expires
	// with the holders' keys if they crash (their heartbeats keep it).
	if err := sem.SetLimit(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if h, err = sem.TryAcquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := pttl(); got != -1 {
		t.Fatalf("PTTL of a held semaphore with an operator's limit = %d, want -1 (kept)", got)
	}
	if err := sem.ClearLimit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pttl(); got <= 0 || got > 30000 {
		t.Fatalf("PTTL of the held semaphore after ClearLimit = %d, want 0 < PTTL <= 3 x TTL", got)
	}
	release(t, ctx, h)
}

// cmdCalls returns how many times Redis ran cmd, including from scripts.
func cmdCalls(t *testing.T, ctx context.Context, c rueidis.Client, cmd string) int64 {
	t.Helper()
	info, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return 0
}

// TestWaiterKeepsItsPlaceWhenLimitChanges: a waiter queued under limit 3
// whose fallback re-check runs after another client grew the limit to 4
// keeps waiting (its request still fits the new limit) and is granted on
// the next release. A re-check failing with ErrLimitMismatch would leave
// the entry queued, and the release would then grant permits to a hold id
// nobody has: leaked until the session ends.
func TestWaiterKeepsItsPlaceWhenLimitChanges(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{}) // own server: commandstats are ours
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	a := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: time.Second}) // waiters re-check within its TTL
	w := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	admin := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, srv.Addr())

	h, err := semaphore.New(a, "grow", 3).TryAcquire(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan acquired, 1)
	acquireAsync(ctx, semaphore.New(w, "grow", 3), 2, 0, results)
	waitWaiters(t, ctx, semaphore.New(admin, "grow", 3), 1)
	if err := semaphore.New(admin, "grow", 4).SetLimit(ctx, 4); err != nil {
		t.Fatal(err)
	}
	wantStats(t, stats(t, ctx, semaphore.New(admin, "grow", 4)), 4, 1, holder{a.ID(), 3, h.Token()})

	// The waiter re-checks by itself within about the holder's TTL; a
	// re-check of a queued waiter ends with LPOS (nothing else here runs it).
	lpos := cmdCalls(t, ctx, probe, "lpos")
	var early *acquired
	waitFor(t, ctx, "the waiter's re-check", func() bool {
		select {
		case r := <-results:
			early = &r
			return true
		default:
		}
		return cmdCalls(t, ctx, probe, "lpos") > lpos
	})
	if early != nil {
		t.Fatalf("waiter returned on its re-check after the limit grew: %s", early)
	}
	wantStats(t, stats(t, ctx, semaphore.New(admin, "grow", 4)), 4, 1, holder{a.ID(), 3, h.Token()})

	release(t, ctx, h)
	r := receive(t, results, 5*time.Second, "waiter after the release")
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	wantStats(t, stats(t, ctx, semaphore.New(admin, "grow", 4)), 4, 0, holder{w.ID(), 2, r.h.Token()})
	release(t, ctx, r.h)
	wantStats(t, stats(t, ctx, semaphore.New(admin, "grow", 4)), 4, 0)
}

// TestShrinkBelowQueuedRequest: when SetLimit shrinks the limit below what
// the waiter at the head asks for, that request can never be served; it
// fails with ErrLimitMismatch at once instead of blocking everyone behind
// it, and the requests behind that fit are served. A head left queued
// would starve the whole queue for good.
func TestShrinkBelowQueuedRequest(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = 10 * time.Second // fallback re-checks are far away
	var ss []*session.Session
	for range 4 {
		ss = append(ss, testutil.Dial(t, addr, ns, session.Options{TTL: ttl}))
	}
	a, w1, w2, admin := ss[0], ss[1], ss[2], ss[3]
	h, err := semaphore.New(a, "shrink", 3).TryAcquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	big, small := make(chan acquired, 1), make(chan acquired, 1)
	acquireAsync(ctx, semaphore.New(w1, "shrink", 3), 3, 0, big)
	waitWaiters(t, ctx, semaphore.New(admin, "shrink", 3), 1)
	acquireAsync(ctx, semaphore.New(w2, "shrink", 3), 1, 1, small)
	waitWaiters(t, ctx, semaphore.New(admin, "shrink", 3), 2)
	nothingFrom(t, small, "small request behind a large one")

	if err := semaphore.New(admin, "shrink", 2).SetLimit(ctx, 2); err != nil {
		t.Fatal(err)
	}
	r := receive(t, big, 3*time.Second, "request for 3 after the limit shrank to 2")
	if !errors.Is(r.err, semaphore.ErrLimitMismatch) || r.h != nil {
		t.Fatalf("request for 3 after the limit shrank to 2: %s; want ErrLimitMismatch", r)
	}
	r = receive(t, small, 3*time.Second, "request for 1 behind it")
	if r.err != nil {
		t.Fatalf("request for 1: %v", r.err)
	}
	wantStats(t, stats(t, ctx, semaphore.New(admin, "shrink", 2)), 2, 0,
		holder{a.ID(), 1, h.Token()}, holder{w2.ID(), 1, r.h.Token()})
	release(t, ctx, h, r.h)
	wantStats(t, stats(t, ctx, semaphore.New(admin, "shrink", 2)), 2, 0)
}

// TestAcquireScriptAcrossLimitChange drives the acquire script directly, as
// the session's re-checks do: re-running it for a hold id that is already
// granted or queued is idempotent even after another client changed the
// limit (a fresh request still gets ErrLimitMismatch and changes nothing),
// and a queued request that no longer fits the limit is withdrawn by its
// ErrLimitMismatch, leaving nothing behind.
func TestAcquireScriptAcrossLimitChange(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	s := testutil.Dial(t, addr, ns, session.Options{TTL: 10 * time.Second})
	other := testutil.Dial(t, addr, ns, session.Options{TTL: 10 * time.Second})
	probe := testutil.Client(t, addr)
	env := hook.Env(s, "idem")
	res := func(n, limit int64) scripts.Resource {
		return scripts.Resource{Kind: scripts.Semaphore, Name: "idem", N: n, Limit: limit}
	}
	admin := semaphore.New(other, "idem", 3)

	h, err := admin.TryAcquire(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	hidA, hidB, hidC := s.ID()+".ta", s.ID()+".tb", s.ID()+".tc"
	for _, x := range []struct {
		hid string
		n   int64
		pos int64
	}{{hidA, 2, 0}, {hidB, 3, 1}} {
		g, err := env.Acquire(ctx, res(x.n, 3), x.hid, true)
		if err != nil || g.Status != scripts.Busy || g.Position != x.pos {
			t.Fatalf("Acquire(%s, n=%d) = %+v, %v; want queued at %d", x.hid, x.n, g, err, x.pos)
		}
	}
	// Another client grows the limit: 3+2 > 4, nobody is served. Cleared,
	// the operator's limit is a plain stored limit that others mismatch.
	grow := semaphore.New(other, "idem", 4)
	if err := grow.SetLimit(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if err := grow.ClearLimit(ctx); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ctx, probe, ns, "idem")
	if _, err := env.Acquire(ctx, res(1, 3), hidC, true); !errors.Is(err, scripts.ErrLimitMismatch) {
		t.Fatalf("fresh request with the old limit: %v, want ErrLimitMismatch", err)
	}
	for _, x := range []struct {
		hid string
		n   int64
		pos int64
	}{{hidA, 2, 0}, {hidB, 3, 1}} {
		g, err := env.Acquire(ctx, res(x.n, 3), x.hid, true)
		if err != nil || g.Status != scripts.Busy || g.Position != x.pos {
			t.Fatalf("re-check of queued %s (n=%d, old limit) = %+v, %v; want still queued at %d", x.hid, x.n, g, err, x.pos)
		}
	}
	if after := snapshot(t, ctx, probe, ns, "idem"); after != before {
		t.Fatalf("re-checks changed Redis:\nbefore %s\nafter  %s", before, after)
	}

	// The holder leaves: A (2) is served by the release; B (3) no longer fits.
	release(t, ctx, h)
	st := stats(t, ctx, admin)
	if st.Waiters != 1 || len(st.Holders) != 1 || st.Holders[0].Session != s.ID() || st.Holders[0].N != 2 {
		t.Fatalf("after the release: %+v, want A holding 2 and B waiting", st)
	}
	tok := st.Holders[0].Token
	g, err := env.Acquire(ctx, res(2, 3), hidA, true)
	if err != nil || g.Status != scripts.Granted || g.Token != tok {
		t.Fatalf("re-check of granted %s with the old limit = %+v, %v; want granted with token %d", hidA, g, err, tok)
	}

	// Shrink to 2: B (3) can never be served; its re-check withdraws it.
	if err := semaphore.New(other, "idem", 2).SetLimit(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Acquire(ctx, res(3, 3), hidB, true); !errors.Is(err, scripts.ErrLimitMismatch) {
		t.Fatalf("re-check of queued %s (n=3) over limit 2: %v, want ErrLimitMismatch", hidB, err)
	}
	wantStats(t, stats(t, ctx, admin), 2, 0, holder{s.ID(), 2, tok})
	if r, err := env.Release(ctx, res(3, 3), hidB, false); err != nil || r != scripts.NotFound {
		t.Fatalf("Release of the withdrawn %s = %v, %v; want NotFound", hidB, r, err)
	}
	if r, err := env.Release(ctx, res(2, 3), hidA, false); err != nil || r != scripts.Freed {
		t.Fatalf("Release of %s = %v, %v; want Freed", hidA, r, err)
	}
	wantStats(t, stats(t, ctx, admin), 2, 0)
}

// TestCanceledWaiterWithdraws: a waiter whose ctx ends returns ctx's cause,
// leaves the queue (Stats().Waiters drops back), and is never granted later.
// When it was at the head, the smaller request behind it that fits is
// served at once.
func TestCanceledWaiterWithdraws(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = 10 * time.Second // fallback re-checks are far away
	a := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	c := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	semA := semaphore.New(a, "cancel", 3)

	h, err := semA.TryAcquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	big, small := make(chan acquired, 1), make(chan acquired, 1)
	acquireAsync(wctx, semaphore.New(b, "cancel", 3), 3, 0, big)
	waitWaiters(t, ctx, semA, 1)
	acquireAsync(ctx, semaphore.New(c, "cancel", 3), 1, 1, small)
	waitWaiters(t, ctx, semA, 2)
	nothingFrom(t, small, "small request behind a large one")

	cancel()
	r := receive(t, big, 5*time.Second, "canceled waiter")
	if !errors.Is(r.err, context.Canceled) || r.h != nil {
		t.Fatalf("canceled waiter: %s; want context.Canceled", r)
	}
	// The withdrawal hands the free permit to the request behind.
	rs := receive(t, small, 3*time.Second, "request behind the withdrawn one")
	if rs.err != nil {
		t.Fatal(rs.err)
	}
	waitWaiters(t, ctx, semA, 0)
	wantStats(t, stats(t, ctx, semA), 3, 0, holder{a.ID(), 2, h.Token()}, holder{c.ID(), 1, rs.h.Token()})

	// A lone waiter that gives up is never granted afterwards either.
	wctx2, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	lone := make(chan acquired, 1)
	acquireAsync(wctx2, semaphore.New(b, "cancel", 3), 1, 2, lone)
	waitWaiters(t, ctx, semA, 1)
	cancel2()
	if r := receive(t, lone, 5*time.Second, "canceled lone waiter"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("canceled lone waiter: %v, want context.Canceled", r.err)
	}
	waitWaiters(t, ctx, semA, 0)
	release(t, ctx, h, rs.h)
	wantStats(t, stats(t, ctx, semA), 3, 0)
	all, err := semA.TryAcquire(ctx, 3)
	if err != nil {
		t.Fatalf("TryAcquire(3) after everyone left: %v", err)
	}
	release(t, ctx, all)
}

// TestMaxLimit: at the largest limit, permits are counted exactly: the
// last permit fits, one more does not, and every release returns its
// permits (a count past 2^53 would round, and one stored in a float's
// notation could not be decremented).
func TestMaxLimit(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	sem := semaphore.New(s, "max", semaphore.MaxLimit)
	for round := 0; round < 2; round++ {
		big, err := sem.TryAcquire(ctx, semaphore.MaxLimit-1)
		if err != nil {
			t.Fatalf("round %d: TryAcquire(MaxLimit-1): %v", round, err)
		}
		last, err := sem.TryAcquire(ctx, 1)
		if err != nil {
			t.Fatalf("round %d: TryAcquire(1) of the last permit: %v", round, err)
		}
		if _, err := sem.TryAcquire(ctx, 1); !errors.Is(err, semaphore.ErrNoPermits) {
			t.Fatalf("round %d: TryAcquire(1) past the limit: %v, want ErrNoPermits", round, err)
		}
		st, err := sem.Stats(ctx)
		if err != nil || st.InUse != semaphore.MaxLimit {
			t.Fatalf("round %d: Stats = %+v, %v; want %d in use", round, st, err, int64(semaphore.MaxLimit))
		}
		for _, h := range []*session.Hold{big, last} {
			if err := h.Release(ctx); err != nil {
				t.Fatalf("round %d: Release: %v", round, err)
			}
		}
	}
	all, err := sem.TryAcquire(ctx, semaphore.MaxLimit)
	if err != nil {
		t.Fatalf("TryAcquire(MaxLimit) once every permit is back: %v", err)
	}
	if err := all.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestInvalidInput: bad weights, limits and names, and a closed session,
// fail with errors errors.Is can match, and change nothing in Redis.
func TestInvalidInput(t *testing.T) {
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
		ks, err := probe.Do(ctx, probe.B().Keys().Pattern("*").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ks)
		return ks
	}
	dbsize := func() int64 {
		n, err := probe.Do(ctx, probe.B().Dbsize().Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	sizeBefore, keysBefore := dbsize(), keys()

	want := func(what string, err, target error) {
		t.Helper()
		if !errors.Is(err, target) {
			t.Errorf("%s: %v, want %v", what, err, target)
		}
	}
	sem := semaphore.New(s, "ok", 3)
	for _, n := range []int64{0, -1, 4, math.MinInt64, math.MaxInt64} {
		_, err := sem.Acquire(ctx, n)
		want(fmt.Sprintf("Acquire(%d) with limit 3", n), err, semaphore.ErrInvalidWeight)
		_, err = sem.TryAcquire(ctx, n)
		want(fmt.Sprintf("TryAcquire(%d) with limit 3", n), err, semaphore.ErrInvalidWeight)
	}
	for _, limit := range []int64{0, -1, math.MinInt64, semaphore.MaxLimit + 1, math.MaxInt64} {
		bad := semaphore.New(s, "ok", limit)
		_, err := bad.Acquire(ctx, 1)
		want(fmt.Sprintf("Acquire with limit %d", limit), err, semaphore.ErrInvalidLimit)
		_, err = bad.TryAcquire(ctx, 1)
		want(fmt.Sprintf("TryAcquire with limit %d", limit), err, semaphore.ErrInvalidLimit)
		want(fmt.Sprintf("SetLimit(%d)", limit), sem.SetLimit(ctx, limit), semaphore.ErrInvalidLimit)
	}
	for _, name := range testutil.InvalidNames() {
		bad := semaphore.New(s, name, 3)
		_, err := bad.Acquire(ctx, 1)
		want(fmt.Sprintf("Acquire on name %.8q", name), err, session.ErrInvalidName)
		_, err = bad.TryAcquire(ctx, 1)
		want(fmt.Sprintf("TryAcquire on name %.8q", name), err, session.ErrInvalidName)
		want(fmt.Sprintf("SetLimit on name %.8q", name), bad.SetLimit(ctx, 3), session.ErrInvalidName)
		_, err = bad.Stats(ctx)
		want(fmt.Sprintf("Stats on name %.8q", name), err, session.ErrInvalidName)
		_, err = bad.Reset(ctx)
		want(fmt.Sprintf("Reset on name %.8q", name), err, session.ErrInvalidName)
	}
	gone := semaphore.New(closed, "ok", 3)
	_, err := gone.Acquire(ctx, 1)
	want("Acquire on a closed session", err, session.ErrClosed)
	_, err = gone.TryAcquire(ctx, 1)
	want("TryAcquire on a closed session", err, session.ErrClosed)
	want("SetLimit on a closed session", gone.SetLimit(ctx, 4), session.ErrClosed)
	_, err = gone.Reset(ctx)
	want("Reset on a closed session", err, session.ErrClosed)

	if size, ks := dbsize(), keys(); size != sizeBefore || !slices.Equal(ks, keysBefore) {
		t.Fatalf("invalid input changed Redis: DBSIZE %d → %d, keys %v → %v", sizeBefore, size, keysBefore, ks)
	}

	// The probe is sound: a valid call does write.
	h, err := semaphore.New(s, strings.Repeat("x", session.MaxNameLen), 3).TryAcquire(ctx, 3)
	if err != nil {
		t.Fatalf("TryAcquire with a name of MaxNameLen bytes and n == limit: %v", err)
	}
	if dbsize() == sizeBefore {
		t.Fatal("a valid TryAcquire wrote nothing: the DBSIZE probe proves nothing")
	}
	release(t, ctx, h)
}

// The killed-holder test runs a holder in a child process: the test binary
// itself, re-executed to run only TestHelperHolder with helperEnv set.
const helperEnv = "LEASEHOLD_SEMAPHORE_HELPER" // "addr|namespace|name|limit|n"

// TestHelperHolder is not a test: in a child process started by
// TestKilledHolderPermitsReturn it takes n permits with a 1s-TTL session,
// prints "held <session id> <token>", then blocks until stdin closes. The
// parent SIGKILLs it.
func TestHelperHolder(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("helper process of TestKilledHolderPermitsReturn")
	}
	f := strings.Split(spec, "|")
	if len(f) != 5 {
		fmt.Printf("error: bad %s %q\n", helperEnv, spec)
		os.Exit(2)
	}
	limit, err1 := strconv.ParseInt(f[3], 10, 64)
	n, err2 := strconv.ParseInt(f[4], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		fmt.Printf("error: %v\n", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := session.Dial(ctx, testutil.ClientOption(f[0]), session.Options{Namespace: f[1], TTL: time.Second})
	if err != nil {
		fmt.Printf("error: %v\n", err)
		os.Exit(2)
	}
	h, err := semaphore.New(s, f[2], limit).TryAcquire(ctx, n)
	if err != nil {
		fmt.Printf("error: %v\n", err)
		os.Exit(2)
	}
	fmt.Printf("held %s %d\n", s.ID(), h.Token())
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed, or the parent is gone
	_ = s.Close()
}

// child is a holder process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	stderr *bytes.Buffer
	sid    string
	token  int64
	waited bool
}

func startHolder(t *testing.T, addr, ns, name string, limit, n int64) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHolder$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%s|%d|%d", helperEnv, addr, ns, name, limit, n))
	c := &child{cmd: cmd, stderr: new(bytes.Buffer)}
	cmd.Stderr = c.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdin = stdin
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.kill)
	watchdog := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer watchdog.Stop()
	rd := bufio.NewReader(stdout)
	for {
		line, err := rd.ReadString('\n')
		if rest, ok := strings.CutPrefix(line, "held "); ok {
			sid, tok, _ := strings.Cut(strings.TrimSpace(rest), " ")
			c.sid = sid
			if c.token, err = strconv.ParseInt(tok, 10, 64); err != nil {
				t.Fatalf("holder process: bad line %q", line)
			}
			return c
		}
		if err != nil {
			c.kill()
			t.Fatalf("holder process ended before holding: %v; last line %q; stderr:\n%s", err, line, c.stderr)
		}
	}
}

// kill sends SIGKILL and reaps the process.
func (c *child) kill() {
	if c.waited {
		return
	}
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
	_ = c.stdin.Close()
	c.waited = true
}

// TestKilledHolderPermitsReturn: a holder process killed with SIGKILL never
// calls Release, yet its permits come back within its TTL of the kill: to a
// TryAcquire that needs them, and to a waiter already queued for them. The
// grant never comes while the dead holder's lease still exists.
func TestKilledHolderPermitsReturn(t *testing.T) {
	for _, mode := range []string{"TryAcquire", "Acquire"} {
		t.Run(mode, func(t *testing.T) {
			addr := redistest.Addr(t)
			ns := redistest.Namespace(t)
			ctx := testutil.Ctx(t, 30*time.Second)
			const (
				childTTL = time.Second // the child's session TTL
				margin   = 300 * time.Millisecond
			)
			s := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
			probe := testutil.Client(t, addr)
			sem := semaphore.New(s, "crash", 3)
			mine, err := sem.TryAcquire(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			c := startHolder(t, addr, ns, "crash", 3, 2)
			wantStats(t, stats(t, ctx, sem), 3, 0, holder{s.ID(), 1, mine.Token()}, holder{c.sid, 2, c.token})
			if _, err := sem.TryAcquire(ctx, 2); !errors.Is(err, semaphore.ErrNoPermits) {
				t.Fatalf("TryAcquire(2) while the child holds 2 of 3: %v, want ErrNoPermits", err)
			}
			results := make(chan acquired, 1)
			if mode == "Acquire" {
				acquireAsync(ctx, sem, 2, 0, results)
				waitWaiters(t, ctx, sem, 1)
			}
			lease := "{" + ns + "}:s:" + c.sid

			c.kill()
			killed := time.Now()
			var h *session.Hold
			if mode == "TryAcquire" {
				waitFor(t, ctx, "TryAcquire(2) succeeds", func() bool {
					h, err = sem.TryAcquire(ctx, 2)
					if err != nil && !errors.Is(err, semaphore.ErrNoPermits) {
						t.Fatalf("TryAcquire: %v", err)
					}
					if err != nil && time.Since(killed) > childTTL+margin {
						t.Fatalf("permits of the killed holder not back %v after SIGKILL (TTL %v)", time.Since(killed), childTTL)
					}
					return err == nil
				})
			} else {
				r := receive(t, results, childTTL+margin, "waiter after the holder was killed")
				if r.err != nil {
					t.Fatal(r.err)
				}
				h = r.h
			}
			elapsed := time.Since(killed)
			t.Logf("%s got the killed holder's permits %v after SIGKILL (TTL %v)", mode, elapsed, childTTL)
			if n, err := probe.Do(ctx, probe.B().Exists().Key(lease).Build()).AsInt64(); err != nil || n != 0 {
				t.Fatalf("granted while the killed holder's lease still exists (EXISTS = %d, %v)", n, err)
			}
			if elapsed > childTTL+margin {
				t.Fatalf("permits back %v after SIGKILL, want within TTL %v (+%v)", elapsed, childTTL, margin)
			}
			if h.Token() <= c.token {
				t.Fatalf("token %d after the killed holder's %d", h.Token(), c.token)
			}
			wantStats(t, stats(t, ctx, sem), 3, 0, holder{s.ID(), 1, mine.Token()}, holder{s.ID(), 2, h.Token()})
			release(t, ctx, mine, h)
		})
	}
}

// TestResetEndsEveryHold: Reset by another client takes the permits of two
// sessions; each hold ends with ErrLost (not a lease loss) within one
// heartbeat interval, through the heartbeat (the holders never subscribed)
// and through the notification (they did). The queue is then served as
// after a release: FIFO, the head's 2 permits first, the waiter behind it
// only once they are released. Stale holders cannot release the new grant.
func TestResetEndsEveryHold(t *testing.T) {
	for _, subscribed := range []bool{false, true} {
		t.Run("subscribed="+strconv.FormatBool(subscribed), func(t *testing.T) {
			addr := redistest.Addr(t)
			ns := redistest.Namespace(t)
			ctx := testutil.Ctx(t, 30*time.Second)
			const ttl = 900 * time.Millisecond
			a := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
			b := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
			w := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
			admin := semaphore.New(testutil.Dial(t, addr, ns, session.Options{TTL: ttl}), "r", 2)

			var holds, others []*session.Hold
			for _, s := range []*session.Session{a, b} {
				acquire := semaphore.New(s, "r", 2).TryAcquire
				if subscribed {
					acquire = semaphore.New(s, "r", 2).Acquire // Acquire subscribes
				}
				h, err := acquire(ctx, 1)
				if err != nil {
					t.Fatal(err)
				}
				other, err := semaphore.New(s, "other-"+s.ID(), 1).TryAcquire(ctx, 1)
				if err != nil {
					t.Fatal(err)
				}
				holds, others = append(holds, h), append(others, other)
			}
			results := make(chan acquired, 2)
			acquireAsync(ctx, semaphore.New(w, "r", 2), 2, 0, results)
			waitQueued(t, ctx, admin, 1, results)
			acquireAsync(ctx, semaphore.New(w, "r", 2), 1, 1, results)
			waitQueued(t, ctx, admin, 2, results)

			reset := time.Now()
			if n, err := admin.Reset(ctx); err != nil || n != 2 {
				t.Fatalf("Reset = %d, %v; want 2", n, err)
			}
			for i, s := range []*session.Session{a, b} {
				testutil.EndsTakenAway(t, "Reset", holds[i], others[i], s, reset, ttl/3)
			}
			head := receive(t, results, 5*time.Second, "the head waiter after Reset")
			if head.i != 0 || head.err != nil || head.h.Token() <= max(holds[0].Token(), holds[1].Token()) {
				t.Fatalf("after Reset: waiter %d got %s; want waiter 0 granted a token above %d and %d",
					head.i, head, holds[0].Token(), holds[1].Token())
			}
			nothingFrom(t, results, "after Reset, with the head holding every permit")
			for _, h := range holds {
				if err := h.Release(ctx); !errors.Is(err, session.ErrLost) {
					t.Fatalf("Release of a reset hold: %v, want ErrLost", err)
				}
			}
			wantStats(t, stats(t, ctx, admin), 2, 1, holder{w.ID(), 2, head.h.Token()})
			release(t, ctx, head.h)
			next := receive(t, results, 5*time.Second, "the second waiter")
			if next.err != nil {
				t.Fatal(next.err)
			}
			release(t, ctx, append(others, next.h)...)
		})
	}
}

// TestResetNothingHeld: Reset of a semaphore nobody holds (idle with an
// operator's limit, or never used) takes nothing and changes nothing.
func TestResetNothingHeld(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, srv.Addr())
	sem := semaphore.New(s, "idle", 3)
	if err := sem.SetLimit(ctx, 3); err != nil {
		t.Fatal(err)
	}
	h, err := sem.TryAcquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	release(t, ctx, h)
	before := snapshot(t, ctx, probe, ns, "idle")
	for _, name := range []string{"idle", "never"} {
		if n, err := semaphore.New(s, name, 3).Reset(ctx); err != nil || n != 0 {
			t.Fatalf("Reset of %q = %d, %v; want 0", name, n, err)
		}
	}
	if after := snapshot(t, ctx, probe, ns, "idle"); after != before {
		t.Fatalf("Reset of an idle semaphore changed it:\n%s\n→\n%s", before, after)
	}
	if got := snapshot(t, ctx, probe, ns, "never"); got != "map[] map[] []" {
		t.Fatalf("Reset of a semaphore never used wrote %s", got)
	}
}
