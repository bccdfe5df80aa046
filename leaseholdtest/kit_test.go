package leaseholdtest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/session"
)

// TestSessionDefaults: a session gets the kit's defaults, and its first grant
// does not wait out a restart grace although the grace is on.
func TestSessionDefaults(t *testing.T) {
	srv := leaseholdtest.New(t)
	s := srv.Session(t, session.Options{})
	o := s.Options()
	if o.TTL != leaseholdtest.DefaultTTL || o.Namespace != "leasehold" || srv.Namespace() != "leasehold" ||
		o.Owner != "leaseholdtest/"+t.Name() || o.RestartGrace != o.TTL {
		t.Fatalf("options = %+v", o)
	}
	ctx := testutil.Ctx(t, 10*time.Second)
	if _, err := mutex.New(s, "first").TryLock(ctx); err != nil {
		t.Fatalf("first TryLock on a new server: %v", err)
	}
	// Given fields are kept; another namespace is prepared too.
	s2 := srv.Session(t, session.Options{TTL: 3 * time.Second, Namespace: "other", Owner: "me"})
	if o := s2.Options(); o.TTL != 3*time.Second || o.Namespace != "other" || o.Owner != "me" {
		t.Fatalf("options = %+v", o)
	}
	if _, err := mutex.New(s2, "first").TryLock(ctx); err != nil {
		t.Fatalf("first TryLock in another namespace: %v", err)
	}
}

