package session_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// Deterministic regressions: configurations that would grant one mutex to
// two sessions after Redis lost its data, or after a failover without
// ReplicaAck, unless session.New refuses them or the session detects it.

// dialNoMark opens a session on addr without marking the namespace intact
// (testutil.Dial does), as a process opened after a data loss would.
func dialNoMark(t *testing.T, opt rueidis.ClientOption, o session.Options) *session.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := session.Dial(ctx, opt, o)
	if err != nil {
		t.Fatalf("session.Dial: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// afterRenewal calls f right after Redis confirmed a renewal of s's lease
// (its PTTL jumps back up): the holder then notices a loss only at its next
// heartbeat, about one Heartbeat interval later, the worst case for it.
func afterRenewal(t *testing.T, ctx context.Context, c rueidis.Client, ns string, s *session.Session, f func()) {
	t.Helper()
	key := "{" + ns + "}:s:" + s.ID()
	last := int64(-1)
	for {
		v, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if last >= 0 && v > last+50 {
			f()
			return
		}
		last = v
		select {
		case <-ctx.Done():
			t.Fatal("no renewal seen")
		case <-time.After(time.Millisecond):
		}
	}
}

// lockAfterRelease checks that b's Lock of name waits until held is
// released: release is called once b is waiting, and b must be granted only
// after it, while held stays valid until then.
func lockAfterRelease(t *testing.T, ctx context.Context, b *session.Session, name string, held *session.Hold, wait time.Duration) {
	t.Helper()
	got := make(chan error, 1)
	var granted *session.Hold
	go func() {
		h, err := mutex.New(b, name).Lock(ctx)
		granted = h
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("granted %q (err %v) while the first holder still held it (its hold: %v)", name, err, held.Err())
	case <-time.After(wait):
	}
	if err := held.Err(); err != nil {
		t.Fatalf("the first holder's hold ended: %v", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock after the release: %v", err)
	}
	if granted.Token() <= held.Token() {
		t.Fatalf("token %d after %d", granted.Token(), held.Token())
	}
}

// TestMixedTTLsRestartEmpty (recipe 1): sessions of one namespace with
// different TTLs and the default restart grace; Redis restarts empty right
// after the long-TTL holder's renewal. The short-TTL session notices first;
// its grace must last until the holder has reclaimed (were it its own TTL,
// 500ms, it would be granted the mutex about 0.5s before the holder
// noticed). A session opened after the restart must wait too. Both default
// to the same 10s grace, which the test waits out once.
func TestMixedTTLsRestartEmpty(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 40*time.Second)
	admin := testutil.Client(t, srv.Addr())
	a := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 3 * time.Second})
	b := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 500 * time.Millisecond})
	ha, err := mutex.New(a, "x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	afterRenewal(t, ctx, admin, ns, a, func() {
		srv.Kill()
		srv.Restart()
	})
	opt := testutil.ClientOption(srv.Addr())
	c := dialNoMark(t, opt, session.Options{Namespace: ns, TTL: 500 * time.Millisecond})
	lockAfterRelease(t, ctx, b, "x", ha, 2*time.Second) // a's next heartbeat comes after 1s
	if _, err := mutex.New(c, "x").TryLock(ctx); err == nil {
		t.Fatal("c was granted a mutex b holds")
	}
}

// TestShorterGraceRefused: a session whose restart grace is shorter than
// the namespace's, or whose TTL is longer, is refused and leaves nothing
// in Redis; one that fits opens.
func TestShorterGraceRefused(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	admin := testutil.Client(t, srv.Addr())
	testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 3 * time.Second}) // records the default, 10s
	before := testutil.Keys(t, ctx, admin)
	opt := testutil.ClientOption(srv.Addr())
	dialRefused(ctx, t, opt,
		session.Options{Namespace: ns, TTL: time.Second, RestartGrace: 2 * time.Second},
		session.Options{Namespace: ns, TTL: 12 * time.Second},
		session.Options{Namespace: ns, TTL: time.Second, DisableRestartGrace: true})
	if after := testutil.Keys(t, ctx, admin); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("keys %v after refused sessions, before %v", after, before)
	}
	// The default grace fits every TTL up to 10s: a CLI with --ttl 3s next
	// to daemons with the default 10s.
	dialNoMark(t, opt, session.Options{Namespace: ns, TTL: 300 * time.Millisecond})
	dialNoMark(t, opt, session.Options{Namespace: ns, TTL: 10 * time.Second})
}

