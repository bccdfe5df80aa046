package session_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// Tests of leasehold under a Redis ACL user limited to one namespace, and of
// the Redis refusals that retrying cannot fix (session.ErrRedisRefused).

// setUser creates or changes ACL user name (password "pw") on srv, as the
// default user.
func setUser(t *testing.T, srv *redistest.Server, name string, rules ...string) {
	t.Helper()
	args := append([]string{"ACL", "SETUSER", name, "on", ">pw"}, rules...)
	if err := srv.Do(t, args...).Error(); err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
}

// nsRules returns the key and channel rules of namespace ns.
func nsRules(ns string) []string { return []string{"~{" + ns + "}:*", "&{" + ns + "}:*"} }

// minimalRules returns the least-privilege rules for namespace ns:
// scripts.ACLCommands and nothing else.
func minimalRules(ns string) []string {
	rules := append(nsRules(ns), "-@all")
	for _, c := range scripts.ACLCommands {
		rules = append(rules, "+"+c)
	}
	return rules
}

// dialAs opens a session on srv as ACL user name, closed at the end of the test.
func dialAs(ctx context.Context, t *testing.T, addr, user string, o session.Options) (*session.Session, error) {
	t.Helper()
	opt := testutil.ClientOption(addr)
	opt.Username, opt.Password = user, "pw"
	s, err := session.Dial(ctx, opt, o)
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

// TestACLNamespaceUser: every primitive works under a Redis ACL user limited
// to the namespace's keys and channels, with the minimal command list
// (scripts.ACLCommands: no INFO, so a fresh namespace gets the whole restart
// grace) and with the common rule "+@all -@dangerous". Waits are handed
// over (PUBLISH, SUBSCRIBE), operators' resets and removals reach the
// holders, and the read-only scripts (EVALSHA_RO) run.
func TestACLNamespaceUser(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	for _, tc := range []struct {
		name  string
		rules func(ns string) []string
	}{
		{"minimal", minimalRules},
		{"all but dangerous", func(ns string) []string { return append(nsRules(ns), "+@all", "-@dangerous") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := redistest.Namespace(t)
			user := "lh-" + strings.ReplaceAll(tc.name, " ", "-")
			setUser(t, srv, user, tc.rules(ns)...)
			ctx := testutil.Ctx(t, 60*time.Second)
			const ttl = time.Second
			o := session.Options{Namespace: ns, TTL: ttl, RestartGrace: ttl}
			a, err := dialAs(ctx, t, srv.Addr(), user, o)
			if err != nil {
				t.Fatalf("Dial as %s: %v", user, err)
			}
			b, err := dialAs(ctx, t, srv.Addr(), user, o)
			if err != nil {
				t.Fatalf("Dial as %s: %v", user, err)
			}
			// The namespace is new: its first session set the epoch marker
			// with the whole grace.
			if _, err := mutex.New(a, "m").TryLock(ctx); !errors.Is(err, session.ErrRestartGrace) {
				t.Fatalf("TryLock in a new namespace = %v, want ErrRestartGrace", err)
			}
			c := testutil.Client(t, srv.Addr()) // the default user: sees the queues
			aclMutex(ctx, t, c, ns, a, b)
			aclSemaphore(ctx, t, c, ns, a, b)
			aclPool(ctx, t, c, ns, a, b)
			aclElection(ctx, t, c, ns, a, b)
			for _, s := range []*session.Session{a, b} {
				if err := s.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
		})
	}
}

// async runs f in a goroutine and delivers its results.
func async(f func() (*session.Hold, error)) <-chan result {
	c := make(chan result, 1)
	go func() {
		h, err := f()
		c <- result{h, err}
	}()
	return c
}

type result struct {
	h   *session.Hold
	err error
}

// granted returns the hold of a wait started with async.
func granted(t *testing.T, c <-chan result, what string) *session.Hold {
	t.Helper()
	select {
	case r := <-c:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.h
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not granted within 10s", what)
	}
	return nil
}

// ended waits for h to end and checks its cause.
func ended(t *testing.T, h *session.Hold, want error, what string) {
	t.Helper()
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: hold not ended within 10s", what)
	}
	if !errors.Is(h.Err(), want) {
		t.Fatalf("%s: hold ended with %v, want %v", what, h.Err(), want)
	}
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// queued waits until the waiter queue of kind ("m", "sem", "pool", "el")
// name in namespace ns has n entries.
func queued(ctx context.Context, t *testing.T, c rueidis.Client, ns, kind, name string, n int64) {
	t.Helper()
	testutil.WaitFor(t, ctx, func() bool {
		got, err := c.Do(ctx, c.B().Llen().Key("{"+ns+"}:q:"+kind+":"+name).Build()).AsInt64()
		return err == nil && got == n
	})
}

func aclMutex(ctx context.Context, t *testing.T, c rueidis.Client, ns string, a, b *session.Session) {
	h, err := mutex.New(a, "m").Lock(ctx) // waits out the grace
	must(t, err, "Lock")
	if _, err := mutex.New(b, "m").TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock of a held mutex = %v, want ErrLocked", err)
	}
	wait := async(func() (*session.Hold, error) { return mutex.New(b, "m").Lock(ctx) })
	queued(ctx, t, c, ns, "m", "m", 1)
	in, err := mutex.New(b, "m").Holder(ctx)
	if err != nil || in.Session != a.ID() || in.Waiters != 1 {
		t.Fatalf("Holder = %+v, %v; want session %s and a waiter", in, err, a.ID())
	}
	must(t, h.Release(ctx), "Release")
	h2 := granted(t, wait, "Lock handed over")
	if taken, err := mutex.New(a, "m").Reset(ctx); err != nil || !taken {
		t.Fatalf("Reset = %v, %v; want a hold taken away", taken, err)
	}
	ended(t, h2, session.ErrLost, "mutex reset")
}

func aclSemaphore(ctx context.Context, t *testing.T, c rueidis.Client, ns string, a, b *session.Session) {
	sa, sb := semaphore.New(a, "s", 2), semaphore.New(b, "s", 2)
	h, err := sa.Acquire(ctx, 2)
	must(t, err, "Acquire")
	if _, err := sb.TryAcquire(ctx, 1); !errors.Is(err, semaphore.ErrNoPermits) {
		t.Fatalf("TryAcquire of a full semaphore = %v, want ErrNoPermits", err)
	}
	wait := async(func() (*session.Hold, error) { return sb.Acquire(ctx, 1) })
	queued(ctx, t, c, ns, "sem", "s", 1)
	if st, err := sa.Stats(ctx); err != nil || st.InUse != 2 || st.Waiters != 1 {
		t.Fatalf("Stats = %+v, %v; want 2 in use and a waiter", st, err)
	}
	must(t, h.Release(ctx), "Release")
	h2 := granted(t, wait, "Acquire handed over")
	must(t, sa.SetLimit(ctx, 3), "SetLimit")
	must(t, h2.Release(ctx), "Release")
}

func aclPool(ctx context.Context, t *testing.T, c rueidis.Client, ns string, a, b *session.Session) {
	pa, pb := pool.New(a, "p"), pool.New(b, "p")
	must(t, pa.Add(ctx, "k1", "k2"), "Add")
	if m, err := pb.Members(ctx); err != nil || len(m) != 2 {
		t.Fatalf("Members = %v, %v; want 2", m, err)
	}
	h1, err := pa.Acquire(ctx)
	must(t, err, "Acquire")
	h2, err := pa.Acquire(ctx)
	must(t, err, "Acquire")
	if _, err := pb.TryAcquire(ctx); !errors.Is(err, pool.ErrExhausted) {
		t.Fatalf("TryAcquire of an exhausted pool = %v, want ErrExhausted", err)
	}
	wait := async(func() (*session.Hold, error) { return pb.AcquireKey(ctx, h1.Resource()) })
	queued(ctx, t, c, ns, "pool", "p", 1)
	if st, err := pa.Stats(ctx); err != nil || len(st.Held) != 2 || st.Waiters != 1 {
		t.Fatalf("Stats = %+v, %v; want 2 held and a waiter", st, err)
	}
	must(t, h1.Release(ctx), "Release")
	h3 := granted(t, wait, "AcquireKey handed over")
	must(t, pa.Remove(ctx, h2.Resource()), "Remove")
	ended(t, h2, session.ErrLost, "pool member removed")
	must(t, h3.Release(ctx), "Release")
}

func aclElection(ctx context.Context, t *testing.T, c rueidis.Client, ns string, a, b *session.Session) {
	// (Observe subscribes to a channel of the namespace, like the waits.)
	ea, eb := election.New(a, "e"), election.New(b, "e")
	h, err := ea.Campaign(ctx, "a")
	must(t, err, "Campaign")
	must(t, ea.Proclaim(ctx, "a2"), "Proclaim")
	if l, err := eb.Leader(ctx); err != nil || l.Value != "a2" || l.Session != a.ID() {
		t.Fatalf("Leader = %+v, %v; want a2 of %s", l, err, a.ID())
	}
	wait := async(func() (*session.Hold, error) { return eb.Campaign(ctx, "b") })
	queued(ctx, t, c, ns, "el", "e", 1)
	must(t, h.Release(ctx), "resign")
	h2 := granted(t, wait, "Campaign handed over")
	if removed, err := ea.Reset(ctx); err != nil || !removed {
		t.Fatalf("Reset = %v, %v; want the leader removed", removed, err)
	}
	ended(t, h2, session.ErrLost, "election reset")
}

// TestRefusedAtOnce: what Redis refuses for good (a missing permission, a
// failed authentication, a read-only replica) comes back at once from Dial
// and from the calls that wait, as an error matching
// session.ErrRedisRefused that wraps Redis' *rueidis.RedisError; the
// heartbeat logs such a refusal as an error.
func TestRefusedAtOnce(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 60*time.Second)
	testutil.InitEpoch(t, srv.Addr(), ns)
	setUser(t, srv, "lh", append(nsRules(ns), "+@all", "-@dangerous")...)
	refusedLog := make(chan struct{}, 1)
	log := slog.New(matchHandler{prefix: "Redis refuses the heartbeat", on: func() {
		select {
		case refusedLog <- struct{}{}:
		default:
		}
	}})
	o := session.Options{Namespace: ns, TTL: 5 * time.Second, Logger: log}
	s, err := dialAs(ctx, t, srv.Addr(), "lh", o)
	if err != nil {
		t.Fatal(err)
	}

	// refused checks that err is Redis' refusal starting with code,
	// returned within a second of start.
	refused := func(what string, err error, start time.Time, code string) {
		t.Helper()
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("%s: returned after %v, want at once", what, took)
		}
		var re *rueidis.RedisError
		if !errors.Is(err, session.ErrRedisRefused) || !errors.As(err, &re) || !strings.HasPrefix(re.Error(), code) {
			t.Fatalf("%s = %v; want an error matching ErrRedisRefused wrapping Redis' %s", what, err, code)
		}
		t.Logf("%s: %v", what, err)
	}

	waits := []struct {
		name string
		call func(ctx context.Context) (*session.Hold, error)
	}{
		{"mutex Lock", func(ctx context.Context) (*session.Hold, error) { return mutex.New(s, "m").Lock(ctx) }},
		{"semaphore Acquire", func(ctx context.Context) (*session.Hold, error) {
			return semaphore.New(s, "s", 2).Acquire(ctx, 1)
		}},
		{"pool Acquire", func(ctx context.Context) (*session.Hold, error) { return pool.New(s, "p").Acquire(ctx) }},
		{"election Campaign", func(ctx context.Context) (*session.Hold, error) {
			return election.New(s, "e").Campaign(ctx, "v")
		}},
	}
	for _, change := range []struct {
		name  string
		rules []string // applied to user lh, then undone by the rules of undo
		undo  []string
	}{
		{"without EVALSHA", []string{"-evalsha"}, []string{"+evalsha"}},
		{"with another namespace's keys", []string{"resetkeys", "~{other}:*"}, append([]string{"resetkeys"}, nsRules(ns)[0])},
	} {
		setUser(t, srv, "lh", change.rules...)
		for _, w := range waits {
			start := time.Now()
			h, err := w.call(ctx) // ctx lasts a minute
			if err == nil {
				_ = h.Release(ctx)
			}
			refused(w.name+" "+change.name, err, start, "NOPERM")
		}
		setUser(t, srv, "lh", change.undo...)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("session ended: %v", err)
	}

	// The heartbeat keeps retrying (the lease is lost if nobody fixes the
	// permission in time), and says why at error level.
	setUser(t, srv, "lh", "-evalsha")
	select {
	case <-refusedLog:
	case <-time.After(2 * s.Deadline().Sub(time.Now())):
		t.Fatal("no log record of the refused heartbeat")
	}
	setUser(t, srv, "lh", "+evalsha")

	// Dial: a user of another namespace, a wrong password.
	setUser(t, srv, "other", "~{other}:*", "&{other}:*", "+@all", "-@dangerous")
	start := time.Now()
	_, err = dialAs(ctx, t, srv.Addr(), "other", o)
	refused("Dial as another namespace's user", err, start, "NOPERM")
	opt := testutil.ClientOption(srv.Addr())
	opt.Username, opt.Password = "lh", "wrong"
	start = time.Now()
	_, err = session.Dial(ctx, opt, o)
	refused("Dial with a wrong password", err, start, "WRONGPASS")

	// New on a client of a read-only replica.
	rep := redistest.Start(t, redistest.Options{})
	host, port, _ := net.SplitHostPort(srv.Addr())
	if err := rep.Do(t, "REPLICAOF", host, port).Error(); err != nil {
		t.Fatal(err)
	}
	c := testutil.Client(t, rep.Addr())
	start = time.Now()
	_, err = session.New(ctx, c, o)
	refused("New on a replica", err, start, "READONLY")

	// Dial without authenticating, once the default user is off.
	if err := srv.Do(t, "ACL", "SETUSER", "default", "off").Error(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, err = session.Dial(ctx, testutil.ClientOption(srv.Addr()), o)
	refused("Dial unauthenticated", err, start, "NOAUTH")
}

