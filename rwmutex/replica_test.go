package rwmutex_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/session"
)

// TestReplicaAck: with ReplicaAck 1, read and write grants and the
// hand-off to a queued reader are on the replica when they are reported; with
// the replica paused, a release is reported ErrNotReplicated, a grant is
// refused with ErrNotReplicated and rolled back, and the holds end with
// ErrLeaseLost by the last acknowledged deadline (as the mutex's, in
// package session).
func TestReplicaAck(t *testing.T) {
	master, replica := redistest.StartReplicated(t)
	probe := testutil.Client(t, replica.Addr())
	ctx := testutil.Ctx(t, 30*time.Second)
	mc := testutil.Client(t, master.Addr())
	ns := redistest.Namespace(t)
	key := func(kind, name string) string { return "{" + ns + "}:" + kind + ":" + name }
	// The timeout is what each WAIT takes while the replica is paused, and
	// the three calls that meet it must end before the lease's deadline
	// (TTL); 100 ms, with the replica up, was missed when the whole
	// tree's tests loaded the 2 CPUs (the mutex's test in package session).
	const ttl = 3 * time.Second
	o := session.Options{TTL: ttl, ReplicaAck: 1, ReplicaAckTimeout: 500 * time.Millisecond}
	s := testutil.Dial(t, master.Addr(), ns, o)
	b := testutil.Dial(t, master.Addr(), ns, o)

	r, err := rwmutex.New(s, "acked").TryRLock(ctx)
	if err != nil {
		t.Fatalf("TryRLock with a live replica: %v", err)
	}
	if n, err := probe.Do(ctx, probe.B().Hexists().Key(key("rwr", "acked")).Field(r.ID()).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("reader %s on the replica: %d, %v", r.ID(), n, err)
	}
	w, err := rwmutex.New(s, "written").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock with a live replica: %v", err)
	}
	if v, err := probe.Do(ctx, probe.B().Hget().Key(key("rw", "written")).Field("w").Build()).ToString(); err != nil || v != w.ID() {
		t.Fatalf("replica writer = %q, %v; want %s", v, err, w.ID())
	}
	// A hand-off (the release's fast path) to a reader of another session.
	got := lock(ctx, rwmutex.New(b, "written"), true)
	waitQueue(t, ctx, rwmutex.New(s, "written"), "r")
	release(t, ctx, w)
	hb := recv(t, ctx, got, "handed-over reader")
	if n, err := probe.Do(ctx, probe.B().Hexists().Key(key("rwr", "written")).Field(hb.ID()).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("handed-over reader %s on the replica: %d, %v", hb.ID(), n, err)
	}
	r2, err := rwmutex.New(s, "released").TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := s.Deadline()
	testutil.WaitFor(t, ctx, func() bool { return s.Deadline().After(d) })

	replica.Stop()
	defer replica.Cont()
	if err := r2.Release(ctx); !errors.Is(err, session.ErrNotReplicated) {
		t.Fatalf("Release with the replica paused: %v, want ErrNotReplicated", err)
	}
	if _, err := rwmutex.New(s, "unacked").TryRLock(ctx); !errors.Is(err, session.ErrNotReplicated) {
		t.Fatalf("TryRLock with the replica paused: %v, want ErrNotReplicated", err)
	}
	if _, err := rwmutex.New(s, "unacked-w").TryLock(ctx); !errors.Is(err, session.ErrNotReplicated) {
		t.Fatalf("TryLock with the replica paused: %v, want ErrNotReplicated", err)
	}
	// Both grants are rolled back at once (read on the master).
	testutil.WaitFor(t, ctx, func() bool {
		n, err := mc.Do(ctx, mc.B().Exists().Key(key("rwr", "unacked")).Build()).AsInt64()
		m, err2 := mc.Do(ctx, mc.B().Hexists().Key(key("rw", "unacked-w")).Field("w").Build()).AsInt64()
		return err == nil && err2 == nil && n == 0 && m == 0
	})
	deadline := s.Deadline()
	select {
	case <-r.Done():
	case <-time.After(2 * ttl):
		t.Fatal("read hold not lost with no renewal acknowledged")
	}
	if !errors.Is(r.Err(), session.ErrLeaseLost) {
		t.Fatalf("read hold cause %v, want ErrLeaseLost", r.Err())
	}
	if time.Now().After(deadline.Add(50 * time.Millisecond)) {
		t.Fatalf("lost %v after the last acknowledged deadline", time.Since(deadline))
	}
}
