package chaos

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// Deterministic reproductions of library bugs the scenarios found, kept as
// regression tests. Both failed at commit 8955313's parent line before
// 754534a ("Waiters ride out Redis errors...") and 7649a35 ("one
// check_caller preamble for every acquire script").

func dialVia(t *testing.T, addr, ns string, ttl time.Duration) *session.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := session.Dial(ctx, rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true},
		session.Options{Namespace: ns, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestWaiterLeak: a Lock whose notification connection drops re-checks
// by subscribing again; when that subscribe fails or outlasts the Lock's ctx,
// Claim returns the error without withdrawing its queued hold id. The id is
// later handed the mutex, and the mutex stays held by a live session that
// was never told — until that session ends.
func TestWaiterLeak(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	px := redistest.StartProxy(t, srv.Addr())
	b := dialVia(t, srv.Addr(), ns, 5*time.Second)
	a := dialVia(t, px.Addr(), ns, 5*time.Second)
	ctx := testutil.Ctx(t, 30*time.Second)

	hb, err := mutex.New(b, "m").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lockErr := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		h, err := mutex.New(a, "m").Lock(wctx)
		if err == nil {
			_ = h.Release(ctx)
			err = errors.New("granted")
		}
		lockErr <- err
	}()
	waitUntil(t, func() bool {
		in, err := mutex.New(b, "m").Holder(ctx)
		return err == nil && in.Waiters == 1
	})
	// Drop a's connections (its waiter re-checks) and keep new ones silent
	// until the Lock's ctx is over; a's lease (TTL 5s) survives.
	px.Blackhole(true)
	px.Reset()
	lerr := <-lockErr
	px.Blackhole(false)
	t.Logf("Lock returned %v", lerr)
	if err := hb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// a's withdrawal of its hold id runs in the background once its
	// connection is back: within a few retries, not at a's next heartbeat.
	deadline := time.Now().Add(time.Second)
	for {
		in, err := mutex.New(b, "m").Holder(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if in.Session != a.ID() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mutex handed to session %s, whose Lock returned %q: held by nobody who knows it", a.ID(), lerr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRestartEmptyAcquire: after Redis restarts empty, a session inside
// its deadline should reclaim its holds during the restart grace. If the
// session asks for anything (Lock, TryLock, a waiter's re-check) before its
// next heartbeat, the acquire script checks the caller's lease before the
// epoch marker, answers "lease gone", and the session ends, losing its holds.
func TestRestartEmptyAcquire(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	a := dialVia(t, srv.Addr(), ns, 3*time.Second)
	ctx := testutil.Ctx(t, 30*time.Second)
	kept, err := mutex.New(a, "kept").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := a.Deadline()
	waitUntil(t, func() bool { return a.Deadline().After(d) }) // a heartbeat just went through
	srv.Kill()
	srv.Restart()
	// Before a's next heartbeat (1s away): the first call sees the broken
	// connection, the next one reaches the restarted server.
	for range 10 {
		_, err = mutex.New(a, "other").TryLock(ctx)
		t.Logf("TryLock right after the restart: %v", err)
		if err == nil || errors.Is(err, mutex.ErrLocked) || errors.Is(err, session.ErrLost) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // a heartbeat later, well inside a's deadline
	if err := kept.Err(); err != nil {
		t.Fatalf("hold lost across the empty restart although its session was inside its deadline: %v", err)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
