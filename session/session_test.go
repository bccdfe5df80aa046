package session_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/pool"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/semaphore"
	"github.com/leasehold/leasehold/session"
)

// TestSIGSTOPCancelsBeforeExpiry: with Redis paused, a hold's context is
// canceled with ErrLeaseLost no later than sendTime(last confirmed heartbeat)
// + TTL, and before the lease key expires on the server.
func TestSIGSTOPCancelsBeforeExpiry(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	const ttl = 3 * time.Second
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl, Heartbeat: ttl / 2})
	probe := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 30*time.Second)

	h, err := mutex.New(s, "stop").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Wait for a heartbeat to be confirmed, so that the next one is a full
	// interval away, then read when the server will expire the lease.
	d0 := s.Deadline()
	testutil.WaitFor(t, ctx, func() bool { return s.Deadline().After(d0) })
	deadline := s.Deadline()
	expireAt, err := probe.Do(ctx, probe.B().Arbitrary("PEXPIRETIME").Keys("{"+ns+"}:s:"+s.ID()).Build()).AsInt64()
	if err != nil || expireAt <= 0 {
		t.Fatalf("PEXPIRETIME = %d, %v", expireAt, err)
	}
	srv.Stop()
	stopped := time.Now()
	select {
	case <-h.Done():
	case <-time.After(2 * ttl):
		srv.Cont()
		t.Fatal("hold not canceled within 2*TTL of SIGSTOP")
	}
	canceled := time.Now()
	srv.Cont()

	if !errors.Is(h.Err(), session.ErrLeaseLost) || !errors.Is(h.Err(), session.ErrLost) {
		t.Fatalf("hold cause = %v, want ErrLeaseLost", h.Err())
	}
	if !errors.Is(s.Err(), session.ErrLeaseLost) {
		t.Fatalf("session cause = %v, want ErrLeaseLost", s.Err())
	}
	// deadline = sent + TTL*0.99 - 5ms, so sent + TTL = deadline + TTL/100 + 5ms.
	if limit := deadline.Add(ttl/100 + 5*time.Millisecond); canceled.After(limit) {
		t.Fatalf("canceled %v after sendTime+TTL", canceled.Sub(limit))
	}
	margin := time.UnixMilli(expireAt).Sub(canceled)
	if margin <= 0 {
		t.Fatalf("canceled %v after the server-side expiry", -margin)
	}
	t.Logf("stopped→canceled %v; canceled %v before the server-side expiry", canceled.Sub(stopped), margin)
}

