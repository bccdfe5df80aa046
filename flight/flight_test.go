package flight_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/flight"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/session"
)

func TestMain(m *testing.M) {
	if raw := os.Getenv(helperEnv); raw != "" {
		os.Exit(helperMain(raw))
	}
	goleak.VerifyTestMain(m, redistest.LeakOptions...)
}

func runs(t *testing.T, ctx context.Context, c rueidis.Client, ns string) int64 {
	t.Helper()
	n, err := c.Do(ctx, c.B().Get().Key(runsKey(ns)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// childGrace is the restart grace of every session of the tests'
// namespaces, at least the longest TTL of the child processes.
const childGrace = 30 * time.Second

// warm runs every script a Do runs once, so that no child's first call
// pays the EVAL fallback of a script Redis does not know yet, which would
// blur the request counts.
func warm(t *testing.T, ctx context.Context, addr, ns string) {
	t.Helper()
	s := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second, RestartGrace: childGrace})
	if _, err := flight.New(s, "warm", flight.Options{}).Do(ctx, "k", func(context.Context) ([]byte, error) {
		return []byte("w"), nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestOneComputationAcrossProcesses: 8 processes x 16 goroutines call Do
// for one key at once. fn runs once (counted in Redis), every caller gets
// its value, and no waiting process sends requests while it waits: the
// computation lasts until all 7 other processes are queued and 200ms more,
// and each process sends at most 5 requests in all (read, lock, read again,
// release; the computing one also stores): a waiter that polled even every
// 50ms would send 4 more.
func TestOneComputationAcrossProcesses(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, time.Minute)
	testutil.InitEpoch(t, addr, ns)
	warm(t, ctx, addr, ns)
	const procs, callers = 8, 16
	var kids []*child
	for i := range procs {
		kids = append(kids, startChild(t, helperConfig{Index: i, Addr: addr, NS: ns, TTL: 30 * time.Second,
			Group: "reports", Key: "daily", CacheTTL: time.Minute, Callers: callers,
			Fn: "await-queue", Waiters: procs - 1, Compute: 200 * time.Millisecond}))
	}
	for _, k := range kids {
		k.next(t, ctx, "ready", nil)
	}
	start := time.Now()
	for _, k := range kids {
		k.send(t, "go")
	}
	var values []string
	computing, total := 0, int64(0)
	var computed, last int64 // when fn returned, and when the last caller got its value
	for _, k := range kids {
		got := 0
		d := k.next(t, ctx, "done", func(e event) {
			switch e.Ev {
			case "computing":
				computing++
			case "computed":
				computed = e.At
			case "result":
				got++
				last = max(last, e.At)
				if e.Err != "" {
					t.Errorf("child %d: Do: %s", k.cfg.Index, e.Err)
				}
				values = append(values, e.Val)
			default:
				t.Errorf("child %d: unexpected %+v", k.cfg.Index, e)
			}
		})
		if got != callers {
			t.Errorf("child %d: %d results, want %d", k.cfg.Index, got, callers)
		}
		if d.Reqs > 5 {
			t.Errorf("child %d sent %d requests during its Do calls; want at most 5 (no polling)", k.cfg.Index, d.Reqs)
		}
		total += d.Reqs
	}
	t.Logf("%d callers in %d processes served in %v; %d requests in all; the last caller got the value %v after fn returned (%d hand-offs)",
		len(values), procs, time.Since(start), total, time.Duration(last-computed), procs-1)
	if n := runs(t, ctx, testutil.Client(t, addr), ns); n != 1 || computing != 1 {
		t.Fatalf("fn ran %d times (%d computing events); want once", n, computing)
	}
	if len(values) != procs*callers {
		t.Fatalf("%d results, want %d", len(values), procs*callers)
	}
	slices.Sort(values)
	if values = slices.Compact(values); len(values) != 1 || !strings.HasPrefix(values[0], "v-") {
		t.Fatalf("callers got %q; want one value", values)
	}
	if want := int64(4*(procs-1) + 5); total > want {
		t.Fatalf("%d requests in all; want at most %d", total, want)
	}
}

// computingAndQueued starts two caller processes on one key: a, whose fn
// blocks until "finish", and b, queued behind it. It returns once a
// computes and b waits.
func computingAndQueued(t *testing.T, ctx context.Context, addr, ns string, ttl time.Duration) (a, b *child) {
	t.Helper()
	testutil.InitEpoch(t, addr, ns)
	warm(t, ctx, addr, ns)
	cfg := helperConfig{Addr: addr, NS: ns, TTL: ttl, Group: "g", Key: "k", CacheTTL: time.Minute, Callers: 2}
	cfg.Index, cfg.Fn = 0, "block"
	a = startChild(t, cfg)
	cfg.Index, cfg.Fn = 1, "quick"
	b = startChild(t, cfg)
	a.next(t, ctx, "ready", nil)
	b.next(t, ctx, "ready", nil)
	a.send(t, "go")
	a.next(t, ctx, "computing", nil)
	b.send(t, "go")
	probe := testutil.Client(t, addr)
	testutil.WaitFor(t, ctx, func() bool {
		n, err := probe.Do(ctx, probe.B().Llen().Key(queueKey(ns, "g:k")).Build()).AsInt64()
		return err == nil && n == 1
	})
	return a, b
}

// results reads n results and the done event of c (skipping a
// "computing" event).
func results(t *testing.T, ctx context.Context, c *child, n int) []event {
	t.Helper()
	var out []event
	c.next(t, ctx, "done", func(e event) {
		if e.Ev == "computing" {
			return
		}
		if e.Ev != "result" {
			t.Errorf("child %d: unexpected %+v", c.cfg.Index, e)
			return
		}
		out = append(out, e)
	})
	if len(out) != n {
		t.Fatalf("child %d: %d results, want %d", c.cfg.Index, len(out), n)
	}
	return out
}

// ownValue checks that the waiting process b got the value it computed
// itself.
func ownValue(t *testing.T, rs []event) {
	t.Helper()
	for _, r := range rs {
		if r.Err != "" || r.Val != "v-1" {
			t.Fatalf("waiter got %q, %q; want its own v-1", r.Val, r.Err)
		}
	}
}

// cachedValue reads key's value through a session of its own, failing if
// that would compute.
func cachedValue(t *testing.T, ctx context.Context, addr, ns string) string {
	t.Helper()
	s := testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second, RestartGrace: childGrace})
	v, err := flight.New(s, "g", flight.Options{TTL: time.Minute}).Do(ctx, "k", func(context.Context) ([]byte, error) {
		return nil, errors.New("computed: nothing was cached")
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// TestComputerKilled: the computing process is SIGKILLed; the waiting one
// computes within the TTL and one heartbeat, and nobody gets a value from
// the killed one.
func TestComputerKilled(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = time.Second
	a, b := computingAndQueued(t, ctx, addr, ns, ttl)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	b.next(t, ctx, "computing", nil)
	took := time.Since(killed)
	t.Logf("the waiting process computed %v after the kill", took)
	if bound := ttl + ttl/3 + 250*time.Millisecond; took > bound {
		t.Fatalf("took over %v after the kill; want within TTL + one heartbeat (+250ms slack): %v", took, bound)
	}
	ownValue(t, results(t, ctx, b, 2))
	if n := runs(t, ctx, testutil.Client(t, addr), ns); n != 2 {
		t.Fatalf("fn ran %d times; want 2 (killed, then replaced)", n)
	}
	if v := cachedValue(t, ctx, addr, ns); v != "v-1" {
		t.Fatalf("cached %q, want v-1", v)
	}
}

// TestComputerPausedPastLease: the computing process is SIGSTOPped past its
// lease; the waiting one computes and its value is cached. After SIGCONT the
// paused one's fn returns its late value, which is discarded: its Do fails
// with ErrDiscarded and session.ErrLost (its lease was lost), and the cache
// keeps the new computer's value.
func TestComputerPausedPastLease(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	const ttl = time.Second
	a, b := computingAndQueued(t, ctx, addr, ns, ttl)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ownValue(t, results(t, ctx, b, 2))
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	a.send(t, "finish")
	for _, r := range results(t, ctx, a, 2) {
		if r.Val != "" || !r.Discarded || !r.Lost {
			t.Fatalf("paused computer got %q, %q (discarded %v, lost %v); want ErrDiscarded and ErrLost", r.Val, r.Err, r.Discarded, r.Lost)
		}
		t.Logf("paused computer: %s", r.Err)
	}
	if v := cachedValue(t, ctx, addr, ns); v != "v-1" {
		t.Fatalf("cached %q, want v-1 (the late value must not replace it)", v)
	}
}

// pair opens two sessions (each with its own client) and a probe client.
func pair(t *testing.T) (ctx context.Context, ns string, a, b *session.Session, probe rueidis.Client) {
	t.Helper()
	addr := redistest.Addr(t)
	ns = redistest.Namespace(t)
	ctx = testutil.Ctx(t, 20*time.Second)
	a = testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	b = testutil.Dial(t, addr, ns, session.Options{TTL: 5 * time.Second})
	return ctx, ns, a, b, testutil.Client(t, addr)
}

// counted returns a fn that counts its runs and, when gate is not nil,
// reports its start on started and waits for gate's outcome.
type counted struct {
	n       atomic.Int64
	started chan struct{}
	gate    chan result
}

type result struct {
	v   string
	err error
}

func (c *counted) fn(v string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		c.n.Add(1)
		if c.gate != nil {
			c.started <- struct{}{}
			r := <-c.gate
			return []byte(r.v), r.err
		}
		return []byte(v), nil
	}
}

func gated() *counted { return &counted{started: make(chan struct{}, 1), gate: make(chan result, 1)} }

func waitQueued(t *testing.T, ctx context.Context, probe rueidis.Client, ns, name string, n int64) {
	t.Helper()
	testutil.WaitFor(t, ctx, func() bool {
		got, err := probe.Do(ctx, probe.B().Llen().Key(queueKey(ns, name)).Build()).AsInt64()
		return err == nil && got == n
	})
}

// TestErrorShared: a failed computation's error reaches the caller waiting
// for it (wrapped in ErrFailed, fn not run again), is not cached without
// ErrorTTL (the next Do computes), and is cached with it.
func TestErrorShared(t *testing.T) {
	for _, errorTTL := range []time.Duration{0, time.Minute} {
		t.Run("ErrorTTL="+errorTTL.String(), func(t *testing.T) {
			ctx, ns, a, b, probe := pair(t)
			o := flight.Options{TTL: time.Minute, ErrorTTL: errorTTL}
			ga, gb := flight.New(a, "g", o), flight.New(b, "g", o)
			ca, cb := gated(), &counted{}
			boom := errors.New("boom")
			errc := make(chan error, 1)
			go func() {
				_, err := ga.Do(ctx, "k", ca.fn(""))
				errc <- err
			}()
			<-ca.started
			waited := make(chan error, 1)
			go func() {
				_, err := gb.Do(ctx, "k", cb.fn("b"))
				waited <- err
			}()
			waitQueued(t, ctx, probe, ns, "g:k", 1)
			ca.gate <- result{err: boom}
			if err := <-errc; !errors.Is(err, flight.ErrFailed) || !errors.Is(err, boom) {
				t.Fatalf("computing caller: %v; want ErrFailed wrapping fn's error", err)
			}
			if err := <-waited; !errors.Is(err, flight.ErrFailed) || !strings.Contains(err.Error(), "boom") {
				t.Fatalf("waiter: %v; want ErrFailed: boom", err)
			}
			if n := cb.n.Load(); n != 0 {
				t.Fatalf("the waiter ran fn %d times; want 0", n)
			}
			v, err := gb.Do(ctx, "k", cb.fn("b"))
			if errorTTL == 0 {
				if err != nil || string(v) != "b" || cb.n.Load() != 1 {
					t.Fatalf("next Do = %q, %v (fn runs %d); want a new computation", v, err, cb.n.Load())
				}
				return
			}
			if !errors.Is(err, flight.ErrFailed) || cb.n.Load() != 0 {
				t.Fatalf("next Do within ErrorTTL = %q, %v (fn runs %d); want the cached error", v, err, cb.n.Load())
			}
		})
	}
}

// TestErrorTextBounded: a failed computation's error text is stored cut
// to MaxValue: the computing caller gets fn's error whole, another
// process's caller the stored text, no longer than MaxValue.
func TestErrorTextBounded(t *testing.T) {
	ctx, _, a, b, _ := pair(t)
	o := flight.Options{ErrorTTL: time.Minute, MaxValue: 1024}
	ga, gb := flight.New(a, "g", o), flight.New(b, "g", o)
	long := errors.New(strings.Repeat("x", 100_000))
	if _, err := ga.Do(ctx, "k", func(context.Context) ([]byte, error) { return nil, long }); !errors.Is(err, long) {
		t.Fatalf("computing caller: %v; want fn's error", err)
	}
	cb := &counted{}
	_, err := gb.Do(ctx, "k", cb.fn("b"))
	if !errors.Is(err, flight.ErrFailed) || cb.n.Load() != 0 {
		t.Fatalf("other process within ErrorTTL: %.80v (fn runs %d); want the cached error", err, cb.n.Load())
	}
	if n := strings.Count(err.Error(), "x"); n != 1024 {
		t.Fatalf("the cached error carries %d bytes of fn's text; want MaxValue, 1024", n)
	}
}

// TestServeStale: with ServeStale, an expired value is returned at once
// while one caller recomputes it; then everyone gets the new value.
func TestServeStale(t *testing.T) {
	ctx, ns, a, b, probe := pair(t)
	reg := prometheus.NewRegistry()
	o := flight.Options{TTL: time.Minute, ServeStale: true, Metrics: reg}
	ga, gb := flight.New(a, "g", o), flight.New(b, "g", o)
	first := &counted{}
	if v, err := ga.Do(ctx, "k", first.fn("v1")); err != nil || string(v) != "v1" {
		t.Fatalf("first Do = %q, %v", v, err)
	}
	// Expire it: its fresh-until instant (server ms) goes back to 0.
	if err := probe.Do(ctx, probe.B().Hset().Key("{"+ns+"}:f:g:k").FieldValue().FieldValue("vx", "0").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	ca, cb := gated(), &counted{}
	got := make(chan result, 1)
	go func() {
		v, err := ga.Do(ctx, "k", ca.fn(""))
		got <- result{string(v), err}
	}()
	<-ca.started
	if v, err := gb.Do(ctx, "k", cb.fn("b")); err != nil || string(v) != "v1" || cb.n.Load() != 0 {
		t.Fatalf("Do while another recomputes = %q, %v (fn runs %d); want stale v1 at once", v, err, cb.n.Load())
	}
	ca.gate <- result{v: "v2"}
	if r := <-got; r.err != nil || r.v != "v2" {
		t.Fatalf("recomputing caller = %q, %v; want v2", r.v, r.err)
	}
	if v, err := gb.Do(ctx, "k", cb.fn("b")); err != nil || string(v) != "v2" || cb.n.Load() != 0 {
		t.Fatalf("Do after the recomputation = %q, %v (fn runs %d); want v2 from the cache", v, err, cb.n.Load())
	}
	for name, want := range map[string]float64{
		"leasehold_flight_computations_total": 2, "leasehold_flight_stale_serves_total": 1,
		"leasehold_flight_cache_hits_total": 1, "leasehold_flight_waits_total": 0,
	} {
		if got := counter(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// counter sums the samples of counter name in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestForget: Forget drops the cached value everywhere, and a computation
// running during Forget gives its value to its callers without caching it.
func TestForget(t *testing.T) {
	ctx, _, a, b, _ := pair(t)
	o := flight.Options{TTL: time.Minute}
	ga, gb := flight.New(a, "g", o), flight.New(b, "g", o)
	c := &counted{}
	for _, g := range []*flight.Group{ga, gb} {
		if v, err := g.Do(ctx, "k", c.fn("v1")); err != nil || string(v) != "v1" {
			t.Fatalf("Do = %q, %v", v, err)
		}
	}
	if err := gb.Forget(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if v, err := ga.Do(ctx, "k", c.fn("v2")); err != nil || string(v) != "v2" || c.n.Load() != 2 {
		t.Fatalf("Do after Forget = %q, %v (fn runs %d); want v2 computed", v, err, c.n.Load())
	}

	ca := gated()
	got := make(chan result, 1)
	go func() {
		v, err := ga.Do(ctx, "other", ca.fn(""))
		got <- result{string(v), err}
	}()
	<-ca.started
	if err := gb.Forget(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	ca.gate <- result{v: "overtaken"}
	if r := <-got; r.err != nil || r.v != "overtaken" {
		t.Fatalf("computation overtaken by Forget = %q, %v; want its value", r.v, r.err)
	}
	if v, err := gb.Do(ctx, "other", c.fn("fresh")); err != nil || string(v) != "fresh" {
		t.Fatalf("Do after an overtaken computation = %q, %v; want a new computation", v, err)
	}
}

// TestLateStoreRejected: a computing caller whose lease is gone from Redis
// before its session noticed (as after a pause past the TTL) cannot store:
// Redis refuses it, and Do fails with ErrDiscarded and session.ErrLost.
func TestLateStoreRejected(t *testing.T) {
	ctx, ns, a, _, probe := pair(t)
	g := flight.New(a, "g", flight.Options{TTL: time.Minute})
	_, err := g.Do(ctx, "k", func(context.Context) ([]byte, error) {
		if err := probe.Do(ctx, probe.B().Del().Key("{"+ns+"}:s:"+a.ID()).Build()).Error(); err != nil {
			t.Error(err)
		}
		return []byte("late"), nil
	})
	if !errors.Is(err, flight.ErrDiscarded) || !errors.Is(err, session.ErrLost) {
		t.Fatalf("Do = %v; want ErrDiscarded and ErrLost", err)
	}
	if n, err := probe.Do(ctx, probe.B().Hexists().Key("{"+ns+"}:f:g:k").Field("v").Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("value stored (%d, %v) by a caller whose lease was gone", n, err)
	}
}

// TestCallerLeaves: when the caller whose call runs leaves (its ctx ends),
// the other callers of the process run their own call and get a value.
func TestCallerLeaves(t *testing.T) {
	ctx, _, a, _, _ := pair(t)
	g := flight.New(a, "g", flight.Options{TTL: time.Minute})
	started := make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	firstErr := make(chan error, 1)
	go func() {
		_, err := g.Do(cctx, "k", func(fctx context.Context) ([]byte, error) {
			close(started)
			<-fctx.Done()
			return nil, context.Cause(fctx)
		})
		firstErr <- err
	}()
	<-started
	second := make(chan result, 1)
	go func() {
		v, err := g.Do(ctx, "k", func(context.Context) ([]byte, error) { return []byte("second"), nil })
		second <- result{string(v), err}
	}()
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("leaving caller: %v, want Canceled", err)
	}
	if r := <-second; r.err != nil || r.v != "second" {
		t.Fatalf("remaining caller = %q, %v; want its own value", r.v, r.err)
	}
}

// TestBadInput: invalid names, options and functions fail with errors.Is
// matchable errors and change nothing in Redis; a value over MaxValue is
// not stored.
func TestBadInput(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	s := testutil.Dial(t, srv.Addr(), ns, session.Options{TTL: 5 * time.Second})
	probe := testutil.Client(t, srv.Addr())
	keys := func() []string { return testutil.Keys(t, ctx, probe) }
	before := keys()
	fn := func(context.Context) ([]byte, error) { return []byte("v"), nil }
	ok := flight.Options{TTL: time.Minute}
	type call struct {
		name  string
		group string
		key   string
		o     flight.Options
		fn    func(context.Context) ([]byte, error)
		want  error
	}
	calls := []call{
		{"group with ':'", "a:b", "k", ok, fn, session.ErrInvalidName},
		{"too long together", "g", strings.Repeat("x", session.MaxNameLen-len("flight:g:")+1), ok, fn, session.ErrInvalidName},
		{"nil fn", "g", "k", ok, nil, flight.ErrNilFunc},
		{"negative TTL", "g", "k", flight.Options{TTL: -time.Second}, fn, flight.ErrInvalidOptions},
		{"negative ErrorTTL", "g", "k", flight.Options{ErrorTTL: -1}, fn, flight.ErrInvalidOptions},
		{"TTL above MaxDuration", "g", "k", flight.Options{TTL: session.MaxDuration + 1, ServeStale: true}, fn, flight.ErrInvalidOptions},
		{"ErrorTTL above MaxDuration", "g", "k", flight.Options{ErrorTTL: session.MaxDuration + 1}, fn, flight.ErrInvalidOptions},
		{"negative MaxValue", "g", "k", flight.Options{MaxValue: -1}, fn, flight.ErrInvalidOptions},
		{"huge MaxValue", "g", "k", flight.Options{MaxValue: 1 << 30}, fn, flight.ErrInvalidOptions},
	}
	for _, bad := range testutil.InvalidNames() {
		calls = append(calls, call{"group " + strconvQuote(bad), bad, "k", ok, fn, session.ErrInvalidName},
			call{"key " + strconvQuote(bad), "g", bad, ok, fn, session.ErrInvalidName})
	}
	for _, c := range calls {
		g := flight.New(s, c.group, c.o)
		if _, err := g.Do(ctx, c.key, c.fn); !errors.Is(err, c.want) {
			t.Errorf("%s: Do: %v, want %v", c.name, err, c.want)
		}
		if c.fn != nil {
			if err := g.Forget(ctx, c.key); !errors.Is(err, c.want) {
				t.Errorf("%s: Forget: %v, want %v", c.name, err, c.want)
			}
		}
	}
	if after := keys(); !slices.Equal(after, before) {
		t.Fatalf("keys %q -> %q: invalid input changed Redis", before, after)
	}

	// A value over MaxValue is refused and not stored; the next Do computes.
	g := flight.New(s, "g", flight.Options{TTL: time.Minute, MaxValue: 4})
	big := &counted{}
	if _, err := g.Do(ctx, "k", big.fn("12345")); !errors.Is(err, flight.ErrValueTooLarge) {
		t.Fatalf("Do of a 5-byte value with MaxValue 4: %v, want ErrValueTooLarge", err)
	}
	if n, err := probe.Do(ctx, probe.B().Exists().Key("{"+ns+"}:f:g:k").Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("an oversize value left an entry (%d, %v)", n, err)
	}
	if v, err := g.Do(ctx, "k", big.fn("1234")); err != nil || string(v) != "1234" || big.n.Load() != 2 {
		t.Fatalf("Do of a 4-byte value = %q, %v (fn runs %d)", v, err, big.n.Load())
	}
}

func strconvQuote(s string) string {
	if len(s) > 8 {
		s = s[:8]
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "?"), "\n", `\n`)
}

// TestShardedFlight: on a sharded namespace a key is computed once across
// sessions, while one session computes it the other waits for its outcome,
// and the keys spread over the shards.
func TestShardedFlight(t *testing.T) {
	addr := redistest.Addr(t)
	ns := redistest.Namespace(t)
	ctx := testutil.Ctx(t, 20*time.Second)
	o := session.Options{TTL: 5 * time.Second, Shards: 8}
	a, b := testutil.Dial(t, addr, ns, o), testutil.Dial(t, addr, ns, o)
	ga, gb := flight.New(a, "g", flight.Options{TTL: time.Minute}), flight.New(b, "g", flight.Options{TTL: time.Minute})
	for i := range 16 {
		key := fmt.Sprint("k", i)
		ca, cb := gated(), &counted{}
		got := make(chan error, 1)
		go func() {
			_, err := ga.Do(ctx, key, ca.fn(""))
			got <- err
		}()
		<-ca.started
		waited := make(chan []byte, 1)
		go func() {
			v, err := gb.Do(ctx, key, cb.fn("b"))
			if err != nil {
				t.Errorf("waiter of %s: %v", key, err)
			}
			waited <- v
		}()
		ca.gate <- result{v: "a-" + key}
		if err := <-got; err != nil {
			t.Fatalf("computing caller of %s: %v", key, err)
		}
		if v := <-waited; string(v) != "a-"+key || cb.n.Load() != 0 {
			t.Fatalf("the other session got %q and ran fn %d times; want the computed value, no run", v, cb.n.Load())
		}
	}
}
