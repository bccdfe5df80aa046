package rwmutex_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/session"
)

// serverCalls returns how many commands the server ran, inside scripts too
// (INFO commandstats), by command name; INFO itself is left out.
func serverCalls(t *testing.T, ctx context.Context, c rueidis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, rest, _ := strings.Cut(rest, ":calls=")
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		// Not the scripts' work: the probe's own INFO, and what a client
		// sends on a connection it (re)opens or keeps alive, which can
		// happen during a counted loop (HELLO seen in a CI run).
		switch name {
		case "info", "hello", "client|setinfo", "client|setname", "ping":
		default:
			out[name] = v
		}
	}
	return out
}

// callsOf returns the commands the server ran during f, by name and in all.
func callsOf(t *testing.T, ctx context.Context, c rueidis.Client, f func()) (map[string]int64, int64) {
	t.Helper()
	before := serverCalls(t, ctx, c)
	f()
	diff, total := map[string]int64{}, int64(0)
	for name, n := range serverCalls(t, ctx, c) {
		if d := n - before[name]; d != 0 {
			diff[name] = d
			total += d
		}
	}
	return diff, total
}

// TestFastPaths: an uncontended RLock or Lock and its release, and a
// release that hands over to the first waiter, run the scripts' fast paths:
// no epoch marker read (GET), one TIME per grant, and a bounded number of
// Redis commands (INFO commandstats, commands inside scripts included).
// Tokens still increase when the stored token went back.
func TestFastPaths(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	// A long TTL: no heartbeat runs during the counted loops.
	a := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: time.Minute})
	b := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: time.Minute})
	probe := testutil.Client(t, srv.Addr())
	rw := rwmutex.New(a, "fast")
	// The first grant records a token: the fast paths need one.
	h, err := rw.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := h.Token()
	release(t, ctx, h)

	const n = 50
	for _, c := range []struct {
		name   string
		shared bool
		max    int64 // Redis commands per lock+release (was 24 and 26 before the fast paths)
	}{
		{"RLock", true, 13},
		{"Lock", false, 11},
	} {
		calls, total := callsOf(t, ctx, probe, func() {
			for range n {
				var h *session.Hold
				var err error
				if c.shared {
					h, err = rw.RLock(ctx)
				} else {
					h, err = rw.Lock(ctx)
				}
				if err != nil {
					t.Fatal(err)
				}
				if h.Token() <= last {
					t.Fatalf("%s: token %d after %d", c.name, h.Token(), last)
				}
				last = h.Token()
				release(t, ctx, h)
			}
		})
		t.Logf("%s+release: %.1f Redis commands each: %v", c.name, float64(total)/n, calls)
		if calls["get"] != 0 {
			t.Errorf("%s: %d GET (epoch marker) in %d uncontended lock+release, want 0", c.name, calls["get"], n)
		}
		if calls["time"] != n {
			t.Errorf("%s: %d TIME in %d uncontended lock+release, want one per grant", c.name, calls["time"], n)
		}
		if total > c.max*n {
			t.Errorf("%s: %d Redis commands in %d uncontended lock+release, want at most %d each", c.name, total, n, c.max)
		}
	}

	// Hand-offs: a writer to a queued writer, a writer to queued readers,
	// the last reader to a queued writer.
	rwb := rwmutex.New(b, "fast")
	handoff := func(what string, from []*session.Hold, shared ...bool) []*session.Hold {
		t.Helper()
		var got []<-chan *session.Hold
		want := ""
		for _, s := range shared {
			got = append(got, lock(ctx, rwb, s))
			want += map[bool]string{true: "r", false: "w"}[s]
			waitQueue(t, ctx, rwb, want)
		}
		var hs []*session.Hold
		calls, total := callsOf(t, ctx, probe, func() {
			release(t, ctx, from...)
			for i := range got {
				hs = append(hs, recv(t, ctx, got[i], what))
			}
		})
		t.Logf("%s: %d Redis commands: %v", what, total, calls)
		if calls["get"] != 0 {
			t.Errorf("%s: %d GET (epoch marker), want 0", what, calls["get"])
		}
		for _, h := range hs {
			if h.Token() <= last {
				t.Fatalf("%s: token %d after %d", what, h.Token(), last)
			}
			last = h.Token()
		}
		return hs
	}
	if h, err = rw.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	last = h.Token()
	hs := handoff("writer to writer", []*session.Hold{h}, false)
	hs = handoff("writer to two readers", hs, true, true)
	hs = handoff("last reader to writer", hs, false)
	release(t, ctx, hs...)

	// The stored token goes back (as after a restart from an older
	// snapshot): the clock keeps new tokens above it.
	if err := probe.Do(ctx, probe.B().Hset().Key("{"+ns+"}:rw:fast").FieldValue().FieldValue("tok", "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for _, shared := range []bool{true, false} {
		h := recv(t, ctx, lock(ctx, rw, shared), "after the token went back")
		if h.Token() <= last {
			t.Fatalf("token %d after the stored token went back, want above %d", h.Token(), last)
		}
		last = h.Token()
		release(t, ctx, h)
	}
}