// TestRefusedReads: a user that may not run read-only scripts
// (EVALSHA_RO) gets every inspection call's refusal as an error matching
// session.ErrRedisRefused, and an election Observer ends with it instead
// of retrying in silence.
func TestRefusedReads(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	testutil.InitEpoch(t, srv.Addr(), ns)
	setUser(t, srv, "noro", append(minimalRules(ns), "-evalsha_ro", "-eval_ro")...)
	s, err := dialAs(ctx, t, srv.Addr(), "noro", session.Options{Namespace: ns, TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		var re *rueidis.RedisError
		if !errors.Is(err, session.ErrRedisRefused) || !errors.As(err, &re) {
			t.Errorf("%s = %v; want an error matching session.ErrRedisRefused wrapping Redis' refusal", what, err)
		}
	}
	_, err = mutex.New(s, "m").Holder(ctx)
	refused("mutex Holder", err)
	_, err = rwmutex.New(s, "rw").Holders(ctx)
	refused("rwmutex Holders", err)
	_, err = semaphore.New(s, "s", 2).Stats(ctx)
	refused("semaphore Stats", err)
	_, err = pool.New(s, "p").Stats(ctx)
	refused("pool Stats", err)
	_, err = election.New(s, "e").Leader(ctx)
	refused("election Leader", err)

	o := election.New(s, "e").Observer(ctx)
	for range o.C() {
		t.Error("an observer whose reads are refused delivered a leader")
	}
	refused("election Observer", o.Err())
}

// TestACLShardedUser: a sharded namespace works under an ACL user with the
// minimal commands and the README's patterns for its shards; a new
// namespace's shards share one restart grace from the first Dial.
func TestACLShardedUser(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	setUser(t, srv, "lh-sharded", append(minimalRules(ns), "~{"+ns+"#*}:*", "&{"+ns+"#*}:*")...)
	ctx := testutil.Ctx(t, 60*time.Second)
	const ttl = time.Second
	o := session.Options{Namespace: ns, TTL: ttl, RestartGrace: ttl, Shards: 4}
	a, err := dialAs(ctx, t, srv.Addr(), "lh-sharded", o)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	b, err := dialAs(ctx, t, srv.Addr(), "lh-sharded", o)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	c := testutil.Client(t, srv.Addr())
	for k := range 4 { // Dial set every shard's marker: one grace for all
		if v, err := c.Do(ctx, c.B().Get().Key(scripts.ShardKeys(ns, k).Epoch()).Build()).ToString(); err != nil || !strings.HasSuffix(v, "|4") {
			t.Fatalf("shard %d's epoch marker after Dial: %q %v", k, v, err)
		}
	}
	for i := range 8 {
		if _, err := mutex.New(a, fmt.Sprint("m", i)).TryLock(ctx); !errors.Is(err, session.ErrRestartGrace) {
			t.Fatalf("TryLock in a new namespace = %v, want ErrRestartGrace", err)
		}
	}
	h, err := mutex.New(a, "m").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	wait := async(func() (*session.Hold, error) { return mutex.New(b, "m").Lock(ctx) })
	testutil.WaitFor(t, ctx, func() bool {
		l, _ := c.Do(ctx, c.B().Llen().Key(scripts.ShardKeys(ns, scripts.ShardOf("m", 4)).Queue(scripts.Mutex, "m")).Build()).AsInt64()
		return l == 1
	})
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h2 := granted(t, wait, "the waiting Lock"); h2.Token() <= h.Token() {
		t.Fatalf("hand-off token %d not above %d", h2.Token(), h.Token())
	}
}