// dialRefused checks that Dial refuses each of os with ErrInvalidOptions.
func dialRefused(ctx context.Context, t *testing.T, opt rueidis.ClientOption, os ...session.Options) {
	t.Helper()
	for _, o := range os {
		s, err := session.Dial(ctx, opt, o)
		if !errors.Is(err, session.ErrInvalidOptions) {
			if s != nil {
				_ = s.Close()
			}
			t.Fatalf("Dial(%+v) = %v, want ErrInvalidOptions", o, err)
		}
		t.Logf("refused: %v", err)
	}
}

// TestFlushAllOnOldServer (recipe 2): FLUSHALL on a Redis that has been up
// longer than the grace. A grace counted from the process start would have
// none left, and a session opened after the flush would be granted at once
// what the holder, which notices only at its next heartbeat, holds.
func TestFlushAllOnOldServer(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	admin := testutil.Client(t, srv.Addr())
	const ttl = 1500 * time.Millisecond
	// The server has been up longer than the grace.
	testutil.WaitFor(t, ctx, func() bool {
		info, err := admin.Do(ctx, admin.B().Info().Section("server").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(info, "uptime_in_seconds:")
		up, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
		return time.Duration(up)*time.Second > 2*ttl
	})
	a := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl, RestartGrace: ttl})
	ha, err := mutex.New(a, "x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	afterRenewal(t, ctx, admin, ns, a, func() {
		if err := admin.Do(ctx, admin.B().Flushall().Build()).Error(); err != nil {
			t.Fatal(err)
		}
	})
	b := dialNoMark(t, testutil.ClientOption(srv.Addr()), session.Options{Namespace: ns, TTL: ttl, RestartGrace: ttl})
	lockAfterRelease(t, ctx, b, "x", ha, ttl)
}

// TestFailoverLostGrantDetected (recipe 3): without ReplicaAck, a replica is
// promoted while the session's client still talks to the old master, which
// grants it a mutex the new master never sees; then the client reaches the
// new master, where another session is granted the same mutex. Before the
// fix the heartbeat only renewed the lease (replicated, so present) and the
// stale hold never ended. Now the changed replication id makes the
// heartbeat check every hold: the lost one ends with ErrLost within about a
// heartbeat, and the replicated one stays.
func TestFailoverLostGrantDetected(t *testing.T) {
	master, replica := redistest.StartReplicated(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	testutil.InitEpoch(t, master.Addr(), ns)
	px := redistest.StartProxy(t, master.Addr())
	const ttl = 2 * time.Second
	a := testutil.Dial(t, px.Addr(), ns, session.Options{TTL: ttl})
	kept, err := mutex.New(a, "kept").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := testutil.Client(t, master.Addr())
	// Everything so far reached the replica.
	if err := m.Do(ctx, m.B().Set().Key("probe").Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if n, err := m.Do(ctx, m.B().Wait().Numreplicas(1).Timeout(5000).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}
	r := testutil.Client(t, replica.Addr())
	if err := r.Do(ctx, r.B().Replicaof().No().One().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	lost, err := mutex.New(a, "lost").Lock(ctx) // on the old master only
	if err != nil {
		t.Fatal(err)
	}
	px.Retarget(replica.Addr())
	b := dialNoMark(t, testutil.ClientOption(replica.Addr()), session.Options{Namespace: ns, TTL: ttl})
	hb, err := mutex.New(b, "lost").TryLock(ctx)
	if err != nil {
		t.Fatalf("the new master does not grant what it never saw granted: %v", err)
	}
	defer hb.Release(ctx)
	select {
	case <-lost.Done():
		if !errors.Is(lost.Err(), session.ErrLost) {
			t.Fatalf("lost hold ended with %v, want ErrLost", lost.Err())
		}
	case <-time.After(ttl):
		t.Fatal("the hold the failover lost did not end within a TTL")
	}
	if err := kept.Err(); err != nil {
		t.Fatalf("the replicated hold ended: %v", err)
	}
	if err := a.Err(); err != nil {
		t.Fatalf("the session ended: %v", err)
	}
}
