package session_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

func dbsize(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	n, err := c.Do(context.Background(), c.B().Dbsize().Build()).AsInt64()
	if err != nil {
		t.Fatalf("DBSIZE: %v", err)
	}
	return n
}

func pttl(t *testing.T, c rueidis.Client, key string) time.Duration {
	t.Helper()
	n, err := c.Do(context.Background(), c.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return time.Duration(n) * time.Millisecond
}

// TestIdleResourcesExpire: 1,000 mutex, semaphore and election names, each
// taken and released once, leave no key behind after 2 x TTL + 1 s: DBSIZE
// comes back to what it was before (the epoch marker and the lease).
func TestIdleResourcesExpire(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	c := testutil.Client(t, srv.Addr())
	const ttl = time.Second
	s := openOn(t, c, session.Options{Namespace: ns, TTL: ttl})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := dbsize(t, c)

	const names = 1000
	for i := range names {
		h, err := mutex.New(s, fmt.Sprintf("m%d", i)).Lock(ctx)
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
		if err := h.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		p, err := semaphore.New(s, fmt.Sprintf("s%d", i), 2).Acquire(ctx, 1)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		l, err := election.New(s, fmt.Sprintf("e%d", i)).Campaign(ctx, "v")
		if err != nil {
			t.Fatalf("Campaign: %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	released := time.Now()
	// The keys of the names released last are still there (the loop may
	// take longer than the idle time, so earlier ones may be gone already).
	last := names - 1
	keys := []string{fmt.Sprintf("{%s}:m:m%d", ns, last), fmt.Sprintf("{%s}:sem:s%d", ns, last), fmt.Sprintf("{%s}:el:e%d", ns, last)}
	if n, err := c.Do(ctx, c.B().Exists().Key(keys...).Build()).AsInt64(); err != nil || n != int64(len(keys)) {
		t.Fatalf("EXISTS %v right after the releases = %d, %v; want %d: the resources' keys should still be there",
			keys, n, err, len(keys))
	}
	// Redis deletes expired keys in its background cycle (every 100 ms);
	// allow it one more second past the bound.
	bound := 2*ttl + time.Second
	for dbsize(t, c) != base {
		if time.Since(released) > bound+time.Second {
			t.Fatalf("DBSIZE %d %v after the last release, want %d (no key of an idle resource)",
				dbsize(t, c), time.Since(released).Round(time.Millisecond), base)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestIdleExpiryKeepsHeldResources: a resource whose key was set to expire
// while idle gets the expiry of a held one when it is granted again,
// directly or by a hand-off (at most 3 x TTL + LockDelay, see heldKey), and
// stays held past the idle period and past that expiry, its holder's
// heartbeats keeping it; its tokens keep increasing, also across the key's
// expiry.
func TestIdleExpiryKeepsHeldResources(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	c := testutil.Client(t, srv.Addr())
	const ttl = time.Second
	o := session.Options{Namespace: ns, TTL: ttl}
	s1, s2 := openOn(t, c, o), openOn(t, c, o)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "{" + ns + "}:m:x"

	h, err := mutex.New(s1, "x").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	last := h.Token()
	if err := h.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if d := pttl(t, c, key); d <= 0 || d > 2*ttl {
		t.Fatalf("idle mutex key PTTL = %v, want within (0, 2 x TTL]", d)
	}

	// Granted again: a held key's expiry, and still held after the idle period.
	h, err = mutex.New(s1, "x").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	heldKey(t, c, key, ttl)
	if h.Token() <= last {
		t.Errorf("token %d not above %d", h.Token(), last)
	}
	last = h.Token()

	// Handed to a waiter: the same.
	got := make(chan *session.Hold, 1)
	go func() {
		h, err := mutex.New(s2, "x").Lock(ctx)
		if err != nil {
			t.Errorf("waiting Lock: %v", err)
		}
		got <- h
	}()
	waitQueued(t, c, "{"+ns+"}:q:m:x", 1)
	if err := h.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	h2 := <-got
	if h2 == nil {
		return
	}
	heldKey(t, c, key, ttl)
	// Held across three idle periods' worth of time, twice what the
	// expiry of a held key gives it.
	deadline := time.Now().Add(3 * 2 * ttl)
	for time.Now().Before(deadline) {
		if _, err := mutex.New(s1, "x").TryLock(ctx); err == nil {
			t.Fatal("mutex granted to a second session while held")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := h2.Err(); err != nil {
		t.Fatalf("hold ended while held: %v", err)
	}
	heldKey(t, c, key, ttl)
	if h2.Token() <= last {
		t.Errorf("token %d not above %d", h2.Token(), last)
	}
	last = h2.Token()
	if err := h2.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}

	// Across the expiry: the key goes, the next token is still higher.
	for pttl(t, c, key) != -2*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
	}
	h, err = mutex.New(s1, "x").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if h.Token() <= last {
		t.Errorf("token %d after the key expired not above %d", h.Token(), last)
	}
	_ = h.Release(ctx)

	// Semaphore and election: held, a held key's expiry; released, the idle one.
	p, err := semaphore.New(s1, "sem", 2).Acquire(ctx, 1)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	semKey := "{" + ns + "}:sem:sem"
	if err := p.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if d := pttl(t, c, semKey); d <= 0 {
		t.Fatalf("idle semaphore key PTTL = %v, want > 0", d)
	}
	p, err = semaphore.New(s1, "sem", 2).Acquire(ctx, 1)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	heldKey(t, c, semKey, ttl)
	heldKey(t, c, "{"+ns+"}:semh:sem", ttl)
	_ = p.Release(ctx)
	l, err := election.New(s1, "el").Campaign(ctx, "v")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	elKey := "{" + ns + "}:el:el"
	heldKey(t, c, elKey, ttl)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if d := pttl(t, c, elKey); d <= 0 {
		t.Fatalf("idle election key PTTL = %v, want > 0", d)
	}
}

// heldKey fails unless key has the expiry of a held resource's key with
// no LockDelay: some, at most 3 x TTL (what a heartbeat keeps it).
func heldKey(t *testing.T, c rueidis.Client, key string, ttl time.Duration) {
	t.Helper()
	if d := pttl(t, c, key); d <= 0 || d > 3*ttl {
		t.Fatalf("held key %s PTTL = %v, want within (0, 3 x TTL]", key, d)
	}
}