// TestOneRequestPerHeartbeat: a session holding 1,000 holds sends exactly one
// request per heartbeat, and the server runs exactly one script per heartbeat.
func TestOneRequestPerHeartbeat(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, time.Minute)
	cc := &testutil.CountingClient{Client: testutil.Client(t, srv.Addr())}
	testutil.InitEpoch(t, srv.Addr(), ns)
	const ttl = 600 * time.Millisecond
	s, err := session.New(ctx, cc, session.Options{Namespace: ns, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 1000 {
		if _, err := mutex.New(s, "m"+strconv.Itoa(i)).TryLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	probe := testutil.Client(t, srv.Addr())
	// Align on a heartbeat, then count over the next five.
	d := s.Deadline()
	testutil.WaitFor(t, ctx, func() bool { return s.Deadline().After(d) })
	req0, calls0 := cc.N.Load(), evalshaCalls(t, probe)
	const beats = 5
	for range beats {
		d := s.Deadline()
		testutil.WaitFor(t, ctx, func() bool { return s.Deadline().After(d) })
	}
	req1, calls1 := cc.N.Load(), evalshaCalls(t, probe)
	if got := req1 - req0; got != beats {
		t.Fatalf("%d client requests over %d heartbeats with 1,000 holds, want %d", got, beats, beats)
	}
	if got := calls1 - calls0; got != beats {
		t.Fatalf("%d scripts run on the server over %d heartbeats, want %d", got, beats, beats)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func evalshaCalls(t *testing.T, c rueidis.Client) int64 { return serverCalls(t, c, "evalsha") }

// serverCalls returns how many times the server ran command cmd (lower
// case), inside scripts too (INFO commandstats).
func serverCalls(t *testing.T, c rueidis.Client, cmd string) int64 {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return 0
}

// TestFastPaths: once no restart grace is pending, an uncontended mutex
// lock and release, a mutex hand-off, and a semaphore acquire and release
// skip the epoch marker (no GET on the server: the scripts' fast paths),
// also for a session opened during a grace. Their tokens still increase
// when the stored token went back (as after a restart from an older
// snapshot) and across a restart without persistence.
func TestFastPaths(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = time.Second
	// A brand-new server: the namespace starts with a restart grace.
	a, err := session.New(ctx, testutil.Client(t, srv.Addr()), session.Options{Namespace: ns, TTL: ttl, RestartGrace: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	probe := testutil.Client(t, srv.Addr())
	lease := "{" + ns + "}:s:" + a.ID()
	if g, _ := probe.Do(ctx, probe.B().Hget().Key(lease).Field("g").Build()).ToString(); g == "0" {
		t.Fatalf("lease of a session opened during the grace has g = %q, want it pending", g)
	}
	m := mutex.New(a, "m")
	h, err := m.Lock(ctx) // waits out the grace on the full path
	if err != nil {
		t.Fatal(err)
	}
	last := h.Token()
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if g, _ := probe.Do(ctx, probe.B().Hget().Key(lease).Field("g").Build()).ToString(); g != "0" {
		t.Fatalf("lease field g = %q after the grace, want \"0\"", g)
	}
	// Every serverCalls is one INFO; each heartbeat runs one more, and one
	// TIME.
	info0 := serverCalls(t, probe, "info")
	get0, time0 := serverCalls(t, probe, "get"), serverCalls(t, probe, "time")
	for range 50 {
		h, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Token() <= last {
			t.Fatalf("token %d after %d", h.Token(), last)
		}
		last = h.Token()
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	times, gets := serverCalls(t, probe, "time")-time0, serverCalls(t, probe, "get")-get0
	beats := serverCalls(t, probe, "info") - info0 - 5 // the five reads' own INFO
	// GET reads the mutex string: once per lock, once per release; an epoch
	// marker read would add to that.
	if gets != 100 {
		t.Errorf("%d GET in 50 uncontended lock+release, want 100 (the mutex's, no epoch marker)", gets)
	}
	if times < 50 || times > 50+beats {
		t.Errorf("%d TIME in 50 uncontended lock+release and at most %d heartbeats, want one per grant and heartbeat", times, beats)
	}
	// The stored token goes back: the clock keeps new tokens above it.
	mkey := "{" + ns + "}:m:m"
	rollBack := func(key string) {
		t.Helper()
		if typ, _ := probe.Do(ctx, probe.B().Type().Key(key).Build()).ToString(); typ == "string" {
			// The mutex string "<hid>|<tok>|...", read with GETRANGE: the
			// test counts the scripts' GETs.
			v, err := probe.Do(ctx, probe.B().Getrange().Key(key).Start(0).End(-1).Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			f := strings.Split(v, "|")
			f[1] = "1"
			if err := probe.Do(ctx, probe.B().Set().Key(key).Value(strings.Join(f, "|")).Keepttl().Build()).Error(); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := probe.Do(ctx, probe.B().Hset().Key(key).FieldValue().FieldValue("tok", "1").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	rollBack(mkey)
	if h, err = m.Lock(ctx); err != nil || h.Token() <= last {
		t.Fatalf("Lock after the stored token went back: %v, token %v; want above %d", err, h, last)
	}
	last = h.Token()
	// A hand-off on the fast path, after the stored token went back too.
	b := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl})
	get0 = serverCalls(t, probe, "get")
	waiter := make(chan *session.Hold, 1)
	go func() {
		h, err := mutex.New(b, "m").Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		waiter <- h
	}()
	testutil.WaitFor(t, ctx, func() bool {
		n, _ := probe.Do(ctx, probe.B().Llen().Key("{"+ns+"}:q:m:m").Build()).AsInt64()
		return n == 1
	})
	rollBack(mkey)
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	hb := <-waiter
	if hb == nil || hb.Token() <= last {
		t.Fatalf("hand-off after the stored token went back: token %v, want above %d", hb, last)
	}
	if n := serverCalls(t, probe, "get") - get0; n != 2 {
		t.Errorf("%d GET in a queued Lock and a hand-off, want 2 (the mutex's, no epoch marker)", n)
	}
	last = hb.Token()
	if err := hb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The same for a semaphore (limit 2, one permit each), once it has a
	// token: its first grant takes the full path.
	sem := semaphore.New(a, "s", 2)
	h, err = sem.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := sem.Acquire(ctx, 1)
	if err != nil || h2.Token() <= h.Token() {
		t.Fatalf("second permit: %v, token %v after %d", err, h2, h.Token())
	}
	semLast := h2.Token()
	_ = h.Release(ctx)
	info0 = serverCalls(t, probe, "info")
	get0, time0 = serverCalls(t, probe, "get"), serverCalls(t, probe, "time")
	for range 50 {
		h, err := sem.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if h.Token() <= semLast {
			t.Fatalf("semaphore token %d after %d", h.Token(), semLast)
		}
		semLast = h.Token()
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := serverCalls(t, probe, "get") - get0; n != 0 {
		t.Errorf("%d GET in 50 uncontended semaphore acquire+release, want 0", n)
	}
	// Each heartbeat runs one TIME too (as above).
	beats = serverCalls(t, probe, "info") - info0 - 4 // the four reads' own INFO
	if n := serverCalls(t, probe, "time") - time0; n < 50 || n > 50+beats {
		t.Errorf("%d TIME in 50 uncontended semaphore acquire+release and at most %d heartbeats, want one per grant and heartbeat", n, beats)
	}
	// Both permits again (the fast path's counting left room for exactly
	// two), the first after the stored token went back.
	rollBack("{" + ns + "}:sem:s")
	h, err = sem.Acquire(ctx, 1)
	if err != nil || h.Token() <= semLast {
		t.Fatalf("Acquire after the stored token went back: %v, token %v; want above %d", err, h, semLast)
	}
	if _, err := sem.TryAcquire(ctx, 1); !errors.Is(err, semaphore.ErrNoPermits) {
		t.Fatalf("third permit of a semaphore of 2: %v, want ErrNoPermits", err)
	}
	_ = h.Release(ctx)
	_ = h2.Release(ctx)

	// Redis loses everything: the first token after it (read from the
	// clock) still exceeds the last one before it.
	_ = a.Close()
	srv.Kill()
	srv.Restart()
	testutil.InitEpoch(t, srv.Addr(), ns) // no grace: this test is about tokens
	c := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl})
	h, err = mutex.New(c, "m").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Token() <= last {
		t.Fatalf("token %d after a restart without persistence, want above %d", h.Token(), last)
	}
}

// TestCallsAfterCloseFail: Close is idempotent, ends holds with ErrClosed,
// deletes the lease and hands held mutexes to waiters.
func TestCloseReleasesAndHandsOff(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	a := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	b := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, addr)

	h, err := mutex.New(a, "close").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *session.Hold, 1)
	go func() {
		hb, err := mutex.New(b, "close").Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- hb
	}()
	testutil.WaitFor(t, ctx, func() bool {
		in, err := mutex.New(b, "close").Holder(ctx)
		return err == nil && in.Waiters == 1
	})
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if !errors.Is(h.Err(), session.ErrClosed) || !errors.Is(a.Err(), session.ErrClosed) {
		t.Fatalf("after Close: hold %v, session %v; want ErrClosed", h.Err(), a.Err())
	}
	if err := h.Release(ctx); err != nil {
		t.Fatalf("Release after Close: %v, want nil", err)
	}
	hb := <-got
	if hb == nil || hb.Token() <= h.Token() {
		t.Fatalf("waiter did not get the mutex with a newer token")
	}
	if n, _ := probe.Do(ctx, probe.B().Exists().Key("{"+ns+"}:s:"+a.ID()).Build()).AsInt64(); n != 0 {
		t.Fatalf("lease key still exists after Close")
	}
	if _, err := mutex.New(a, "other").TryLock(ctx); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("TryLock after Close: %v, want ErrClosed", err)
	}
	if _, err := mutex.New(a, "other").Lock(ctx); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Lock after Close: %v, want ErrClosed", err)
	}
}

// TestCallsNeverOutliveCtx: with Redis paused, Lock returns when its ctx ends.
func TestCallsNeverOutliveCtx(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	srv.Stop()
	defer srv.Cont()
	for _, name := range []string{"Lock", "TryLock"} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		var err error
		if name == "Lock" {
			_, err = mutex.New(s, "m").Lock(ctx)
		} else {
			_, err = mutex.New(s, "m").TryLock(ctx)
		}
		cancel()
		if el := time.Since(start); el > time.Second {
			t.Fatalf("%s returned after %v with a 200ms ctx", name, el)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v, want DeadlineExceeded", name, err)
		}
	}
}

// TestCallsNeverWaitForADial: a call whose connection is being redialled by
// another goroutine (here the session retrying a withdrawal, Redis paused)
// still returns when its ctx ends. rueidis alone would keep it waiting for
// that dial's handshake, up to ConnWriteTimeout (conn.Bound).
func TestCallsNeverWaitForADial(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	dials := make(chan struct{}, 64)
	opt := testutil.ClientOption(srv.Addr()) // ConnWriteTimeout 1 s
	opt.PipelineMultiplex = -1               // one connection: every call shares its redial
	opt.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
		select {
		case dials <- struct{}{}:
		default:
		}
		return d.DialContext(ctx, "tcp", addr)
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testutil.Ctx(t, 10*time.Second)
	s, err := session.New(ctx, c, session.Options{Namespace: ns, TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for len(dials) > 0 {
		<-dials
	}
	srv.Stop()
	defer srv.Cont()
	// The first TryLock times out and breaks the connection; the session
	// retries its withdrawal with a longer deadline, which redials.
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = mutex.New(s, "m").TryLock(tctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryLock with Redis paused: %v, want DeadlineExceeded", err)
	}
	select {
	case <-dials:
	case <-ctx.Done():
		t.Fatal("no redial after the connection broke")
	}
	tctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = mutex.New(s, "m").TryLock(tctx)
	if el := time.Since(start); el > 600*time.Millisecond {
		t.Fatalf("TryLock during a redial returned after %v with a 200ms ctx", el)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryLock during a redial: %v, want DeadlineExceeded", err)
	}
}

// TestCloseBoundedWhileSubscribing: with Redis paused, a waiter's first
// subscription dials a dedicated connection, which rueidis does without a
// context (the handshake lasts up to ConnWriteTimeout, here 3 s); Close
// still returns within about the TTL.
func TestCloseBoundedWhileSubscribing(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	opt := testutil.ClientOption(srv.Addr())
	opt.ConnWriteTimeout = 3 * time.Second
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testutil.Ctx(t, 20*time.Second)
	const ttl = time.Second
	s, err := session.New(ctx, c, session.Options{Namespace: ns, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	defer srv.Cont()
	lctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = mutex.New(s, "m").Lock(lctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with Redis paused: %v, want DeadlineExceeded", err)
	}
	start := time.Now()
	_ = s.Close() // the cleanup fails: Redis is paused
	if el := time.Since(start); el > ttl+500*time.Millisecond {
		t.Fatalf("Close took %v with a subscription dial in flight; want about the TTL (%v)", el, ttl)
	}
}

func TestInvalidOptionsTouchNothing(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 10*time.Second)
	for _, o := range []session.Options{
		{Namespace: "a{b"},
		{Namespace: "a}b"},
		{TTL: -time.Second},
		{TTL: time.Millisecond},
		{TTL: time.Second, Heartbeat: 600 * time.Millisecond},
		{Heartbeat: -time.Second},
		{LockDelay: -time.Second},
		{TTL: session.MaxDuration + time.Millisecond},
		{TTL: 200 * 365 * 24 * time.Hour},
		{LockDelay: session.MaxDuration + time.Millisecond},
		{RestartGrace: session.MaxDuration + time.Millisecond},
		{TTL: time.Second, Heartbeat: time.Microsecond},
		{LockDelay: 500 * time.Microsecond},
		{ReplicaAck: 1, ReplicaAckTimeout: 500 * time.Microsecond},
	} {
		if s, err := session.New(ctx, c, o); !errors.Is(err, session.ErrInvalidOptions) {
			if s != nil {
				s.Close()
			}
			t.Errorf("New(%+v): %v, want ErrInvalidOptions", o, err)
		}
	}
	if n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("DBSIZE = %d, %v after invalid options; want 0", n, err)
	}
}

// TestMaxDurations: a session at the longest TTL, LockDelay and
// RestartGrace New accepts grants and releases every kind, and a mutex
// is kept for what the scripts compute from them (2*TTL + LockDelay),
// exactly: in ms, far from any overflow.
func TestMaxDurations(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	c := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 20*time.Second)
	const maxD = session.MaxDuration
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: maxD, LockDelay: maxD, RestartGrace: maxD})
	h, err := mutex.New(s, "m").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pttl, err := c.Do(ctx, c.B().Pttl().Key("{"+ns+"}:m:m").Build()).AsInt64()
	if want := (2*maxD + maxD).Milliseconds(); err != nil || pttl > want || pttl < want-10_000 {
		t.Fatalf("PTTL of the held mutex = %d, %v; want about %d (2*TTL + LockDelay)", pttl, err, want)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p := pool.New(s, "p")
	if err := p.Add(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	for name, acquire := range map[string]func() (*session.Hold, error){
		"semaphore": func() (*session.Hold, error) { return semaphore.New(s, "sem", 2).Acquire(ctx, 1) },
		"rwmutex":   func() (*session.Hold, error) { return rwmutex.New(s, "rw").Lock(ctx) },
		"rwmutex shared": func() (*session.Hold, error) {
			return rwmutex.New(s, "rw").RLock(ctx)
		},
		"pool": func() (*session.Hold, error) { return p.Acquire(ctx) },
	} {
		h, err := acquire()
		if err != nil {
			t.Fatalf("%s: acquire: %v", name, err)
		}
		if err := h.Release(ctx); err != nil {
			t.Fatalf("%s: release: %v", name, err)
		}
	}
}

// TestRestartEmptyReclaims: Redis restarts without persistence while a
// session holds a mutex. Within the restart grace nobody is granted
// anything; the session, still inside its deadline, reclaims its lease and
// hold with the same token; after the grace, grants resume with larger tokens.
func TestRestartEmptyReclaims(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = 2 * time.Second
	a := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl, RestartGrace: ttl})
	b := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: ttl, RestartGrace: ttl})
	h, err := mutex.New(a, "kept").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	srv.Restart()
	restarted := time.Now()
	// a's next heartbeat notices the loss and reclaims.
	testutil.WaitFor(t, ctx, func() bool {
		in, err := mutex.New(b, "kept").Holder(ctx)
		return err == nil && in.Session == a.ID()
	})
	in, err := mutex.New(b, "kept").Holder(ctx)
	if err != nil || in.Token != h.Token() {
		t.Fatalf("after reclaim: Holder = %+v, %v; want token %d", in, err, h.Token())
	}
	if h.Err() != nil || a.Err() != nil {
		t.Fatalf("hold %v / session %v ended by a restart it could reclaim from", h.Err(), a.Err())
	}
	// During the grace, even a free mutex is not granted; the reclaimed one
	// is held, and says so (its holder is live: a try needs no lease read).
	if _, err := mutex.New(b, "kept").TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock of the reclaimed mutex: %v, want ErrLocked", err)
	}
	if _, err := mutex.New(b, "free").TryLock(ctx); !errors.Is(err, session.ErrRestartGrace) {
		if time.Since(restarted) < ttl {
			t.Fatalf("TryLock of a free mutex during the restart grace: %v, want ErrRestartGrace", err)
		}
	}
	// Lock waits out the grace.
	h2, err := mutex.New(b, "free").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(restarted); waited < ttl-100*time.Millisecond {
		t.Fatalf("granted %v after the restart; the grace is %v", waited, ttl)
	}
	_ = h2.Release(ctx)
	if err := h.Release(ctx); err != nil {
		t.Fatalf("Release of the reclaimed hold: %v", err)
	}
	h3, err := mutex.New(b, "kept").TryLock(ctx)
	if err != nil || h3.Token() <= h.Token() {
		t.Fatalf("after the reclaimed hold's release: TryLock = %v; token must exceed %d", err, h.Token())
	}
}

