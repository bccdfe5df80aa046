package pool_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.LeakOptions...) }

func stats(t *testing.T, ctx context.Context, p *pool.Pool) pool.Stats {
	t.Helper()
	st, err := p.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

func waiters(t *testing.T, ctx context.Context, p *pool.Pool, n int) {
	t.Helper()
	testutil.WaitFor(t, ctx, func() bool {
		st, err := p.Stats(ctx)
		return err == nil && st.Waiters == n
	})
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

// TestContention: 16 workers over 4 sessions share a pool of 8 keys for 400
// acquisitions. A checker (a per-key in-use flag set right after the grant
// and cleared right before Release) never sees a key held twice at once,
// tokens strictly increase per key, and at the quiescent end, with a known
// set of holds parked, Stats matches the checker's view exactly.
func TestContention(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 2*time.Minute)
	const sessions, perSession, total, parked = 4, 4, 400, 5
	members := keys("k", 8)
	admin := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	if err := pool.New(admin, "p").Add(ctx, members...); err != nil {
		t.Fatal(err)
	}

	inUse := map[string]*atomic.Bool{}
	for _, k := range members {
		inUse[k] = new(atomic.Bool)
	}
	var (
		overlaps, backwards atomic.Int32
		left                atomic.Int64
		mu                  sync.Mutex
		lastTok             = map[string]int64{}
		uses                = map[string]int{}
		grants              int
		park                = map[string]*session.Hold{} // key → parked hold
	)
	left.Store(total)
	grant := func(h *session.Hold) error {
		flag := inUse[h.Resource()]
		if flag == nil {
			return fmt.Errorf("granted %q, not a member", h.Resource())
		}
		if !flag.CompareAndSwap(false, true) {
			overlaps.Add(1)
		}
		mu.Lock()
		defer mu.Unlock()
		if h.Token() <= lastTok[h.Resource()] {
			backwards.Add(1)
		}
		lastTok[h.Resource()] = h.Token()
		uses[h.Resource()]++
		grants++
		return nil
	}
	errs := make(chan error, sessions*perSession)
	var wg sync.WaitGroup
	var ss []*session.Session
	for i := range sessions {
		s := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
		ss = append(ss, s)
		for j := range perSession {
			w := i*perSession + j
			wg.Go(func() {
				p := pool.New(s, "p")
				for left.Add(-1) >= 0 {
					h, err := p.Acquire(ctx)
					if err != nil {
						errs <- err
						return
					}
					if err := grant(h); err != nil {
						errs <- err
						return
					}
					if h.Err() != nil {
						errs <- fmt.Errorf("hold of %q ended while held: %w", h.Resource(), h.Err())
						return
					}
					inUse[h.Resource()].Store(false)
					if err := h.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
				if w%3 != 0 || w/3 >= parked {
					return
				}
				// Park one hold for the quiescent check (workers 0, 3, ... 12).
				h, err := p.Acquire(ctx)
				if err != nil {
					errs <- err
					return
				}
				if err := grant(h); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				park[h.Resource()] = h
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("worker: %v", err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d times a key was granted while the checker saw it held", n)
	}
	if n := backwards.Load(); n != 0 {
		t.Fatalf("%d tokens not strictly greater than the key's previous one", n)
	}
	if grants != total+parked || len(park) != parked {
		t.Fatalf("%d grants, %d parked; want %d, %d", grants, len(park), total+parked, parked)
	}
	for _, k := range members {
		if uses[k] == 0 {
			t.Errorf("key %q never granted in %d acquisitions: %v", k, total, uses)
		}
	}
	t.Logf("grants per key: %v", uses)

	// Quiescent: exactly the parked holds are in use.
	st := stats(t, ctx, pool.New(admin, "p"))
	var want []pool.Holder
	for _, k := range slices.Sorted(maps.Keys(park)) {
		h := park[k]
		sid, _, _ := strings.Cut(h.ID(), ".")
		want = append(want, pool.Holder{Key: k, Session: sid, Token: h.Token()})
	}
	got := slices.Clone(st.Held)
	for i := range got {
		got[i].Owner = ""
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Stats.Held = %+v, want %+v", got, want)
	}
	var flagged []string
	for _, k := range members {
		if inUse[k].Load() {
			flagged = append(flagged, k)
		}
	}
	if !slices.Equal(flagged, slices.Sorted(maps.Keys(park))) {
		t.Fatalf("checker flags %v, parked %v", flagged, slices.Sorted(maps.Keys(park)))
	}
	if st.Free != len(members)-parked || st.Waiters != 0 || !slices.Equal(st.Members, members) {
		t.Fatalf("Stats = %+v; want Free %d, Waiters 0, Members %v", st, len(members)-parked, members)
	}
	for _, h := range park {
		inUse[h.Resource()].Store(false)
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st = stats(t, ctx, pool.New(ss[0], "p"))
	if st.Free != len(members) || len(st.Held) != 0 || !slices.Equal(st.Members, members) {
		t.Fatalf("after releasing all: Stats = %+v", st)
	}
}

// TestSpread: Acquire takes the least recently released member, so a
// sequence of acquire/release rotates over every member instead of reusing
// one, even when releases fall within the same millisecond.
func TestSpread(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	s := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	p := pool.New(s, "spread")
	members := []string{"d", "b", "a", "c"}
	if err := p.Add(ctx, members...); err != nil {
		t.Fatal(err)
	}
	var seq []string
	for i := range 40 {
		var h *session.Hold
		var err error
		if i%2 == 0 {
			h, err = p.TryAcquire(ctx)
		} else {
			h, err = p.Acquire(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		seq = append(seq, h.Resource())
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Every window of len(members) consecutive acquisitions uses each member
	// once: the order repeats with period len(members).
	for i := range seq {
		if i >= len(members) && seq[i] != seq[i-len(members)] {
			t.Fatalf("acquisition %d took %q, want %q (least recently released); sequence %v",
				i, seq[i], seq[i-len(members)], seq)
		}
	}
	first := slices.Sorted(slices.Values(seq[:len(members)]))
	if !slices.Equal(first, []string{"a", "b", "c", "d"}) {
		t.Fatalf("first %d acquisitions %v: not every member", len(members), seq[:len(members)])
	}

	// With one member held, the others still rotate; the held one is skipped.
	held, err := pool.New(s, "spread").AcquireKey(ctx, seq[0])
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for range 9 {
		h, err := p.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[h.Resource()]++
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 3 || seen[seq[0]] != 0 {
		t.Fatalf("with %q held, 9 acquisitions took %v; want the 3 others 3 times each", seq[0], seen)
	}
	for k, n := range seen {
		if n != 3 {
			t.Fatalf("with %q held, 9 acquisitions took %v; %q %d times, want 3", seq[0], seen, k, n)
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFIFO: when every member is taken, Acquire waits in arrival order, and a
// release hands the released key directly to the first waiter.
func TestFIFO(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	var ss []*session.Session
	for range 3 {
		ss = append(ss, testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second}))
	}
	holder := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	hp := pool.New(holder, "fifo")
	if err := hp.Add(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	ha, err := hp.AcquireKey(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	hb, err := hp.TryAcquire(ctx)
	if err != nil || hb.Resource() != "b" {
		t.Fatalf("TryAcquire = %v, %v; want b", hb, err)
	}
	type served struct {
		i   int
		key string
		tok int64
	}
	const n = 10
	order := make(chan served, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			h, err := pool.New(ss[i%3], "fifo").Acquire(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- served{i, h.Resource(), h.Token()}
			if err := h.Release(ctx); err != nil {
				t.Errorf("waiter %d release: %v", i, err)
			}
		})
		waiters(t, ctx, hp, i+1)
	}
	if _, err := pool.New(ss[0], "fifo").TryAcquire(ctx); !errors.Is(err, pool.ErrExhausted) {
		t.Fatalf("TryAcquire with every member held: %v, want ErrExhausted", err)
	}
	if err := ha.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	want, last := 0, ha.Token()
	for got := range order {
		if got.i != want {
			t.Fatalf("waiter %d served at position %d", got.i, want)
		}
		if got.key != "a" || got.tok <= last {
			t.Fatalf("waiter %d got %q token %d; want the released key \"a\" with a token above %d",
				got.i, got.key, got.tok, last)
		}
		want, last = want+1, got.tok
	}
	if want != n {
		t.Fatalf("%d waiters served, want %d", want, n)
	}
	st := stats(t, ctx, hp)
	if st.Waiters != 0 || st.Free != 1 || len(st.Held) != 1 || st.Held[0].Key != "b" {
		t.Fatalf("after the waiters: Stats = %+v; want b held, a free, no waiters", st)
	}
	if err := hb.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAcquireKey: AcquireKey of a member waits for that member (other
// requests are not blocked by it), of a non-member fails with ErrNotMember
// and leaves nothing queued, and a waiter whose member is removed fails with
// ErrNotMember, told at once rather than by its fallback timer.
func TestAcquireKey(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = 10 * time.Second // the fallback re-check is about one TTL away
	s1 := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	s2 := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	s3 := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	p1, p2, p3 := pool.New(s1, "ak"), pool.New(s2, "ak"), pool.New(s3, "ak")
	if err := p1.Add(ctx, "a", "b", "c"); err != nil {
		t.Fatal(err)
	}

	if _, err := p2.AcquireKey(ctx, "nope"); !errors.Is(err, pool.ErrNotMember) ||
		!strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), `"ak"`) {
		t.Fatalf("AcquireKey of a non-member: %v, want ErrNotMember naming the pool and the key", err)
	}
	if st := stats(t, ctx, p1); st.Waiters != 0 || st.Free != 3 {
		t.Fatalf("after AcquireKey of a non-member: Stats = %+v", st)
	}

	h1, err := p1.AcquireKey(ctx, "b")
	if err != nil || h1.Resource() != "b" {
		t.Fatalf("AcquireKey(b) = %v, %v", h1, err)
	}
	type result struct {
		h   *session.Hold
		err error
	}
	got := make(chan result, 1)
	go func() {
		h, err := p2.AcquireKey(ctx, "b")
		got <- result{h, err}
	}()
	waiters(t, ctx, p1, 1)
	// Free members are still granted to others while "b" has a waiter.
	for range 2 {
		h, err := p3.TryAcquire(ctx)
		if err != nil || h.Resource() == "b" {
			t.Fatalf("TryAcquire beside a waiter for b: %v, %v", h, err)
		}
		defer h.Release(ctx)
	}
	select {
	case r := <-got:
		t.Fatalf("AcquireKey(b) returned %v, %v while b was held", r.h, r.err)
	default:
	}
	if err := h1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || r.h.Resource() != "b" || r.h.Token() <= h1.Token() {
		t.Fatalf("AcquireKey(b) after release = %v, %v; want b with a token above %d", r.h, r.err, h1.Token())
	}
	h2 := r.h

	// A waiter for "b" whose member is removed.
	go func() {
		h, err := p3.AcquireKey(ctx, "b")
		got <- result{h, err}
	}()
	waiters(t, ctx, p1, 1)
	removed := time.Now()
	if err := p1.Remove(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if !errors.Is(r.err, pool.ErrNotMember) || r.h != nil {
			t.Fatalf("waiting AcquireKey of a removed member: %v, %v; want ErrNotMember", r.h, r.err)
		}
	case <-time.After(ttl / 2):
		t.Fatalf("waiter for a removed member still waiting after %v", ttl/2)
	}
	t.Logf("waiter failed %v after Remove", time.Since(removed))
	if st := stats(t, ctx, p1); st.Waiters != 0 || slices.Contains(st.Members, "b") {
		t.Fatalf("after Remove: Stats = %+v; want no waiters, b gone", st)
	}
	select {
	case <-h2.Done():
	case <-ctx.Done():
		t.Fatal("hold of the removed member not ended")
	}
	if !errors.Is(h2.Err(), session.ErrLost) {
		t.Fatalf("hold of the removed member: %v, want ErrLost", h2.Err())
	}
}

// TestRemoveEndsOnlyThatHold: removing a held member ends exactly that hold
// with ErrLost within one heartbeat interval (through the heartbeat when the
// holder never subscribed, through the notification when it did); the
// session's other hold stays; the member's tokens keep increasing if it is
// added back.
func TestRemoveEndsOnlyThatHold(t *testing.T) {
	for _, subscribed := range []bool{false, true} {
		t.Run("subscribed="+strconv.FormatBool(subscribed), func(t *testing.T) {
			addr := redistest.Addr(t)
			ns := redistest.Namespace(t)
			ctx := testutil.Ctx(t, 30*time.Second)
			const ttl = 900 * time.Millisecond
			a := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
			admin := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
			pa, padmin := pool.New(a, "rm"), pool.New(admin, "rm")
			if err := padmin.Add(ctx, "x", "y", "z"); err != nil {
				t.Fatal(err)
			}
			acquire := pa.TryAcquire
			if subscribed {
				acquire = pa.Acquire // waiting subscribes
			}
			h1, err := acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			h2, err := acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gone := h1.Resource()
			removed := time.Now()
			if err := padmin.Remove(ctx, gone); err != nil {
				t.Fatal(err)
			}
			testutil.EndsTakenAway(t, "Remove", h1, h2, a, removed, ttl/3)
			if err := h1.Release(ctx); !errors.Is(err, session.ErrLost) {
				t.Fatalf("Release of the removed hold: %v, want ErrLost", err)
			}
			members, err := padmin.Members(ctx)
			if err != nil || slices.Contains(members, gone) || len(members) != 2 {
				t.Fatalf("Members after Remove(%q) = %v, %v", gone, members, err)
			}
			if _, err := pa.AcquireKey(ctx, gone); !errors.Is(err, pool.ErrNotMember) {
				t.Fatalf("AcquireKey of the removed member: %v, want ErrNotMember", err)
			}
			// Added back: first in line, with a token above the lost hold's.
			if err := padmin.Add(ctx, gone); err != nil {
				t.Fatal(err)
			}
			h3, err := padmin.TryAcquire(ctx)
			if err != nil || h3.Resource() != gone || h3.Token() <= h1.Token() {
				t.Fatalf("TryAcquire after re-adding %q = %v, %v; want it with a token above %d",
					gone, h3, err, h1.Token())
			}
			if h2.Err() != nil {
				t.Fatalf("other hold ended: %v", h2.Err())
			}
			for _, h := range []*session.Hold{h2, h3} {
				if err := h.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// snapshot returns every key of the server with its DUMP: a change to any
// value shows (TTLs are not part of it, so heartbeats do not).
func snapshot(t *testing.T, ctx context.Context, c rueidis.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	ks, err := c.Do(ctx, c.B().Keys().Pattern("*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		v, err := c.Do(ctx, c.B().Dump().Key(k).Build()).ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
		out[k] = v
	}
	n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64()
	if err != nil || int(n) != len(out) {
		t.Fatalf("DBSIZE %d (%v), %d keys listed", n, err, len(out))
	}
	return out
}

// TestRemoveNonMemberChangesNothing: Remove naming a non-member (among
// members) fails with ErrNotMember and changes nothing.
func TestRemoveNonMemberChangesNothing(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, srv.Addr())
	p := pool.New(s, "nm")
	if err := p.Add(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	h, err := p.AcquireKey(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	before, st0 := snapshot(t, ctx, probe), stats(t, ctx, p)
	for _, ks := range [][]string{{"zzz"}, {"a", "zzz"}, {"b", "zzz", "a"}} {
		if err := p.Remove(ctx, ks...); !errors.Is(err, pool.ErrNotMember) {
			t.Fatalf("Remove(%q): %v, want ErrNotMember", ks, err)
		}
	}
	if after := snapshot(t, ctx, probe); !maps.Equal(before, after) {
		t.Fatalf("Remove of a non-member changed Redis: %d keys before, %d after", len(before), len(after))
	}
	if st := stats(t, ctx, p); !statsEqual(st, st0) || h.Err() != nil {
		t.Fatalf("Stats %+v → %+v, hold %v", st0, st, h.Err())
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func statsEqual(a, b pool.Stats) bool {
	return slices.Equal(a.Members, b.Members) && slices.Equal(a.Held, b.Held) && a.Free == b.Free && a.Waiters == b.Waiters
}

// TestReplace: Replace makes the members exactly the given keys; a held
// member not kept loses its hold with ErrLost, a kept one stays held.
func TestReplace(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = 900 * time.Millisecond
	s := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	admin := testutil.Dial(t, addr, ns, session.Options{TTL: ttl})
	p, padmin := pool.New(s, "rp"), pool.New(admin, "rp")
	if err := padmin.Replace(ctx, "a", "b", "c", "d"); err != nil {
		t.Fatal(err)
	}
	if m, err := padmin.Members(ctx); err != nil || !slices.Equal(m, []string{"a", "b", "c", "d"}) {
		t.Fatalf("Members = %v, %v", m, err)
	}
	ha, err := p.AcquireKey(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	hc, err := p.AcquireKey(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if err := padmin.Replace(ctx, "e", "c", "b", "e"); err != nil {
		t.Fatal(err)
	}
	want := []string{"b", "c", "e"}
	if m, err := padmin.Members(ctx); err != nil || !slices.Equal(m, want) {
		t.Fatalf("Members after Replace = %v, %v; want %v", m, err, want)
	}
	select {
	case <-ha.Done():
	case <-time.After(ttl / 3 * 2):
		t.Fatalf("hold of a replaced-away member not ended within %v", ttl/3*2)
	}
	if !errors.Is(ha.Err(), session.ErrLost) || hc.Err() != nil || s.Err() != nil {
		t.Fatalf("after Replace: removed hold %v (want ErrLost), kept hold %v, session %v", ha.Err(), hc.Err(), s.Err())
	}
	st := stats(t, ctx, padmin)
	if st.Free != 2 || len(st.Held) != 1 || st.Held[0].Key != "c" || st.Held[0].Token != hc.Token() {
		t.Fatalf("Stats after Replace = %+v; want c held, b and e free", st)
	}
	// Replacing with the same set changes nothing.
	if err := padmin.Replace(ctx, want...); err != nil {
		t.Fatal(err)
	}
	if st2 := stats(t, ctx, padmin); !statsEqual(st, st2) || hc.Err() != nil {
		t.Fatalf("Replace with the same members: Stats %+v → %+v, hold %v", st, st2, hc.Err())
	}
	if err := hc.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCrashedHolderReturns: a holder that vanishes without releasing (its
// client is gone and its lease expires, here by a DEL) gives its member back:
// TryAcquire gets it with a newer token, and the crashed hold's own context
// ends with ErrLeaseLost.
func TestCrashedHolderReturns(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = time.Second
	other := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, addr)
	cc, err := rueidis.NewClient(testutil.ClientOption(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	crashed, err := session.New(ctx, cc, session.Options{Namespace: ns, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer crashed.Close()

	po := pool.New(other, "crash")
	if err := po.Add(ctx, "only"); err != nil {
		t.Fatal(err)
	}
	hc, err := pool.New(crashed, "crash").TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := po.TryAcquire(ctx); !errors.Is(err, pool.ErrExhausted) {
		t.Fatalf("TryAcquire of a held pool: %v, want ErrExhausted", err)
	}
	// The process vanishes: no release, no heartbeat; then its lease expires.
	cc.Close()
	if err := probe.Do(ctx, probe.B().Del().Key("{"+ns+"}:s:"+crashed.ID()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, ctx, po); st.Free != 1 || len(st.Held) != 0 {
		t.Fatalf("Stats after the holder's lease is gone = %+v; want the member free", st)
	}
	h, err := po.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire after the holder crashed: %v", err)
	}
	if h.Resource() != "only" || h.Token() <= hc.Token() {
		t.Fatalf("got %q token %d; want \"only\" with a token above %d", h.Resource(), h.Token(), hc.Token())
	}
	select {
	case <-hc.Done():
	case <-time.After(2 * ttl):
		t.Fatal("crashed hold's context not canceled within 2*TTL")
	}
	if !errors.Is(hc.Err(), session.ErrLeaseLost) {
		t.Fatalf("crashed hold cause = %v, want ErrLeaseLost", hc.Err())
	}
	st := stats(t, ctx, po)
	if len(st.Held) != 1 || st.Held[0].Session != other.ID() || st.Held[0].Token != h.Token() {
		t.Fatalf("Stats = %+v; want held by %s with token %d", st, other.ID(), h.Token())
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// commandCalls returns the total number of commands the server has run
// (the sum of calls= over every cmdstat_ line; commands run by scripts count).
func commandCalls(t *testing.T, ctx context.Context, c rueidis.Client) int64 {
	t.Helper()
	info, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for line := range strings.SplitSeq(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		_, rest, _ := strings.Cut(line, ":calls=")
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		total += v
	}
	return total
}

// TestAcquireCostIndependentOfSize: with 10,000 members, all but a few held
// (nearly all by one session), the server-side work of one TryAcquire (and
// of one Release) — counted as commands run, scripts' included — stays far
// below the number of members, whichever session asks.
func TestAcquireCostIndependentOfSize(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 2*time.Minute)
	const members, free, limit = 10000, 4, 100
	// Long TTLs: no heartbeat runs during a measurement.
	o := session.Options{TTL: time.Minute}
	big := testutil.Dial(t, srv.Addr(), ns, o)
	small := testutil.Dial(t, srv.Addr(), ns, o)
	probe := testutil.Client(t, srv.Addr())
	pb, ps := pool.New(big, "big"), pool.New(small, "big")
	if err := pb.Add(ctx, keys("m", members)...); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= members-free-2 {
				if _, err := pb.TryAcquire(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for range 2 {
		if _, err := ps.TryAcquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if st := stats(t, ctx, pb); st.Free != free || len(st.Held) != members-free {
		t.Fatalf("setup: Free %d, Held %d", st.Free, len(st.Held))
	}

	measure := func(what string, f func()) {
		t.Helper()
		c0 := commandCalls(t, ctx, probe)
		f()
		n := commandCalls(t, ctx, probe) - c0 - 1 // minus the first INFO
		t.Logf("%s: %d commands on the server", what, n)
		if n >= limit {
			t.Errorf("%s ran %d commands with %d members; want < %d", what, n, members, limit)
		}
	}
	var h *session.Hold
	measure("TryAcquire by the session holding most members", func() {
		var err error
		if h, err = pb.TryAcquire(ctx); err != nil {
			t.Fatal(err)
		}
	})
	measure("Release by the session holding most members", func() {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	measure("TryAcquire by another session", func() {
		if _, err := ps.TryAcquire(ctx); err != nil {
			t.Fatal(err)
		}
	})
	for range free - 1 {
		if _, err := pb.TryAcquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	measure("TryAcquire of an exhausted pool", func() {
		if _, err := ps.TryAcquire(ctx); !errors.Is(err, pool.ErrExhausted) {
			t.Fatalf("TryAcquire: %v, want ErrExhausted", err)
		}
	})
}

// TestBadInput: no keys, empty or oversized key and pool names, and a closed
// session fail with errors.Is-matchable errors and change nothing in Redis.
func TestBadInput(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	closed := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, srv.Addr())
	p := pool.New(s, "p")
	if err := p.Add(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	h, err := p.AcquireKey(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ctx, probe)

	type call struct {
		name string
		f    func() error
	}
	ops := func(p *pool.Pool, key string) []call {
		acq := func(f func(context.Context) (*session.Hold, error)) func() error {
			return func() error { _, err := f(ctx); return err }
		}
		return []call{
			{"Add", func() error { return p.Add(ctx, key) }},
			{"Remove", func() error { return p.Remove(ctx, key) }},
			{"Replace", func() error { return p.Replace(ctx, key) }},
			{"Acquire", acq(p.Acquire)},
			{"TryAcquire", acq(p.TryAcquire)},
			{"AcquireKey", func() error { _, err := p.AcquireKey(ctx, key); return err }},
			{"Stats", func() error { _, err := p.Stats(ctx); return err }},
			{"Members", func() error { _, err := p.Members(ctx); return err }},
			{"Reset", func() error { _, err := p.Reset(ctx); return err }},
		}
	}
	expect := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	for _, op := range []struct {
		name string
		f    func(context.Context, ...string) error
	}{{"Add", p.Add}, {"Remove", p.Remove}, {"Replace", p.Replace}} {
		expect(op.name+"()", op.f(ctx), pool.ErrNoKeys)
		for _, k := range testutil.InvalidNames() {
			expect(fmt.Sprintf("%s(%.8q)", op.name, k), op.f(ctx, k), session.ErrInvalidName)
			expect(fmt.Sprintf("%s(b, %.8q)", op.name, k), op.f(ctx, "b", k), session.ErrInvalidName)
			expect(fmt.Sprintf("%s(new, %.8q)", op.name, k), op.f(ctx, "new", k), session.ErrInvalidName)
		}
	}
	for _, k := range testutil.InvalidNames() {
		_, err := p.AcquireKey(ctx, k)
		expect(fmt.Sprintf("AcquireKey(%.8q)", k), err, session.ErrInvalidName)
	}
	for _, name := range testutil.InvalidNames() {
		for _, c := range ops(pool.New(s, name), "a") {
			expect(fmt.Sprintf("pool %.8q: %s", name, c.name), c.f(), session.ErrInvalidName)
		}
	}
	for _, c := range ops(pool.New(closed, "p"), "b") {
		expect("closed session: "+c.name, c.f(), session.ErrClosed)
	}
	// Well-formed, but not a member: also no change.
	_, err = p.AcquireKey(ctx, "nope")
	expect("AcquireKey(nope)", err, pool.ErrNotMember)
	expect("Remove(nope)", p.Remove(ctx, "nope"), pool.ErrNotMember)

	after := snapshot(t, ctx, probe)
	if len(after) != len(before) {
		t.Fatalf("DBSIZE %d → %d: invalid input changed Redis", len(before), len(after))
	}
	if !maps.Equal(before, after) {
		for k := range before {
			if before[k] != after[k] {
				t.Errorf("key %q changed", k)
			}
		}
		t.Fatal("invalid input changed Redis")
	}
	if h.Err() != nil {
		t.Fatalf("hold ended: %v", h.Err())
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestResetEndsEveryHold: Reset by another client takes the members of two
// sessions; each hold ends with ErrLost (not a lease loss) within one
// heartbeat interval, through the heartbeat (the holders never subscribed)
// and through the notification (they did). The members stay in the pool and
// the queue is served as after a release: a waiter for member x gets it, a
// waiter for any member the other one. Stale holders cannot release them.
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
			admin := pool.New(testutil.Dial(t, addr, ns, session.Options{TTL: ttl}), "r")
			if err := admin.Add(ctx, "x", "y"); err != nil {
				t.Fatal(err)
			}
			var holds, others []*session.Hold
			for _, s := range []*session.Session{a, b} {
				acquire := pool.New(s, "r").TryAcquire
				if subscribed {
					acquire = pool.New(s, "r").Acquire // waiting subscribes
				}
				h, err := acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				op := pool.New(s, "other-"+s.ID())
				if err := op.Add(ctx, "o"); err != nil {
					t.Fatal(err)
				}
				other, err := op.TryAcquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				holds, others = append(holds, h), append(others, other)
			}
			type got struct {
				h   *session.Hold
				err error
			}
			forX, forAny := make(chan got, 1), make(chan got, 1)
			go func() { h, err := pool.New(w, "r").AcquireKey(ctx, "x"); forX <- got{h, err} }()
			waiters(t, ctx, admin, 1)
			go func() { h, err := pool.New(w, "r").Acquire(ctx); forAny <- got{h, err} }()
			waiters(t, ctx, admin, 2)

			reset := time.Now()
			if n, err := admin.Reset(ctx); err != nil || n != 2 {
				t.Fatalf("Reset = %d, %v; want 2", n, err)
			}
			for i, s := range []*session.Session{a, b} {
				testutil.EndsTakenAway(t, "Reset", holds[i], others[i], s, reset, ttl/3)
			}
			gx, gany := <-forX, <-forAny
			if gx.err != nil || gany.err != nil || gx.h.Resource() != "x" || gany.h.Resource() != "y" {
				t.Fatalf("after Reset: waiter for x got %v, %v; waiter for any got %v, %v", gx.h, gx.err, gany.h, gany.err)
			}
			for _, h := range holds {
				if err := h.Release(ctx); !errors.Is(err, session.ErrLost) {
					t.Fatalf("Release of a reset hold: %v, want ErrLost", err)
				}
			}
			type held struct {
				key, sid string
				token    int64
			}
			var gotHeld []held
			st := stats(t, ctx, admin)
			for _, h := range st.Held {
				gotHeld = append(gotHeld, held{h.Key, h.Session, h.Token})
			}
			if want := []held{{"x", w.ID(), gx.h.Token()}, {"y", w.ID(), gany.h.Token()}}; st.Free != 0 || st.Waiters != 0 || !slices.Equal(gotHeld, want) {
				t.Fatalf("Stats after Reset: free %d, waiters %d, held %+v; want 0, 0, %+v", st.Free, st.Waiters, gotHeld, want)
			}
			for _, h := range append(others, gx.h, gany.h) {
				if err := h.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestResetNothingHeld: Reset of a pool with no member held takes nothing
// and changes nothing.
func TestResetNothingHeld(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, srv.Addr())
	p := pool.New(s, "idle")
	if err := p.Add(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	h, err := p.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ctx, probe)
	for _, name := range []string{"idle", "never"} {
		if n, err := pool.New(s, name).Reset(ctx); err != nil || n != 0 {
			t.Fatalf("Reset of %q = %d, %v; want 0", name, n, err)
		}
	}
	if after := snapshot(t, ctx, probe); !maps.Equal(before, after) {
		t.Fatalf("Reset with nothing held changed Redis: %d keys before, %d after", len(before), len(after))
	}
}
