// Package testutil holds session constructors shared by the tests of
// leasehold's packages (not of package session itself, to avoid a cycle).
package testutil

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/session"
)

// ClientOption returns the rueidis options tests use for addr.
func ClientOption(addr string) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       []string{addr},
		DisableCache:      true,
		ForceSingleClient: true,
		ConnWriteTimeout:  time.Second,
	}
}

// Dial opens a session (owning its client) on addr in namespace ns, closed at
// the end of the test. The namespace is marked intact first (InitEpoch), so
// the restart grace of a freshly started Redis does not delay the test.
func Dial(t testing.TB, addr, ns string, o session.Options) *session.Session {
	t.Helper()
	if o.Shards > 1 {
		InitShards(t, addr, ns, o.Shards)
	} else {
		InitEpoch(t, addr, ns)
	}
	o.Namespace = ns
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := session.Dial(ctx, ClientOption(addr), o)
	if err != nil {
		t.Fatalf("session.Dial: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Client returns a rueidis client to addr, closed at the end of the test.
func Client(t testing.TB, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(ClientOption(addr))
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Ctx returns a context canceled after d or at the end of the test.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// InitEpoch marks namespace ns on addr as intact, as a namespace in use for
// longer than its restart grace is: without it, the first grant on a freshly
// started Redis waits out the grace (design.md, Safety 4). Tests of the
// restart grace itself do not call it.
func InitEpoch(t testing.TB, addr, ns string) {
	t.Helper()
	c, err := rueidis.NewClient(ClientOption(addr))
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Do(ctx, c.B().Set().Key("{"+ns+"}:epoch").Value("0").Nx().Build()).Error(); err != nil && !rueidis.IsRedisNil(err) {
		t.Fatalf("init epoch: %v", err)
	}
}

// WaitFor polls cond every millisecond until it holds, failing the test when
// ctx ends first. It observes Redis state that has no event to wait on.
func WaitFor(t testing.TB, ctx context.Context, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not reached")
		case <-time.After(time.Millisecond):
		}
	}
}

// EndsTakenAway checks that hold h, taken away at since by an operator action
// (what: "Reset", "Remove"), ends within one heartbeat interval hb (+50ms of
// scheduling slack) with ErrLost and not ErrLeaseLost, while the other hold
// and the session s stay alive.
func EndsTakenAway(t testing.TB, what string, h, other *session.Hold, s *session.Session, since time.Time, hb time.Duration) {
	t.Helper()
	select {
	case <-h.Done():
	case <-time.After(2 * hb):
		t.Fatalf("hold not ended %v after %s (heartbeat interval %v)", time.Since(since), what, hb)
	}
	ended := time.Since(since)
	if ended > hb+50*time.Millisecond {
		t.Fatalf("hold ended %v after %s; want within one heartbeat interval (%v)", ended, what, hb)
	}
	t.Logf("hold ended %v after %s", ended, what)
	if !errors.Is(h.Err(), session.ErrLost) || errors.Is(h.Err(), session.ErrLeaseLost) {
		t.Fatalf("cause after %s = %v, want ErrLost (not ErrLeaseLost)", what, h.Err())
	}
	if other.Err() != nil || s.Err() != nil {
		t.Fatalf("other hold %v / session %v ended by a %s", other.Err(), s.Err(), what)
	}
}

// Crashable opens a session on a client of its own, and returns it with
// crash: crash closes that client (the process is gone: no Release, no
// heartbeat, no cleanup) and deletes the lease, as its expiry would. The
// session's holds are then lost, not released.
func Crashable(t testing.TB, ctx context.Context, addr, ns string, o session.Options) (*session.Session, func()) {
	t.Helper()
	InitEpoch(t, addr, ns)
	c, err := rueidis.NewClient(ClientOption(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	o.Namespace = ns
	s, err := session.New(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	probe := Client(t, addr)
	return s, func() {
		t.Helper()
		c.Close()
		if err := probe.Do(ctx, probe.B().Del().Key("{"+ns+"}:s:"+s.ID()).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
}

// InitShards is InitEpoch for each shard of a namespace of n shards
// (session.Options.Shards): the first session records the shard count.
func InitShards(t testing.TB, addr, ns string, n int) {
	t.Helper()
	InitShardsOn(t, ClientOption(addr), ns, n)
}

// InitShardsOn is InitShards on the Redis of opt, a Redis Cluster too. A
// namespace of one shard gets its epoch marker, one of n > 1 every shard's
// and the guard (leaseholdtest.MarkIntactShards): without the guard, the
// first session would take a shard's "0" for a survivor of a data loss and
// wait out a restart grace (see scripts.GuardShards).
func InitShardsOn(t testing.TB, opt rueidis.ClientOption, ns string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := leaseholdtest.MarkIntactShards(ctx, opt, ns, n); err != nil {
		t.Fatalf("init shards: %v", err)
	}
}
