package session_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// crashChildEnv names the environment variable that makes the test binary a
// crashing holder (see TestCrashedHoldersLeaveNoKeys).
const crashChildEnv = "LEASEHOLD_CRASH_CHILD"

type crashConfig struct {
	Addr      string
	NS        string
	Names     int
	TTL       time.Duration
	LockDelay time.Duration
}

// crashChild takes names of every kind, and makes a second session wait
// for one of each, then prints "ready" and blocks until it is killed.
func crashChild(raw string) int {
	var cfg crashConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 1
	}
	ctx := context.Background()
	o := session.Options{Namespace: cfg.NS, TTL: cfg.TTL, LockDelay: cfg.LockDelay}
	a, err := session.Dial(ctx, rueidis.ClientOption{InitAddress: []string{cfg.Addr}}, o)
	if err != nil {
		return fail("Dial", err)
	}
	b, err := session.Dial(ctx, rueidis.ClientOption{InitAddress: []string{cfg.Addr}}, o)
	if err != nil {
		return fail("Dial", err)
	}
	for i := range cfg.Names {
		if _, err := mutex.New(a, fmt.Sprintf("m%d", i)).Lock(ctx); err != nil {
			return fail("Lock", err)
		}
		if _, err := semaphore.New(a, fmt.Sprintf("s%d", i), 2).Acquire(ctx, 1); err != nil {
			return fail("Acquire", err)
		}
		if _, err := election.New(a, fmt.Sprintf("e%d", i)).Campaign(ctx, "v"); err != nil {
			return fail("Campaign", err)
		}
		rw := rwmutex.New(a, fmt.Sprintf("r%d", i))
		if i%2 == 0 {
			_, err = rw.RLock(ctx)
		} else {
			_, err = rw.Lock(ctx)
		}
		if err != nil {
			return fail("rwmutex", err)
		}
	}
	// One waiter of each kind, in b, behind a's holds.
	if _, err := semaphore.New(a, "sw", 1).Acquire(ctx, 1); err != nil {
		return fail("Acquire", err)
	}
	go func() { _, _ = mutex.New(b, "m0").Lock(ctx) }()
	go func() { _, _ = semaphore.New(b, "sw", 1).Acquire(ctx, 1) }()
	go func() { _, _ = election.New(b, "e0").Campaign(ctx, "w") }()
	go func() { _, _ = rwmutex.New(b, "r1").RLock(ctx) }()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cfg.Addr}})
	if err != nil {
		return fail("client", err)
	}
	for _, q := range []string{"m:m0", "sem:sw", "el:e0", "rw:r1"} {
		key := "{" + cfg.NS + "}:q:" + q
		for {
			n, err := c.Do(ctx, c.B().Llen().Key(key).Build()).AsInt64()
			if err != nil {
				return fail("LLEN", err)
			}
			if n == 1 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	fmt.Println("ready")
	select {}
}

// TestCrashedHoldersLeaveNoKeys: a process that holds 4 x 300 names of
// every kind (mutexes, semaphores, elections, read and write holds of
// read-write mutexes) and waits for one of each is killed with SIGKILL.
// Nobody touches the names again, yet every key they used is gone at most
// 2 x TTL + LockDelay + 1 s after the holders' leases expired: DBSIZE comes
// back to what it was before (the epoch marker).
func TestCrashedHoldersLeaveNoKeys(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	c := testutil.Client(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := dbsize(t, c)

	cfg := crashConfig{Addr: srv.Addr(), NS: ns, Names: 300, TTL: time.Second, LockDelay: 500 * time.Millisecond}
	child := testutil.StartChild(t, crashChildEnv, cfg, "crash-child.log")
	line, err := bufio.NewReader(child.Stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		raw, _ := os.ReadFile(child.Log)
		t.Fatalf("child said %q, %v; its log:\n%s", line, err, raw)
	}
	// A held resource's key has an expiry, which its holder's heartbeats
	// keep ahead (TestIdleExpiryKeepsHeldResources shows they keep it).
	held := "{" + ns + "}:m:m0"
	if d := pttl(t, c, held); d <= 0 || d > 3*cfg.TTL+cfg.LockDelay {
		t.Fatalf("held mutex key PTTL = %v, want within (0, 3 x TTL + LockDelay]", d)
	}
	if err := child.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Cmd.Wait()

	// The leases go within a TTL of the kill.
	leases := func() int {
		keys, err := c.Do(ctx, c.B().Keys().Pattern("{"+ns+"}:s:*").Build()).AsStrSlice()
		if err != nil {
			t.Fatalf("KEYS: %v", err)
		}
		return len(keys)
	}
	for leases() > 0 {
		if ctx.Err() != nil {
			t.Fatal("the killed child's leases never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
	noHolder := time.Now()
	// Redis deletes expired keys in its background cycle (every 100 ms), a
	// sample at a time: allow it one more second past the bound.
	bound := 2*cfg.TTL + cfg.LockDelay + time.Second
	for n := dbsize(t, c); n != base; n = dbsize(t, c) {
		if time.Since(noHolder) > bound+time.Second {
			keys, _ := c.Do(ctx, c.B().Scan().Cursor(0).Match("{"+ns+"}:*").Count(1000).Build()).ToArray()
			t.Fatalf("DBSIZE %d %v after the holders' leases expired, want %d; keys: %v",
				n, time.Since(noHolder).Round(time.Millisecond), base, keys)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("every key gone %v after the leases", time.Since(noHolder).Round(time.Millisecond))
}
