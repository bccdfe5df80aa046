package rwmutex_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/session"
)

// TestSIGSTOPCancelsReaderAndWriter: with Redis paused, a read hold and a
// write hold of a session are canceled with ErrLeaseLost before the
// session's lease expires on the server, the only moment from which a
// conflicting grant could be made.
func TestSIGSTOPCancelsReaderAndWriter(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	const ttl = 1500 * time.Millisecond
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl, Heartbeat: ttl / 2})
	other := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 30*time.Second)

	r, err := rwmutex.New(s, "r").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	otherR, err := rwmutex.New(other, "r").RLock(ctx) // a reader of another session beside it
	if err != nil {
		t.Fatal(err)
	}
	w, err := rwmutex.New(s, "w").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d0 := s.Deadline()
	testutil.WaitFor(t, ctx, func() bool { return s.Deadline().After(d0) })
	expireAt, err := probe.Do(ctx, probe.B().Arbitrary("PEXPIRETIME").Keys("{"+ns+"}:s:"+s.ID()).Build()).AsInt64()
	if err != nil || expireAt <= 0 {
		t.Fatalf("PEXPIRETIME = %d, %v", expireAt, err)
	}
	srv.Stop()
	ended := map[string]time.Time{}
	for what, h := range map[string]*session.Hold{"reader": r, "writer": w} {
		select {
		case <-h.Done():
			ended[what] = time.Now()
		case <-time.After(2 * ttl):
			srv.Cont()
			t.Fatalf("%s not canceled within 2*TTL of SIGSTOP", what)
		}
	}
	srv.Cont()
	for what, h := range map[string]*session.Hold{"reader": r, "writer": w} {
		if !errors.Is(h.Err(), session.ErrLeaseLost) {
			t.Fatalf("%s's cause = %v, want ErrLeaseLost", what, h.Err())
		}
		margin := time.UnixMilli(expireAt).Sub(ended[what])
		if margin <= 0 {
			t.Fatalf("%s canceled %v after the server-side expiry", what, -margin)
		}
		t.Logf("%s canceled %v before the server-side expiry", what, margin)
	}
	// Once the lease is gone on the server (the session's Close deletes it,
	// or it expires), the other session's writer gets both, with tokens
	// above the lost holds'.
	testutil.WaitFor(t, ctx, func() bool {
		n, err := probe.Do(ctx, probe.B().Exists().Key("{"+ns+"}:s:"+s.ID()).Build()).AsInt64()
		return err == nil && n == 0
	})
	release(t, ctx, otherR)
	for name, lost := range map[string]*session.Hold{"r": r, "w": w} {
		h, err := rwmutex.New(other, name).TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock %q after the loss: %v", name, err)
		}
		if h.Token() <= lost.Token() {
			t.Fatalf("token %d after the lost hold's %d", h.Token(), lost.Token())
		}
		release(t, ctx, h)
	}
}

// TestRestartEmptyReclaims: Redis restarts without persistence while a
// session reads one mutex and writes another. The session reclaims both
// during the restart grace with their tokens; nothing is granted in the
// grace; afterwards grants get larger tokens.
func TestRestartEmptyReclaims(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = 2 * time.Second
	a := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl, RestartGrace: ttl})
	b := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl, RestartGrace: ttl})
	r, err := rwmutex.New(a, "read").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := rwmutex.New(a, "write").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	srv.Restart()
	restarted := time.Now()
	testutil.WaitFor(t, ctx, func() bool {
		st, err := rwmutex.New(b, "write").Holders(ctx)
		return err == nil && st.Writer != nil && st.Writer.Session == a.ID()
	})
	st, err := rwmutex.New(b, "read").Holders(ctx)
	if err != nil || len(st.Readers) != 1 || st.Readers[0].Token != r.Token() || st.Readers[0].Session != a.ID() {
		t.Fatalf("reader after reclaim: %+v, %v; want token %d", st, err, r.Token())
	}
	if st, err := rwmutex.New(b, "write").Holders(ctx); err != nil || st.Writer.Token != w.Token() {
		t.Fatalf("writer after reclaim: %+v, %v; want token %d", st, err, w.Token())
	}
	if r.Err() != nil || w.Err() != nil || a.Err() != nil {
		t.Fatal("holds ended by a restart they could reclaim from")
	}
	// In the grace even a reader beside a reader is refused.
	if _, err := rwmutex.New(b, "read").TryRLock(ctx); !errors.Is(err, session.ErrRestartGrace) && time.Since(restarted) < ttl {
		t.Fatalf("TryRLock during the grace: %v, want ErrRestartGrace", err)
	}
	r2, err := rwmutex.New(b, "read").RLock(ctx) // waits out the grace
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(restarted); waited < ttl-100*time.Millisecond {
		t.Fatalf("granted %v after the restart; the grace is %v", waited, ttl)
	}
	if r2.Token() <= r.Token() {
		t.Fatalf("token %d after the reclaimed %d", r2.Token(), r.Token())
	}
	release(t, ctx, r, r2, w)
	w2, err := rwmutex.New(b, "write").TryLock(ctx)
	if err != nil || w2.Token() <= w.Token() {
		t.Fatalf("TryLock after the reclaimed writer's release: %v; token must exceed %d", err, w.Token())
	}
	release(t, ctx, w2)
}

// TestCluster: on a 3+3 Redis Cluster, readers of two sessions share the
// mutex, a writer queued behind them is handed it by sharded pub/sub, and
// a reader queued after the writer follows it.
func TestCluster(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	c := rc.Client(t)
	ctx := testutil.Ctx(t, 60*time.Second)
	ns := redistest.Namespace(t)
	if err := c.Do(ctx, c.B().Set().Key("{"+ns+"}:epoch").Value("0").Nx().Build()).Error(); err != nil && !rueidis.IsRedisNil(err) {
		t.Fatal(err)
	}
	open := func() *session.Session {
		s, err := session.New(ctx, c, session.Options{Namespace: ns, TTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	s1, s2 := open(), open()
	rw1, rw2 := rwmutex.New(s1, "c"), rwmutex.New(s2, "c")
	r1, err := rw1.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rw2.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wc := lock(ctx, rw2, false)
	waitQueue(t, ctx, rw1, "w")
	rc3 := lock(ctx, rw1, true)
	waitQueue(t, ctx, rw1, "wr")
	release(t, ctx, r1, r2)
	w := recv(t, ctx, wc, "writer")
	release(t, ctx, w)
	r3 := recv(t, ctx, rc3, "reader after the writer")
	if !(r2.Token() < w.Token() && w.Token() < r3.Token()) {
		t.Fatalf("tokens %d %d %d", r2.Token(), w.Token(), r3.Token())
	}
	release(t, ctx, r3)
}