// TestReplicaAck: with ReplicaAck 1, grants and heartbeats wait for a
// replica; with the replica paused, a grant is rolled back (ErrNotReplicated)
// and the session is lost at its deadline, since no renewal is acknowledged.
func TestReplicaAck(t *testing.T) {
	master, replica := redistest.StartReplicated(t)
	probe := testutil.Client(t, replica.Addr())
	ctx := testutil.Ctx(t, 30*time.Second)
	mc := testutil.Client(t, master.Addr())
	ns := redistest.Namespace(t)
	// The timeout is what each WAIT takes while the replica is paused, and
	// the two calls that meet it must end before the lease's deadline
	// (TTL); with the replica up an ack takes a ms or two, but 100 ms was
	// missed when the whole tree's tests loaded the 2 CPUs.
	const ttl = 3 * time.Second
	s := testutil.Dial(t, master.Addr(), ns, session.Options{TTL: ttl, ReplicaAck: 1, ReplicaAckTimeout: 500 * time.Millisecond})
	h, err := mutex.New(s, "acked").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock with a live replica: %v", err)
	}
	// The grant is on the replica.
	if v, err := testutil.MutexHolder(ctx, probe, "{"+ns+"}:m:acked"); err != nil || v != h.ID() {
		t.Fatalf("replica holder = %q, %v; want %s", v, err, h.ID())
	}
	h2, err := mutex.New(s, "released").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := s.Deadline()
	testutil.WaitFor(t, ctx, func() bool { return s.Deadline().After(d) })

	replica.Stop()
	// A release no replica acknowledged may be undone by a failover: it is
	// reported, and the session keeps retrying it.
	if err := h2.Release(ctx); !errors.Is(err, session.ErrNotReplicated) {
		t.Fatalf("Release with the replica paused: %v, want ErrNotReplicated", err)
	}
	defer replica.Cont()
	if _, err := mutex.New(s, "unacked").TryLock(ctx); !errors.Is(err, session.ErrNotReplicated) {
		t.Fatalf("TryLock with the replica paused: %v, want ErrNotReplicated", err)
	}
	// The grant is rolled back at once (its rollback, too, cannot be
	// acknowledged, and is retried until the session ends).
	testutil.WaitFor(t, ctx, func() bool {
		v, err := testutil.MutexHolder(ctx, mc, "{"+ns+"}:m:unacked")
		return err == nil && v == ""
	})
	deadline := s.Deadline()
	select {
	case <-h.Done():
	case <-time.After(2 * ttl):
		t.Fatal("hold not lost with no renewal acknowledged")
	}
	if !errors.Is(h.Err(), session.ErrLeaseLost) {
		t.Fatalf("hold cause %v, want ErrLeaseLost", h.Err())
	}
	if time.Now().After(deadline.Add(50 * time.Millisecond)) {
		t.Fatalf("lost %v after the last acknowledged deadline", time.Since(deadline))
	}
	// The rolled-back grant is free again (read on the master).
	if v, err := testutil.MutexHolder(ctx, mc, "{"+ns+"}:m:unacked"); err != nil || v != "" {
		t.Fatalf("rolled-back grant still recorded (%q, %v)", v, err)
	}
}

