package session_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// The tests in this file run on a real Redis Cluster (3 masters, 3
// replicas: redistest.StartCluster) with rueidis in cluster mode.

// nsOn returns a fresh namespace whose slot master serves, with its epoch
// marker set (no restart grace: the cluster has just started).
func nsOn(t *testing.T, rc *redistest.Cluster, c rueidis.Client, master *redistest.Server) string {
	t.Helper()
	base := redistest.Namespace(t)
	for i := range 1000 {
		ns := fmt.Sprintf("%s-%d", base, i)
		if rc.MasterOf(t, redistest.Slot("{"+ns+"}")) != master {
			continue
		}
		if err := c.Do(context.Background(), c.B().Set().Key("{"+ns+"}:epoch").Value("0").Nx().Build()).Error(); err != nil && !rueidis.IsRedisNil(err) {
			t.Fatalf("set the epoch marker of %s: %v", ns, err)
		}
		return ns
	}
	t.Fatalf("no namespace found on %s", master.Addr())
	return ""
}

// otherMaster returns a master other than m.
func otherMaster(t *testing.T, rc *redistest.Cluster, m *redistest.Server) *redistest.Server {
	t.Helper()
	for _, x := range rc.Masters(t) {
		if x != m {
			return x
		}
	}
	t.Fatalf("no master other than %s", m.Addr())
	return nil
}

// lastMaster is the master of slot 16383: rueidis sends keyless commands
// to another node first, which hid the restart-grace bug on the others.
func lastMaster(t *testing.T, rc *redistest.Cluster) *redistest.Server {
	return rc.MasterOf(t, redistest.NumSlots-1)
}