// TestOwnClientAndManager: a user's own client (session.New) and a Manager
// work on the server.
func TestOwnClientAndManager(t *testing.T) {
	srv := leaseholdtest.New(t)
	if got := srv.ClientOption().InitAddress; len(got) != 1 || got[0] != srv.Addr() {
		t.Fatalf("ClientOption().InitAddress = %v, Addr = %s", got, srv.Addr())
	}
	ctx := testutil.Ctx(t, 10*time.Second)
	c := srv.Client(t)
	// The kit's sessions' RestartGrace (their TTL): the sessions of one
	// namespace share one grace, which the first one records.
	s, err := session.New(ctx, c, session.Options{TTL: time.Second, RestartGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := mutex.New(s, "x").TryLock(ctx); err != nil {
		t.Fatalf("TryLock on a user's own client: %v", err)
	}

	m := srv.Manager(t, session.Options{})
	ms, err := m.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ms.Options().TTL != leaseholdtest.DefaultTTL {
		t.Fatalf("manager session TTL = %v", ms.Options().TTL)
	}
	if _, err := mutex.New(ms, "x").TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock of a held mutex = %v, want ErrLocked", err)
	}
}

// TestPauseHangs: while paused, commands are neither run nor answered (a
// ctx-bounded call ends with its ctx, not with an error reply); Resume runs
// the held ones in order.
func TestPauseHangs(t *testing.T) {
	srv := leaseholdtest.New(t)
	c := srv.Client(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	srv.Pause()
	srv.Pause() // idempotent

	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := c.Do(pctx, c.B().Ping().Build()).Error()
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("PING while paused = %v after %v; want the ctx deadline", err, time.Since(start))
	}

	set := make(chan error, 1)
	go func() { set <- c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error() }()
	select {
	case err := <-set:
		t.Fatalf("SET answered while paused: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	srv.Resume()
	if err := <-set; err != nil {
		t.Fatalf("held SET after Resume: %v", err)
	}
	if v, err := c.Do(ctx, c.B().Get().Key("k").Build()).ToString(); err != nil || v != "v" {
		t.Fatalf("GET after Resume = %q, %v", v, err)
	}
	srv.Resume() // no-op
}

// TestRestartEmpty: the restarted server listens on the same address with no
// data; commands held by a pause are dropped, not run.
func TestRestartEmpty(t *testing.T) {
	srv := leaseholdtest.New(t)
	c := srv.Client(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	if err := c.Do(ctx, c.B().Set().Key("before").Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	srv.Pause()
	held := make(chan error, 1)
	go func() { held <- c.Do(ctx, c.B().Set().Key("held").Value("1").Build()).Error() }()
	select {
	case err := <-held:
		t.Fatalf("SET answered while paused: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	srv.RestartEmpty(t)
	if err := <-held; err == nil {
		t.Fatal("a SET held by the pause succeeded across the restart")
	}
	if srv.Addr() != addr {
		t.Fatalf("address changed: %s -> %s", addr, srv.Addr())
	}
	n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64()
	if err != nil || n != 0 {
		t.Fatalf("DBSIZE after RestartEmpty = %d, %v; want 0", n, err)
	}

	// A session opened now meets the restart grace, as on a restarted Redis.
	s := srv.Session(t, session.Options{})
	if _, err := mutex.New(s, "x").TryLock(ctx); err == nil {
		t.Fatal("TryLock right after RestartEmpty was granted; the restart grace should refuse it")
	}
}

// TestCleanupWhilePaused: a test that ends with the server paused does not
// wait for its sessions' Close to time out.
func TestCleanupWhilePaused(t *testing.T) {
	srv := leaseholdtest.New(t)
	start := time.Now()
	t.Run("ends paused", func(t *testing.T) {
		s := srv.Session(t, session.Options{TTL: 5 * time.Second})
		if _, err := mutex.New(s, "x").TryLock(testutil.Ctx(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		srv.Pause()
	})
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("subtest with a 5s-TTL session took %v to clean up while paused", d)
	}
}

// fatalRecorder is a TB whose Fatalf records the message and ends the
// goroutine, as testing.T's does.
type fatalRecorder struct {
	*testing.T
	msg string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalOf runs fn in a goroutine with a fatalRecorder and returns the
// message it failed with, "" if it did not.
func fatalOf(t *testing.T, fn func(tb leaseholdtest.TB)) string {
	f := &fatalRecorder{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

// TestHelpersFailLoudly: a helper that would take nothing away, or that needs
// answers from a paused server, fails the test with a message saying why.
func TestHelpersFailLoudly(t *testing.T) {
	srv := leaseholdtest.New(t, leaseholdtest.WithNamespace("app"))
	s := srv.Session(t, session.Options{})
	ctx := testutil.Ctx(t, 10*time.Second)
	if err := pool.New(s, "p").Add(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		fn   func(tb leaseholdtest.TB)
		want string
	}{
		{"free mutex", func(tb leaseholdtest.TB) { srv.ResetMutex(tb, "free") }, `ResetMutex("free") in namespace "app": no live hold to take away`},
		{"no leader", func(tb leaseholdtest.TB) { srv.ResetElection(tb, "e") }, `ResetElection("e") in namespace "app": no live hold to take away`},
		{"free rwmutex", func(tb leaseholdtest.TB) { srv.ResetRWMutex(tb, "rw") }, `ResetRWMutex("rw") in namespace "app": no live hold to take away`},
		{"free semaphore", func(tb leaseholdtest.TB) { srv.ResetSemaphore(tb, "sem") }, `ResetSemaphore("sem") in namespace "app": no live hold to take away`},
		{"free pool", func(tb leaseholdtest.TB) { srv.ResetPool(tb, "p") }, `ResetPool("p") in namespace "app": no live hold to take away`},
		{"not a member", func(tb leaseholdtest.TB) { srv.RemovePoolMember(tb, "p", "nope") }, `RemovePoolMember("p", "nope") in namespace "app": pool "p": remove: pool: not a member`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fatalOf(t, tc.fn); !strings.Contains(got, tc.want) {
				t.Fatalf("failure = %q, want it to contain %q", got, tc.want)
			}
		})
	}

	srv.Pause()
	defer srv.Resume()
	for name, fn := range map[string]func(tb leaseholdtest.TB){
		"ResetMutex":       func(tb leaseholdtest.TB) { srv.ResetMutex(tb, "x") },
		"RemovePoolMember": func(tb leaseholdtest.TB) { srv.RemovePoolMember(tb, "p", "k1") },
		"Session":          func(tb leaseholdtest.TB) { srv.Session(tb, session.Options{}) },
		"Manager":          func(tb leaseholdtest.TB) { srv.Manager(tb, session.Options{}) },
	} {
		start := time.Now()
		if got := fatalOf(t, fn); !strings.Contains(got, "while the server is paused") {
			t.Errorf("%s while paused: failure = %q", name, got)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s while paused took %v to fail", name, d)
		}
	}
}

// TestInvalidNamespace: New reports a namespace the library refuses.
func TestInvalidNamespace(t *testing.T) {
	got := fatalOf(t, func(tb leaseholdtest.TB) { leaseholdtest.New(tb, leaseholdtest.WithNamespace("a{b}")) })
	if !strings.Contains(got, "invalid options") {
		t.Fatalf("failure = %q", got)
	}
}

// TestShardedSession: a sharded session (Options.Shards) works on the kit's
// server without waiting out a restart grace, and two of them exclude each
// other; an unsharded session is refused on the namespace.
func TestShardedSession(t *testing.T) {
	srv := leaseholdtest.New(t)
	o := session.Options{Namespace: "sharded", Shards: 8}
	s1, s2 := srv.Session(t, o), srv.Session(t, o)
	ctx := testutil.Ctx(t, 10*time.Second)
	for i := range 16 {
		name := fmt.Sprint("n", i)
		h, err := mutex.New(s1, name).TryLock(ctx)
		if err != nil {
			t.Fatalf("first TryLock of %s: %v", name, err)
		}
		if _, err := mutex.New(s2, name).TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
			t.Fatalf("TryLock of held %s = %v, want ErrLocked", name, err)
		}
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err := session.Dial(ctx, srv.ClientOption(), session.Options{Namespace: "sharded"})
	if !errors.Is(err, session.ErrShardsMismatch) {
		t.Fatalf("unsharded open on a sharded namespace = %v, want ErrShardsMismatch", err)
	}
}
