package scripts

import (
	"strconv"
	"strings"
	"testing"
)

// serverMicros returns the server's clock in µs (TIME).
func (w *batchWorld) serverMicros() int64 {
	w.t.Helper()
	v, err := w.do("TIME").AsIntSlice()
	if err != nil || len(v) != 2 {
		w.t.Fatalf("TIME = %v, %v", v, err)
	}
	return v[0]*1_000_000 + v[1]
}

// TestNewToken: new_token.lua, which compares the stored token
// with the clock as strings, gives max(last + 1, server µs) for every kind
// of stored token: none, shorter, of the clock's length below and above
// it. Its two results are the same number. (A longer one would be above
// 2^53 µs, the year 2255, where Lua's numbers lose the + 1 whatever the
// comparison.)
func TestNewToken(t *testing.T) {
	w, ctx := startWorld(t)
	s := newScript(bare("--@include fastpath.lua\nlocal last, tok, n = ARGV[1] ~= '-' and ARGV[1]\n--@inline new_token.lua\nreturn {tok, n}"), false)
	now := w.serverMicros()
	ahead := strconv.FormatInt(now+1_000_000_000_000, 10) // 11.6 days ahead: same length
	for _, tc := range []struct {
		last string
		want int64 // 0: the clock
	}{
		{"-", 0},
		{"0", 0},
		{"1", 0},
		{strconv.FormatInt(now-1, 10), 0},
		{strconv.FormatInt(now-1_000_000_000, 10), 0},
		{ahead, now + 1_000_000_000_000 + 1},
		{"9" + strings.Repeat("0", len(ahead)-1), 9*pow10(len(ahead)-1) + 1}, // same length, above
	} {
		before := w.serverMicros()
		v, err := s.Exec(ctx, w.c, nil, []string{tc.last}).ToArray()
		after := w.serverMicros()
		if err != nil || len(v) != 2 {
			t.Fatalf("new_token(%s) = %v, %v", tc.last, v, err)
		}
		str, err := v[0].ToString()
		if err != nil {
			t.Fatalf("new_token(%s): token %v not a string: %v", tc.last, v[0], err)
		}
		n, err := v[1].AsInt64()
		if err != nil || strconv.FormatInt(n, 10) != str {
			t.Fatalf("new_token(%s) = %q, %v (%v): the two results differ", tc.last, str, v[1], err)
		}
		if tc.want != 0 && n != tc.want {
			t.Errorf("new_token(%s) = %d, want %d (last + 1)", tc.last, n, tc.want)
		}
		if tc.want == 0 && (n < before || n > after) {
			t.Errorf("new_token(%s) = %d, want the clock, within [%d, %d]", tc.last, n, before, after)
		}
	}
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// TestTokenAheadOfClock: when a resource's stored token is ahead of the
// server's clock (a failover to a replica whose clock is behind), each
// kind's fast-path grant (new_token) takes the stored token + 1, which the
// client reads like the clock's token, a string in the reply.
func TestTokenAheadOfClock(t *testing.T) {
	w, ctx := startWorld(t)
	if _, _, err := w.e.PoolChange(ctx, "p", "add", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	ahead := w.serverMicros() + 1_000_000_000_000
	for i, tc := range []struct {
		r    Resource
		gets int64            // GETs of the fast path: the full path reads the epoch marker too
		set  func(tok string) // stores tok as the resource's last token
	}{
		{Resource{Kind: Mutex, Name: "m"}, 1, func(tok string) {
			v, err := w.do("GET", w.e.K.Mutex("m")).ToString()
			f := strings.Split(v, "|")
			if err != nil || len(f) != 6 {
				t.Fatalf("mutex string %q, %v", v, err)
			}
			f[1] = tok
			w.do("SET", w.e.K.Mutex("m"), strings.Join(f, "|"), "KEEPTTL")
		}},
		{Resource{Kind: Semaphore, Name: "s", N: 1, Limit: 2}, 0, func(tok string) { w.do("HSET", w.e.K.Semaphore("s"), "tok", tok) }},
		{Resource{Kind: Pool, Name: "p"}, 0, func(tok string) { w.do("HSET", w.e.K.PoolBase("p")+"t", "a", tok) }},
		{Resource{Kind: RWMutex, Name: "rw"}, 0, func(tok string) { w.do("HSET", w.e.K.RWMutex("rw"), "tok", tok) }},
	} {
		hid := HoldID("a", uint64(2*i+1))
		if g, err := w.e.Acquire(ctx, tc.r, hid, false); err != nil || g.Status != Granted {
			t.Fatalf("%v: first Acquire = %+v, %v", tc.r.Kind, g, err)
		}
		if r, err := w.e.Release(ctx, tc.r, hid, false); err != nil || r != Freed {
			t.Fatalf("%v: Release = %v, %v", tc.r.Kind, r, err)
		}
		tc.set(strconv.FormatInt(ahead, 10))
		w.do("CONFIG", "RESETSTAT")
		g, err := w.e.Acquire(ctx, tc.r, HoldID("a", uint64(2*i+2)), false)
		if err != nil || g.Status != Granted || g.Token != ahead+1 {
			t.Errorf("%v: Acquire after the stored token %d = %+v, %v; want granted token %d", tc.r.Kind, ahead, g, err, ahead+1)
		}
		if n := w.calls("get"); n != tc.gets {
			t.Errorf("%v: %d GETs, want %d: not the fast path", tc.r.Kind, n, tc.gets)
		}
	}
}
