package fence_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/session"
)

func TestMain(m *testing.M) {
	if helperMain() {
		return
	}
	goleak.VerifyTestMain(m, redistest.LeakOptions...)
}

// rawKeys returns the Redis keys the package documents for a fenced key:
// its highest token and its value hash, under one hash tag.
func rawKeys(name, key string) (mark, val string) {
	tag := "{fence:" + strconv.Itoa(len(name)) + ":" + name + ":" + key + "}"
	return tag + ":hi", tag + ":v"
}

// state is everything Redis holds for one fenced key, to compare before and
// after a refused call.
type state struct {
	Mark    string
	Val     map[string]string
	ValPTTL int64
}

func stateOf(t *testing.T, c rueidis.Client, name, key string) state {
	t.Helper()
	ctx := testutil.Ctx(t, 5*time.Second)
	mark, val := rawKeys(name, key)
	m, err := c.Do(ctx, c.B().Get().Key(mark).Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatalf("GET %s: %v", mark, err)
	}
	h, err := c.Do(ctx, c.B().Hgetall().Key(val).Build()).AsStrMap()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", val, err)
	}
	pttl, err := c.Do(ctx, c.B().Pttl().Key(val).Build()).AsInt64()
	if err != nil {
		t.Fatalf("PTTL %s: %v", val, err)
	}
	if pttl > 0 {
		pttl = 1 // expiring; the exact figure moves with time
	}
	return state{Mark: m, Val: h, ValPTTL: pttl}
}

// keysWith returns every Redis key that contains s.
func keysWith(t *testing.T, c rueidis.Client, s string) []string {
	t.Helper()
	ctx := testutil.Ctx(t, 5*time.Second)
	var all []string
	for cursor := uint64(0); ; {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatalf("SCAN: %v", err)
		}
		for _, k := range e.Elements {
			if strings.Contains(k, s) {
				all = append(all, k)
			}
		}
		if cursor = e.Cursor; cursor == 0 {
			return all
		}
	}
}

func setup(t *testing.T) (rueidis.Client, *fence.Store, string) {
	addr := redistest.Addr(t)
	c := testutil.Client(t, addr)
	name := redistest.Namespace(t)
	return c, fence.New(c, name), name
}