func openOn(t *testing.T, c rueidis.Client, o session.Options) *session.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*o.TTL+10*time.Second)
	defer cancel()
	if os.Getenv("LEASEHOLD_TEST_LOG") != "" {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := session.New(ctx, c, o)
	if err != nil {
		t.Fatalf("session.New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestClusterSmoke: every primitive works on a cluster, with namespaces on
// each of the three masters, waiters are handed the resource by
// notification (sharded pub/sub), and an observer sees every new leader.
func TestClusterSmoke(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	c := rc.Client(t)
	masters := rc.Masters(t)
	if len(masters) != 3 {
		t.Fatalf("%d masters, want 3", len(masters))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, m := range masters {
		t.Run(fmt.Sprintf("master%d", i), func(t *testing.T) {
			ns := nsOn(t, rc, c, m)
			o := session.Options{Namespace: ns, TTL: 2 * time.Second}
			s1, s2 := openOn(t, c, o), openOn(t, c, o)

			// Mutex: a waiter in another session gets it on release.
			h1, err := mutex.New(s1, "m").Lock(ctx)
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			if _, err := mutex.New(s2, "m").TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
				t.Fatalf("TryLock of a held mutex = %v, want ErrLocked", err)
			}
			got := make(chan *session.Hold, 1)
			go func() {
				h, err := mutex.New(s2, "m").Lock(ctx)
				if err != nil {
					t.Errorf("waiting Lock: %v", err)
				}
				got <- h
			}()
			waitQueued(t, c, "{"+ns+"}:q:m:m", 1)
			if err := h1.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			h2 := <-got
			if h2 == nil {
				return
			}
			if h2.Token() <= h1.Token() {
				t.Errorf("hand-off token %d not above %d", h2.Token(), h1.Token())
			}
			if err := h2.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}

			// Semaphore: the limit holds across sessions.
			sem1, sem2 := semaphore.New(s1, "sem", 2), semaphore.New(s2, "sem", 2)
			p1, err := sem1.Acquire(ctx, 2)
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if _, err := sem2.TryAcquire(ctx, 1); !errors.Is(err, semaphore.ErrNoPermits) {
				t.Fatalf("TryAcquire over the limit = %v, want ErrNoPermits", err)
			}
			if err := p1.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			p2, err := sem2.TryAcquire(ctx, 1)
			if err != nil {
				t.Fatalf("TryAcquire after release: %v", err)
			}
			_ = p2.Release(ctx)

			// Pool: each member once.
			pl := pool.New(s1, "pool")
			if err := pl.Add(ctx, "a", "b"); err != nil {
				t.Fatalf("Add: %v", err)
			}
			k1, err := pl.Acquire(ctx)
			if err != nil {
				t.Fatalf("pool Acquire: %v", err)
			}
			k2, err := pool.New(s2, "pool").Acquire(ctx)
			if err != nil {
				t.Fatalf("pool Acquire: %v", err)
			}
			if k1.Resource() == k2.Resource() {
				t.Fatalf("both sessions hold pool member %q", k1.Resource())
			}
			if _, err := pool.New(s2, "pool").TryAcquire(ctx); !errors.Is(err, pool.ErrExhausted) {
				t.Fatalf("TryAcquire of an exhausted pool = %v, want ErrExhausted", err)
			}
			_, _ = k1.Release(ctx), k2.Release(ctx)

			// Election: an observer sees both leaders.
			octx, ocancel := context.WithCancel(ctx)
			defer ocancel()
			seen := election.New(s2, "el").Observe(octx)
			l1, err := election.New(s1, "el").Campaign(ctx, "one")
			if err != nil {
				t.Fatalf("Campaign: %v", err)
			}
			waitLeader(t, seen, "one")
			_ = l1.Release(ctx)
			l2, err := election.New(s2, "el").Campaign(ctx, "two")
			if err != nil {
				t.Fatalf("Campaign: %v", err)
			}
			waitLeader(t, seen, "two")
			_ = l2.Release(ctx)

			// Concurrent calls of a session go to Redis together
			// (internal/scripts/batch.go): own mutexes, and one shared
			// with the other session, handed over between batches.
			concurrentLocks(t, ctx, s1, s2)
		})
	}
}

// concurrentLocks runs 24 goroutines of s1 locking and releasing a mutex
// each, and 4 of s1 and 4 of s2 on one shared mutex, 20 times each
// (testutil.LockRounds): every call succeeds, and the shared mutex never
// has two holders.
func concurrentLocks(t *testing.T, ctx context.Context, s1, s2 *session.Session) {
	t.Helper()
	sessions, names := make([]*session.Session, 32), make([]string, 32)
	for g := range names {
		sessions[g], names[g] = s1, fmt.Sprintf("own%d", g)
		if g >= 24 {
			names[g] = "shared"
		}
		if g >= 28 {
			sessions[g] = s2
		}
	}
	if err := testutil.LockRounds(ctx, sessions, names, 20); err != nil {
		t.Fatal(err)
	}
}

// waitQueued waits until the queue list key holds n entries.
func waitQueued(t *testing.T, c rueidis.Client, key string, n int64) {
	t.Helper()
	until := time.Now().Add(10 * time.Second)
	for {
		got, err := c.Do(context.Background(), c.B().Llen().Key(key).Build()).AsInt64()
		if err == nil && got == n {
			return
		}
		if time.Now().After(until) {
			t.Fatalf("queue %s: %d entries (err %v), want %d", key, got, err, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitLeader(t *testing.T, seen <-chan election.Leader, value string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-seen:
			if !ok {
				t.Fatalf("Observe ended before leader %q", value)
			}
			if l.Value == value {
				return
			}
		case <-timeout:
			t.Fatalf("observer did not see leader %q", value)
		}
	}
}

// TestClusterRestartEmptyKeepsHolder: the master of the namespace's slot
// restarts empty inside cluster-node-timeout (no failover). The holder's
// session reclaims its lease and mutex during the restart grace, which
// counts from that master's start; meanwhile a new session is refused the
// mutex, and the holder's context is never canceled. The namespace is on
// the master of slot 16383, where a grace computed from another node's
// uptime let the new session in 9 times out of 10.
func TestClusterRestartEmptyKeepsHolder(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	c := rc.Client(t)
	m := lastMaster(t, rc)
	ns := nsOn(t, rc, c, m)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A master restarted inside the node timeout answers CLUSTERDOWN for
	// its first 2 s (Redis' CLUSTER_WRITABLE_DELAY): the holder must outlast
	// that to reclaim.
	const ttl = 5 * time.Second
	o := session.Options{Namespace: ns, TTL: ttl, RestartGrace: ttl}
	s1 := openOn(t, c, o)
	h, err := mutex.New(s1, "m").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}

	rc.RestartEmpty(t, m)

	// Right after the restart: a new session may open (a lease is no
	// grant), but the mutex is refused to it, and the grace set by the
	// restarted master's first script counts from then. The holder may
	// have reclaimed the mutex already (its heartbeat runs meanwhile):
	// TryLock then answers that it is held.
	s2 := openOn(t, c, o)
	if _, err := mutex.New(s2, "m").TryLock(ctx); !errors.Is(err, session.ErrRestartGrace) && !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock right after the restart = %v, want ErrRestartGrace or ErrLocked", err)
	}
	left := graceLeft(t, c, ns)
	if left < ttl/2 || left > ttl {
		t.Errorf("restart grace left = %v just after the restart, want about the whole grace (%v)", left, ttl)
	}
	// The holder reclaims its lease and its mutex at its next heartbeat.
	until := time.Now().Add(ttl)
	for {
		n, err := c.Do(ctx, c.B().Exists().Key("{"+ns+"}:m:m").Build()).AsInt64()
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(until) {
			t.Fatalf("holder did not reclaim the mutex within a TTL (err %v)", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Refused: the grace may be over by now, the mutex is held anyway.
	if _, err := mutex.New(s2, "m").TryLock(ctx); !errors.Is(err, session.ErrRestartGrace) && !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock after the reclaim = %v, want ErrRestartGrace or ErrLocked", err)
	}
	if err := h.Err(); err != nil {
		t.Fatalf("holder's hold ended: %v, want it reclaimed", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	h2, err := mutex.New(s2, "m").Lock(ctx) // waits out the rest of the grace
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	if h2.Token() <= h.Token() {
		t.Errorf("token %d after the restart not above %d", h2.Token(), h.Token())
	}
}

// graceLeft returns the restart grace left in namespace ns: the epoch
// marker's deadline (server ms) minus the server's time.
func graceLeft(t *testing.T, c rueidis.Client, ns string) time.Duration {
	t.Helper()
	ctx := context.Background()
	v, err := c.Do(ctx, c.B().Eval().Script(`local t = redis.call('TIME')
return tonumber(string.match(redis.call('GET', KEYS[1]), '^%d+')) - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))`).
		Numkeys(1).Key("{"+ns+"}:epoch").Build()).AsInt64()
	if err != nil {
		t.Fatalf("read the epoch marker: %v", err)
	}
	return time.Duration(v) * time.Millisecond
}

// TestClusterFailoverResumesNotifications: a manual CLUSTER FAILOVER of the
// namespace's master drops the waiter's shard channel subscription (Redis
// sends sunsubscribe). The session notices, subscribes again on the new
// master, and the next release hands the mutex over by notification, long
// before the waiter's fallback re-check (about the holder's TTL). With
// ReplicaAck 1, the promoted replica (whose script cache is empty) serves
// Lock and Release too.
func TestClusterFailoverResumesNotifications(t *testing.T) {
	for _, acks := range []int{0, 1} {
		t.Run(fmt.Sprintf("ReplicaAck=%d", acks), func(t *testing.T) {
			rc := redistest.StartCluster(t, redistest.ClusterOptions{})
			c := rc.Client(t)
			m := lastMaster(t, rc)
			ns := nsOn(t, rc, c, m)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const ttl = 4 * time.Second
			o := session.Options{Namespace: ns, TTL: ttl, ReplicaAck: acks}
			holder, waiter := openOn(t, c, o), openOn(t, c, o)

			for round := range 2 {
				h, err := mutex.New(holder, "m").Lock(ctx)
				if err != nil {
					t.Fatalf("round %d: Lock: %v", round, err)
				}
				got := make(chan *session.Hold, 1)
				go func() {
					h, err := mutex.New(waiter, "m").Lock(ctx)
					if err != nil {
						t.Errorf("waiting Lock: %v", err)
					}
					got <- h
				}()
				key := "{" + ns + "}:q:m:m"
				waitQueued(t, c, key, 1)
				if round == 1 {
					// Fail over while the waiter waits; then wait until it is
					// subscribed again on the new master.
					newM := rc.ReplicaOf(t, m)
					rc.Failover(t, newM)
					rc.WaitHealthy(t)
					waitSubscribed(t, rc, "{"+ns+"}:n:"+waiter.ID())
					waitQueued(t, c, key, 1)
				}
				released := time.Now()
				if err := h.Release(ctx); err != nil {
					t.Fatalf("round %d: Release: %v", round, err)
				}
				h2 := <-got
				if h2 == nil {
					return
				}
				if gap := time.Since(released); gap > ttl/4 {
					t.Errorf("round %d: waiter granted %v after the release, want a notification well before the re-check (~%v)",
						round, gap, ttl)
				}
				if err := h2.Release(ctx); err != nil {
					t.Fatalf("round %d: Release: %v", round, err)
				}
			}
		})
	}
}

// waitSubscribed waits until a node of the cluster counts a shard channel
// subscriber of ch (Redis 7 serves SSUBSCRIBE on a replica of the slot's
// master too, and SPUBLISH reaches every node of the shard).
func waitSubscribed(t *testing.T, rc *redistest.Cluster, ch string) {
	t.Helper()
	until := time.Now().Add(10 * time.Second)
	for {
		for _, node := range rc.Nodes() {
			v, err := node.Do(t, "PUBSUB", "SHARDNUMSUB", ch).ToArray()
			if err == nil && len(v) == 2 {
				if n, _ := v[1].AsInt64(); n == 1 {
					return
				}
			}
		}
		if time.Now().After(until) {
			t.Fatalf("no node counts a subscriber of %s", ch)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClusterScriptFlush: SCRIPT FLUSH on every node, with and without
// ReplicaAck: the scripts are sent again with EVAL on the node that owns the
// slot, never loaded on another one.
func TestClusterScriptFlush(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	c := rc.Client(t)
	m := lastMaster(t, rc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, acks := range []int{0, 1} {
		ns := nsOn(t, rc, c, m)
		s := openOn(t, c, session.Options{Namespace: ns, TTL: 2 * time.Second, ReplicaAck: acks})
		for i := range 3 {
			rc.ScriptFlushAll(t)
			h, err := mutex.New(s, "m").Lock(ctx)
			if err != nil {
				t.Fatalf("ReplicaAck %d, round %d: Lock after SCRIPT FLUSH: %v", acks, i, err)
			}
			rc.ScriptFlushAll(t)
			if err := h.Release(ctx); err != nil {
				t.Fatalf("ReplicaAck %d, round %d: Release after SCRIPT FLUSH: %v", acks, i, err)
			}
		}
	}
}

// TestClusterSlotMigration: the namespace's slot moves to another master,
// key by key, while one session holds the mutex and another keeps trying
// it. Grants and releases wait while Redis answers TRYAGAIN (every script
// declares the migration probe); none is granted to the second session.
// The heartbeat runs throughout (it declares only the lease), so the hold
// outlives a move that lasts longer than the TTL.
func TestClusterSlotMigration(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pause time.Duration // between two keys moved
	}{
		{"fast", 0},
		{"slower-than-the-TTL", 40 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := redistest.StartCluster(t, redistest.ClusterOptions{})
			c := rc.Client(t)
			m := lastMaster(t, rc)
			ns := nsOn(t, rc, c, m)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const ttl = time.Second
			o := session.Options{Namespace: ns, TTL: ttl}
			holder, other := openOn(t, c, o), openOn(t, c, o)
			h, err := mutex.New(holder, "m").Lock(ctx)
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			// More keys in the slot (a semaphore is two), so that the slow
			// move takes well over the TTL.
			for i := range 30 {
				p, err := semaphore.New(other, fmt.Sprintf("sem%d", i), 2).Acquire(ctx, 1)
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				defer p.Release(ctx)
			}
			to := otherMaster(t, rc, m)
			stop := make(chan struct{})
			tried := make(chan int, 1)
			go func() {
				n := 0
				defer func() { tried <- n }()
				for {
					select {
					case <-stop:
						return
					default:
					}
					tctx, tcancel := context.WithTimeout(ctx, ttl/2)
					g, err := mutex.New(other, "m").TryLock(tctx)
					tcancel()
					n++
					switch {
					case err == nil:
						t.Errorf("mutex granted to a second session during the slot move (token %d)", g.Token())
						_ = g.Release(ctx)
					case !errors.Is(err, mutex.ErrLocked) && !errors.Is(err, context.DeadlineExceeded):
						t.Errorf("TryLock during the slot move = %v, want ErrLocked, or its ctx's end while the slot moves", err)
					}
				}
			}()
			start := time.Now()
			rc.MigrateSlot(t, redistest.Slot("{"+ns+"}"), to, tc.pause)
			took := time.Since(start)
			close(stop)
			if n := <-tried; n == 0 {
				t.Fatal("no TryLock ran during the move")
			}
			t.Logf("the move took %v (TTL %v)", took.Round(time.Millisecond), ttl)
			if tc.pause > 0 && took < 2*ttl {
				t.Fatalf("the slow move took %v, want over 2 x TTL (%v) for the test to mean something", took, 2*ttl)
			}
			for _, s := range []*session.Session{holder, other} {
				if err := s.Err(); err != nil {
					t.Fatalf("session lost across the slot move: %v", err)
				}
			}
			if err := h.Err(); err != nil {
				t.Fatalf("hold lost across the slot move: %v", err)
			}
			if err := h.Release(ctx); err != nil {
				t.Fatalf("Release after the move: %v", err)
			}
			g, err := mutex.New(other, "m").TryLock(ctx)
			if err != nil {
				t.Fatalf("TryLock after release: %v", err)
			}
			_ = g.Release(ctx)
		})
	}
}

// countHandler counts the log records whose message is msg.
type countHandler struct {
	msg string
	n   *atomic.Int64
}

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// TestClusterSlotMoveResubscribesAtOnce: a waiter's shard channel
// subscription is dropped when the slot moves; its session subscribes again
// on the node the slot moved to even while rueidis' slot map still names
// the old owner (which answers MOVED), so no subscribe fails and the next
// release hands the mutex over by notification.
func TestClusterSlotMoveResubscribesAtOnce(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	c := rc.Client(t)
	m := lastMaster(t, rc)
	ns := nsOn(t, rc, c, m)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const ttl = 4 * time.Second
	var failed atomic.Int64
	holder := openOn(t, c, session.Options{Namespace: ns, TTL: ttl})
	waiter := openOn(t, c, session.Options{Namespace: ns, TTL: ttl,
		Logger: slog.New(countHandler{msg: "subscribe failed", n: &failed})})
	to := otherMaster(t, rc, m)
	for round, dst := range []*redistest.Server{to, m} {
		h, err := mutex.New(holder, "m").Lock(ctx)
		if err != nil {
			t.Fatalf("round %d: Lock: %v", round, err)
		}
		got := make(chan *session.Hold, 1)
		go func() {
			h, err := mutex.New(waiter, "m").Lock(ctx)
			if err != nil {
				t.Errorf("waiting Lock: %v", err)
			}
			got <- h
		}()
		waitQueued(t, c, "{"+ns+"}:q:m:m", 1)
		rc.MigrateSlot(t, redistest.Slot("{"+ns+"}"), dst, 0)
		waitSubscribed(t, rc, "{"+ns+"}:n:"+waiter.ID())
		released := time.Now()
		if err := h.Release(ctx); err != nil {
			t.Fatalf("round %d: Release: %v", round, err)
		}
		h2 := <-got
		if h2 == nil {
			return
		}
		if gap := time.Since(released); gap > ttl/4 {
			t.Errorf("round %d: waiter granted %v after the release, want a notification", round, gap)
		}
		if err := h2.Release(ctx); err != nil {
			t.Fatalf("round %d: Release: %v", round, err)
		}
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d subscribes failed after the slot moves, want none", n)
	}
}