// TestReplicaAckBatches: concurrent calls of one session that go to Redis
// together (internal/scripts/batch.go) are acknowledged together: with the
// replica up every grant and release succeeds; with it paused every grant
// is reported as not replicated and rolled back, whichever batch carried it.
func TestReplicaAckBatches(t *testing.T) {
	master, replica := redistest.StartReplicated(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	mc := testutil.Client(t, master.Addr())
	ns := redistest.Namespace(t)
	cc := &testutil.CountingClient{Client: testutil.Client(t, master.Addr())}
	testutil.InitEpoch(t, master.Addr(), ns)
	// The timeout is what the paused replica's WAITs take; with the
	// replica up an ack takes a ms or two, but 100 ms was missed once
	// when the whole tree's tests loaded the 2 CPUs.
	s, err := session.New(ctx, cc, session.Options{Namespace: ns, TTL: 5 * time.Second, ReplicaAck: 1,
		ReplicaAckTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 24
	tryAll := func(prefix string) []error {
		errs := make([]error, n)
		done := make(chan struct{})
		for i := range n {
			go func() {
				defer func() { done <- struct{}{} }()
				h, err := mutex.New(s, prefix+strconv.Itoa(i)).TryLock(ctx)
				if err == nil {
					err = h.Release(ctx)
				}
				errs[i] = err
			}()
		}
		for range n {
			<-done
		}
		return errs
	}
	for i, err := range tryAll("up") {
		if err != nil {
			t.Fatalf("TryLock+Release %d with the replica up: %v", i, err)
		}
	}
	replica.Stop()
	defer replica.Cont()
	before := cc.N.Load()
	for i, err := range tryAll("down") {
		if !errors.Is(err, session.ErrNotReplicated) {
			t.Fatalf("TryLock %d with the replica paused: %v, want ErrNotReplicated", i, err)
		}
	}
	// Each WAIT takes the timeout: the calls queue behind the first
	// flights and go together (a request per call otherwise, and more for
	// the rollbacks).
	reqs := cc.N.Load() - before
	t.Logf("%d requests for %d TryLock calls and their rollbacks so far", reqs, n)
	if reqs >= n {
		t.Errorf("%d requests for %d TryLock calls and their rollbacks: none went together", reqs, n)
	}
	for i := range n {
		key := "{" + ns + "}:m:down" + strconv.Itoa(i)
		testutil.WaitFor(t, ctx, func() bool {
			v, err := testutil.MutexHolder(ctx, mc, key)
			return err == nil && v == ""
		})
	}
}

// failingSubscribe wraps a client so that, once armed, the session's
// SUBSCRIBE fails without reaching Redis shortly before its deadline (the
// session's local deadline when the subscribe started). entered reports the
// first one.
type failingSubscribe struct {
	rueidis.Client
	armed   atomic.Bool
	entered chan struct{}
	once    atomic.Bool
}

func (c *failingSubscribe) Dedicate() (rueidis.DedicatedClient, func()) {
	d, release := c.Client.Dedicate()
	return &failingSubscribeConn{DedicatedClient: d, c: c}, release
}

type failingSubscribeConn struct {
	rueidis.DedicatedClient
	c *failingSubscribe
}

func (d *failingSubscribeConn) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if name := cmd.Commands()[0]; !d.c.armed.Load() || name != "SUBSCRIBE" && name != "SSUBSCRIBE" {
		return d.DedicatedClient.Do(ctx, cmd)
	}
	if d.c.once.CompareAndSwap(false, true) {
		close(d.c.entered)
	}
	if dl, ok := ctx.Deadline(); ok {
		t := time.NewTimer(time.Until(dl) - 50*time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return rueidis.NewErrorResult(errors.New("subscribe failed (injected)"))
}

// TestFailedSubscribeDoesNotDelayLoss: a subscribe that fails while Redis is
// paused gives its connection back, and closing a connection to a silent
// server waits up to a second (rueidis' pipe.Close, docs/rueidis.md). That
// must not hold up the session's actor: the hold's context is still canceled
// at the session's local deadline, not up to a second after it, when the key
// has long expired on the server.
func TestFailedSubscribeDoesNotDelayLoss(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	ctx := testutil.Ctx(t, 30*time.Second)
	c, err := rueidis.NewClient(testutil.ClientOption(srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fc := &failingSubscribe{Client: c, entered: make(chan struct{})}
	s, err := session.New(ctx, fc, session.Options{Namespace: ns, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 10 * time.Second})
	if _, err := mutex.New(other, "busy").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := mutex.New(s, "held").TryLock(ctx) // no subscription yet
	if err != nil {
		t.Fatal(err)
	}
	fc.armed.Store(true)
	waited := make(chan error, 1)
	go func() {
		_, err := mutex.New(s, "busy").Lock(ctx) // queues, then wants a subscription
		waited <- err
	}()
	select {
	case <-fc.entered:
	case <-ctx.Done():
		t.Fatal("the waiting Lock never subscribed")
	}
	srv.Stop()
	defer srv.Cont()
	select {
	case <-h.Context().Done():
	case <-ctx.Done():
		t.Fatal("hold not canceled with Redis paused")
	}
	canceled := time.Now()
	if !errors.Is(context.Cause(h.Context()), session.ErrLeaseLost) {
		t.Fatalf("hold canceled with %v, want ErrLeaseLost", context.Cause(h.Context()))
	}
	if late := canceled.Sub(s.Deadline()); late > 250*time.Millisecond {
		t.Fatalf("hold canceled %v after the session's local deadline; the actor was held up", late)
	}
	if err := <-waited; err == nil {
		t.Fatal("waiting Lock succeeded with Redis paused")
	}
}

// matchHandler is a slog.Handler that calls on for each record whose message
// starts with prefix: blocking on a channel, like a handler writing to a
// full pipe, or counting.
type matchHandler struct {
	prefix string
	on     func()
}

func (h matchHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h matchHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.on()
	}
	return nil
}
func (h matchHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h matchHandler) WithGroup(string) slog.Handler      { return h }

// blockingHandler blocks on records starting with prefix until release is
// closed.
func blockingHandler(prefix string, release chan struct{}) slog.Handler {
	return matchHandler{prefix: prefix, on: func() { <-release }}
}

// TestBlockedLoggerDoesNotDelayLoss: the session logs each failed heartbeat,
// and the user's log handler may block (a full stderr pipe, a log shipper
// on the same broken network). The hold's context must still be canceled at
// the local deadline.
func TestBlockedLoggerDoesNotDelayLoss(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	release := make(chan struct{})
	defer close(release)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: time.Second, Logger: slog.New(blockingHandler("heartbeat failed", release))})
	h, err := mutex.New(s, "m").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill() // heartbeats fail at once: connection refused
	select {
	case <-h.Done():
	case <-ctx.Done():
		t.Fatal("hold not canceled with Redis down")
	}
	if late := time.Since(s.Deadline()); late > 250*time.Millisecond {
		t.Fatalf("hold canceled %v after the session's local deadline; the logger held the actor up", late)
	}
	if !errors.Is(context.Cause(h.Context()), session.ErrLeaseLost) {
		t.Fatalf("hold canceled with %v, want ErrLeaseLost", context.Cause(h.Context()))
	}
}

// TestDialHonoursCtx: rueidis.NewClient dials and handshakes with no ctx,
// which on a paused server lasts ConnWriteTimeout (TTL/2 under Dial). Dial
// returns at its ctx's end all the same.
func TestDialHonoursCtx(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	srv.Stop()
	defer srv.Cont()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	s, err := session.Dial(ctx, testutil.ClientOption(srv.Addr()), session.Options{Namespace: ns, TTL: 4 * time.Second})
	if err == nil {
		s.Close()
		t.Fatal("Dial succeeded with Redis paused")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial with Redis paused: %v, want DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Fatalf("Dial returned %v after a 100ms ctx", el)
	}
}

// TestDialCloseBoundedWhileSubscribed: Close of a session opened by Dial,
// with a notification connection open and Redis paused, stays within about
// one TTL: closing each rueidis connection to a silent server takes up to a
// second (docs/rueidis.md), and neither the notification connection nor the
// client's may add that to the cleanup's TTL.
func TestDialCloseBoundedWhileSubscribed(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = time.Second
	other := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 10 * time.Second})
	if _, err := mutex.New(other, "busy").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := session.Dial(ctx, testutil.ClientOption(srv.Addr()), session.Options{Namespace: ns, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mutex.New(s, "held").TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = mutex.New(s, "busy").Lock(lctx) // queues and subscribes
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held mutex: %v, want DeadlineExceeded", err)
	}
	srv.Stop()
	defer srv.Cont()
	start := time.Now()
	_ = s.Close() // the cleanup fails: Redis is paused
	el := time.Since(start)
	t.Logf("Close took %v", el)
	if el > ttl+500*time.Millisecond {
		t.Fatalf("Close took %v with Redis paused; want about the TTL (%v)", el, ttl)
	}
}

// TestBlockedLoggerDoesNotStallReclaim: after an empty restart, the
// heartbeat helper recreates the epoch marker and logs it; a user's log
// handler blocked on that record must not keep the session from reclaiming
// its lease, nor Close from returning.
func TestBlockedLoggerDoesNotStallReclaim(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	ctx := testutil.Ctx(t, 30*time.Second)
	release := make(chan struct{})
	defer close(release)
	c := testutil.Client(t, srv.Addr())
	s, err := session.New(ctx, c, session.Options{Namespace: ns, TTL: 2 * time.Second,
		Logger: slog.New(blockingHandler("namespace data missing", release))})
	if err != nil {
		t.Fatal(err)
	}
	h, err := mutex.New(s, "m").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	srv.Restart() // empty
	probe := testutil.Client(t, srv.Addr())
	testutil.WaitFor(t, ctx, func() bool {
		if h.Err() != nil {
			t.Fatalf("hold lost instead of reclaimed: %v", h.Err())
		}
		n, err := probe.Do(ctx, probe.B().Exists().Key("{"+ns+"}:s:"+s.ID()).Build()).AsInt64()
		return err == nil && n == 1
	})
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("Close took %v with the log handler blocked", el)
	}
}

// dedicateCounter counts the client's Dedicate calls.
type dedicateCounter struct {
	rueidis.Client
	n atomic.Int64
}

func (c *dedicateCounter) Dedicate() (rueidis.DedicatedClient, func()) {
	c.n.Add(1)
	return c.Client.Dedicate()
}

// TestOneDedicateWhilePoolExhausted: rueidis' Dedicate takes no ctx and
// waits as long as the client's dedicated pool is used up. A session whose
// subscribe attempts keep timing out meanwhile must not start a Dedicate
// (and leave a goroutine waiting) per attempt: it keeps the one in flight,
// and subscribes with it once a connection comes back.
func TestOneDedicateWhilePoolExhausted(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	ctx := testutil.Ctx(t, 30*time.Second)
	o := testutil.ClientOption(srv.Addr())
	o.BlockingPoolSize = 1
	raw, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_, giveBack := raw.Dedicate() // the pool's only connection, taken
	c := &dedicateCounter{Client: raw}
	var failed atomic.Int64
	s, err := session.New(ctx, c, session.Options{Namespace: ns, TTL: 500 * time.Millisecond,
		Logger: slog.New(matchHandler{prefix: "subscribe failed", on: func() { failed.Add(1) }})})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 10 * time.Second})
	held, err := mutex.New(other, "m").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := mutex.New(s, "m").Lock(ctx) // retries its subscribe until it gets a connection
		got <- err
	}()
	testutil.WaitFor(t, ctx, func() bool { return failed.Load() >= 3 })
	if n := c.n.Load(); n != 1 {
		t.Fatalf("%d Dedicate calls for %d failed subscribes; want the one in flight kept", n, failed.Load())
	}
	giveBack()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock once a connection came back: %v", err)
	}
	if n := c.n.Load(); n != 1 {
		t.Fatalf("%d Dedicate calls; want 1", n)
	}
}

// TestCloseAfterRestart: Close right after Redis restarted, with every
// connection of the session's client (4 by default, each call picking one
// at random) broken by the restart and none used since: its cleanup is
// idempotent and tried again on a broken connection, so it succeeds.
func TestCloseAfterRestart(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	testutil.InitEpoch(t, srv.Addr(), ns)
	ctx := testutil.Ctx(t, 30*time.Second)
	o := testutil.ClientOption(srv.Addr())
	o.PipelineMultiplex = 2 // rueidis' default for a single client: 4 connections
	c, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := session.New(ctx, c, session.Options{Namespace: ns, TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for range 64 { // dial all four
		if err := c.Do(ctx, c.B().Get().Key("{"+ns+"}:x").Build()).Error(); err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
	}
	srv.Kill()
	srv.Restart()
	if err := s.Close(); err != nil {
		t.Fatalf("Close after a restart: %v", err)
	}
}