func mustGet(t *testing.T, st *fence.Store, key string) (string, int64) {
	t.Helper()
	v, tok, err := st.Get(testutil.Ctx(t, 5*time.Second), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return string(v), tok
}

func TestSetGetDelete(t *testing.T) {
	c, st, name := setup(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	if _, _, err := st.Get(ctx, "k"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get of a new key: got %v, want ErrNotFound", err)
	}
	if err := st.Set(ctx, "k", []byte("one"), 10); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if v, tok := mustGet(t, st, "k"); v != "one" || tok != 10 {
		t.Fatalf("Get = %q, %d; want one, 10", v, tok)
	}
	if err := st.Set(ctx, "k", []byte("two"), 10); err != nil {
		t.Fatalf("Set with the same token: %v", err)
	}
	if err := st.Set(ctx, "k", []byte("three"), 12); err != nil {
		t.Fatalf("Set with a higher token: %v", err)
	}
	if v, tok := mustGet(t, st, "k"); v != "three" || tok != 12 {
		t.Fatalf("Get = %q, %d; want three, 12", v, tok)
	}
	v, tok, err := st.GetFenced(ctx, "k", 13)
	if err != nil || string(v) != "three" || tok != 12 {
		t.Fatalf("GetFenced = %q, %d, %v; want three, 12, nil", v, tok, err)
	}
	if err := st.Delete(ctx, "k", 14); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, _, err := st.Get(ctx, "k"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after Delete: got %v, want ErrNotFound", err)
	}
	if _, _, err := st.GetFenced(ctx, "k", 14); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("GetFenced after Delete: got %v, want ErrNotFound", err)
	}
	if err := st.Delete(ctx, "k", 14); err != nil {
		t.Fatalf("Delete of an absent key: %v", err)
	}
	if got, want := stateOf(t, c, name, "k"), (state{Mark: "14", Val: map[string]string{}, ValPTTL: -2}); !equalState(got, want) {
		t.Fatalf("after Delete Redis holds %+v, want %+v", got, want)
	}
	// Values are bytes: empty and binary ones come back as written.
	for _, b := range [][]byte{{}, {0, 0xff, '|', '\n'}} {
		if err := st.Set(ctx, "bin", b, 1); err != nil {
			t.Fatalf("Set(%q): %v", b, err)
		}
		if v, _ := mustGet(t, st, "bin"); v != string(b) {
			t.Fatalf("Get = %q, want %q", v, b)
		}
	}
}

func equalState(a, b state) bool {
	return a.Mark == b.Mark && a.ValPTTL == b.ValPTTL && fmt.Sprint(a.Val) == fmt.Sprint(b.Val)
}

// A stale token is refused by every call, which then changes nothing:
// compared key by key in Redis before and after.
func TestStaleRefusedChangesNothing(t *testing.T) {
	c, st, name := setup(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	if err := st.SetTTL(ctx, "live", []byte("v20"), 20, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := st.Set(ctx, "gone", []byte("x"), 20); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "gone", 30); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.GetFenced(ctx, "read", 40); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("GetFenced of an absent key: got %v, want ErrNotFound", err)
	}
	for _, tc := range []struct {
		name, key string
		call      func() error
	}{
		{"Set below the writer", "live", func() error { return st.Set(ctx, "live", []byte("old"), 19) }},
		{"SetTTL below the writer", "live", func() error { return st.SetTTL(ctx, "live", []byte("old"), 1, time.Second) }},
		{"Delete below the writer", "live", func() error { return st.Delete(ctx, "live", 19) }},
		{"GetFenced below the writer", "live", func() error { _, _, err := st.GetFenced(ctx, "live", 19); return err }},
		{"re-create below the deleter", "gone", func() error { return st.Set(ctx, "gone", []byte("back"), 29) }},
		{"re-create with the old writer's token", "gone", func() error { return st.Set(ctx, "gone", []byte("back"), 20) }},
		{"Delete below the deleter", "gone", func() error { return st.Delete(ctx, "gone", 29) }},
		{"Set below a fenced read", "read", func() error { return st.Set(ctx, "read", []byte("late"), 39) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := stateOf(t, c, name, tc.key)
			err := tc.call()
			if !errors.Is(err, fence.ErrStale) {
				t.Fatalf("got %v, want ErrStale", err)
			}
			if after := stateOf(t, c, name, tc.key); !equalState(before, after) {
				t.Fatalf("Redis changed: before %+v, after %+v", before, after)
			}
		})
	}
	if v, tok := mustGet(t, st, "live"); v != "v20" || tok != 20 {
		t.Fatalf("Get(live) = %q, %d; want v20, 20", v, tok)
	}
}

// The lost-update story of GetFenced's documentation: B's fenced read
// refuses A's later write with a lower token.
func TestGetFencedRefusesOlderWriter(t *testing.T) {
	_, st, _ := setup(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	if err := st.Set(ctx, "n", []byte("5"), 1); err != nil {
		t.Fatal(err)
	}
	if v, _, err := st.GetFenced(ctx, "n", 10); err != nil || string(v) != "5" { // A reads, then pauses
		t.Fatalf("A's read: %q, %v", v, err)
	}
	if v, _, err := st.GetFenced(ctx, "n", 11); err != nil || string(v) != "5" { // B took over
		t.Fatalf("B's read: %q, %v", v, err)
	}
	if err := st.Set(ctx, "n", []byte("6"), 10); !errors.Is(err, fence.ErrStale) { // A wakes
		t.Fatalf("A's write after B's read: got %v, want ErrStale", err)
	}
	if err := st.Set(ctx, "n", []byte("6"), 11); err != nil {
		t.Fatalf("B's write: %v", err)
	}
	if v, tok := mustGet(t, st, "n"); v != "6" || tok != 11 {
		t.Fatalf("Get = %q, %d; want 6, 11", v, tok)
	}
}

// Tokens compare exactly as int64, also where doubles cannot tell them
// apart (2^53+1 vs 2^53), and across digit counts.
func TestTokensCompareExactly(t *testing.T) {
	_, st, _ := setup(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	steps := []struct {
		tok  int64
		want error
	}{
		{9, nil}, {10, nil}, {9, fence.ErrStale}, {1 << 53, nil}, {1<<53 + 1, nil}, {1 << 53, fence.ErrStale},
		{math.MaxInt64 - 1, nil}, {math.MaxInt64, nil}, {math.MaxInt64 - 1, fence.ErrStale}, {math.MaxInt64, nil},
	}
	for _, s := range steps {
		if err := st.Set(ctx, "k", []byte(strconv.FormatInt(s.tok, 10)), s.tok); !errors.Is(err, s.want) {
			t.Fatalf("Set with token %d: got %v, want %v", s.tok, err, s.want)
		}
	}
	if v, tok := mustGet(t, st, "k"); tok != math.MaxInt64 || v != strconv.FormatInt(math.MaxInt64, 10) {
		t.Fatalf("Get = %q, %d", v, tok)
	}
}

// Only the value expires: the highest token stays and refuses a stale
// writer after the value is gone.
func TestSetTTLValueExpiresMarkStays(t *testing.T) {
	c, st, name := setup(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	if err := st.SetTTL(ctx, "k", []byte("v"), 5, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, c, name, "k"); got.ValPTTL != 1 {
		t.Fatalf("value PTTL %d, want an expiring value", got.ValPTTL)
	}
	if err := st.Set(ctx, "k", []byte("v"), 5); err != nil { // Set persists
		t.Fatal(err)
	}
	if got := stateOf(t, c, name, "k"); got.ValPTTL != -1 {
		t.Fatalf("value PTTL %d after Set, want -1 (no TTL)", got.ValPTTL)
	}
	if err := st.SetTTL(ctx, "k", []byte("short"), 6, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, ctx, func() bool {
		_, _, err := st.Get(ctx, "k")
		return errors.Is(err, fence.ErrNotFound)
	})
	mark, _ := rawKeys(name, "k")
	if pttl, err := c.Do(ctx, c.B().Pttl().Key(mark).Build()).AsInt64(); err != nil || pttl != -1 {
		t.Fatalf("mark PTTL = %d, %v; want -1", pttl, err)
	}
	if err := st.Set(ctx, "k", []byte("stale"), 5); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Set after the value expired: got %v, want ErrStale", err)
	}
	if err := st.Set(ctx, "k", []byte("new"), 6); err != nil {
		t.Fatalf("Set with the last token after expiry: %v", err)
	}
}

// Invalid input returns an error errors.Is matches and writes nothing.
func TestInvalidInput(t *testing.T) {
	c, st, name := setup(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	type call struct {
		what string
		f    func(*fence.Store, string, int64) error
	}
	calls := []call{
		{"Set", func(s *fence.Store, k string, tok int64) error { return s.Set(ctx, k, []byte("v"), tok) }},
		{"SetTTL", func(s *fence.Store, k string, tok int64) error {
			return s.SetTTL(ctx, k, []byte("v"), tok, time.Second)
		}},
		{"Delete", func(s *fence.Store, k string, tok int64) error { return s.Delete(ctx, k, tok) }},
		{"GetFenced", func(s *fence.Store, k string, tok int64) error { _, _, err := s.GetFenced(ctx, k, tok); return err }},
		{"Get", func(s *fence.Store, k string, tok int64) error { _, _, err := s.Get(ctx, k); return err }},
	}
	for _, cl := range calls {
		for _, bad := range testutil.InvalidNames() {
			if err := cl.f(st, bad, 1); !errors.Is(err, session.ErrInvalidName) {
				t.Errorf("%s with key %q: got %v, want ErrInvalidName", cl.what, bad, err)
			}
			if bad == "" { // bad+name would be valid
				continue
			}
			if err := cl.f(fence.New(c, bad+name), "k", 1); !errors.Is(err, session.ErrInvalidName) {
				t.Errorf("%s on store %q: got %v, want ErrInvalidName", cl.what, bad, err)
			}
		}
		if cl.what == "Get" {
			continue
		}
		for _, tok := range []int64{0, -1, math.MinInt64} {
			if err := cl.f(st, "k", tok); !errors.Is(err, fence.ErrInvalidToken) {
				t.Errorf("%s with token %d: got %v, want ErrInvalidToken", cl.what, tok, err)
			}
		}
	}
	if err := fence.New(c, "").Set(ctx, "k", nil, 1); !errors.Is(err, session.ErrInvalidName) {
		t.Errorf("Set on store \"\": got %v, want ErrInvalidName", err)
	}
	for _, ttl := range []time.Duration{0, -time.Second, time.Millisecond - 1} {
		if err := st.SetTTL(ctx, "k", []byte("v"), 1, ttl); !errors.Is(err, fence.ErrInvalidTTL) {
			t.Errorf("SetTTL with ttl %v: got %v, want ErrInvalidTTL", ttl, err)
		}
	}
	if ks := keysWith(t, c, name); len(ks) != 0 {
		t.Fatalf("invalid calls wrote %v", ks)
	}
}

// Writers race on one key with interleaved tokens (writer i uses i, i+n,
// i+2n, ...). Whatever the interleaving: a write accepted after another
// accepted write had returned has the higher token, the highest token of all
// is accepted, and the value left is its.
func TestConcurrentWritersInterleavedTokens(t *testing.T) {
	_, st, _ := setup(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const writers, each = 8, 100
	type rec struct {
		tok           int64
		start, finish time.Time
		ok            bool
	}
	var mu sync.Mutex
	var recs []rec
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				tok := int64(1 + w + i*writers)
				start := time.Now()
				err := st.Set(ctx, "k", []byte(strconv.FormatInt(tok, 10)), tok)
				r := rec{tok: tok, start: start, finish: time.Now(), ok: err == nil}
				if err != nil && !errors.Is(err, fence.ErrStale) {
					t.Errorf("Set(%d): %v", tok, err)
				}
				mu.Lock()
				recs = append(recs, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(recs, func(a, b rec) int { return a.finish.Compare(b.finish) })
	var hi int64 // highest token among accepted writes that finished before the current one started
	var stale, accepted int
	j := 0
	byStart := slices.Clone(recs)
	slices.SortFunc(byStart, func(a, b rec) int { return a.start.Compare(b.start) })
	for _, r := range byStart {
		for ; j < len(recs) && recs[j].finish.Before(r.start); j++ {
			if recs[j].ok {
				hi = max(hi, recs[j].tok)
			}
		}
		if !r.ok {
			stale++
			continue
		}
		accepted++
		if r.tok < hi {
			t.Fatalf("write with token %d accepted after token %d had been accepted", r.tok, hi)
		}
	}
	top := int64(writers * each)
	if v, tok := mustGet(t, st, "k"); tok != top || v != strconv.FormatInt(top, 10) {
		t.Fatalf("Get = %q, %d; want the highest token's write %d", v, tok, top)
	}
	t.Logf("%d writes accepted, %d refused as stale", accepted, stale)
}
