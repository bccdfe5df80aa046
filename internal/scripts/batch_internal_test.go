package scripts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
)

// batchWorld is one namespace with leases a, b and c, where a test sets up mutexes and compares the batch scripts with the
// single ones.
type batchWorld struct {
	t   *testing.T
	ctx context.Context
	c   rueidis.Client
	e   Env
}

func newBatchWorld(t *testing.T, ctx context.Context, c rueidis.Client) *batchWorld {
	t.Helper()
	w := &batchWorld{t: t, ctx: ctx, c: c, e: Env{C: c, K: NewKeys(redistest.Namespace(t)), TTL: time.Minute, Grace: time.Minute}}
	if err := c.Do(ctx, c.B().Set().Key(w.e.K.Epoch()).Value("0").Build()).Error(); err != nil { // intact
		t.Fatal(err)
	}
	w.e.mutexTail = w.e.formatMutexOpts()
	for _, sid := range []string{"a", "b", "c"} {
		if ok, _, err := w.e.OpenLease(ctx, sid, "test", time.Minute, 0); err != nil || !ok {
			t.Fatalf("OpenLease(%s) = %v, %v", sid, ok, err)
		}
	}
	return w
}

func (w *batchWorld) do(args ...string) rueidis.RedisResult {
	w.t.Helper()
	r := w.c.Do(w.ctx, w.c.B().Arbitrary(args...).Build())
	if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
		w.t.Fatalf("%v: %v", args, err)
	}
	return r
}

// grant makes hid the holder of mutex name with the single script.
func (w *batchWorld) grant(name, hid string) {
	w.t.Helper()
	if g, err := w.e.acquire(w.ctx, Resource{Kind: Mutex, Name: name}, hid, false); err != nil || g.Status != Granted {
		w.t.Fatalf("grant %s to %s: %+v, %v", name, hid, g, err)
	}
}

// state is everything the scripts wrote, tokens masked: every key of the
// namespace with its value and whether it expires, but of the leases only
// their withdrawal marks. Masked: the token in a mutex string, the tok
// field of a semaphore, a semaphore holder's token (its permits stay), a
// pool's tokens, the scores of a zset (its members stay, in order), the
// epoch marker's time.
func (w *batchWorld) state() []string {
	w.t.Helper()
	keys, err := w.c.Do(w.ctx, w.c.B().Keys().Pattern(w.e.K.Prefix+"*").Build()).AsStrSlice()
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		rel := strings.TrimPrefix(k, w.e.K.Prefix)
		ttl, _ := w.do("PTTL", k).AsInt64()
		var v any
		switch typ, _ := w.do("TYPE", k).ToString(); typ {
		case "string":
			s, _ := w.do("GET", k).ToString()
			if f := strings.Split(s, "|"); len(f) == 6 {
				f[1] = "tok"
				s = strings.Join(f, "|")
			} else if rel == keyEpoch {
				s = "time"
			}
			v = s
		case "list":
			v, _ = w.do("LRANGE", k, "0", "-1").AsStrSlice()
		case "zset":
			v, _ = w.do("ZRANGE", k, "0", "-1").AsStrSlice()
		case "hash":
			m, _ := w.do("HGETALL", k).AsStrMap()
			var f []string
			for name, x := range m {
				switch {
				case strings.HasPrefix(rel, keyLease) && !strings.HasPrefix(name, "x:"):
					continue // the lease itself: only its withdrawal marks
				case name == "tok" || strings.HasSuffix(rel, ":t"):
					x = "tok"
				case strings.HasPrefix(rel, "semh:"):
					x, _, _ = strings.Cut(x, ":") // the permits
				}
				f = append(f, name+"="+x)
			}
			slices.Sort(f)
			v = f
		}
		out = append(out, fmt.Sprintf("%s=%v expires=%v", rel, v, ttl > 0 && !strings.HasPrefix(rel, keyLease)))
	}
	slices.Sort(out)
	return out
}

// TestBatchScriptsMatchSingle: a batch of acquire attempts, and one of
// releases, leaves Redis as the single scripts sent one by one in the same
// order do, and answers each call as the single script would, or R_SLOW
// without writing anything, which the single script then answers.
func TestBatchScriptsMatchSingle(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b, c1 := HoldID("a", 1), HoldID("b", 1), HoldID("c", 1)
	// setup builds the same mutexes in any world.
	setup := func(w *batchWorld) {
		w.grant("idle", HoldID("b", 9))
		if r, err := w.e.release(ctx, Resource{Kind: Mutex, Name: "idle"}, HoldID("b", 9), false); err != nil || r != Freed {
			t.Fatalf("release: %v, %v", r, err)
		}
		w.grant("busy", b)
		w.grant("busyq", HoldID("b", 2))
		w.grant("mine", HoldID("a", 7))
		w.grant("dead", c1)
		w.do("DEL", w.e.K.Lease("c")) // c1's lease is gone: the full path must clear it
		w.e.withdrawForTest(ctx, t, HoldID("a", 8))
	}
	attempts := []acquireCall{
		{name: "idle", hid: a},                           // free with a token: granted
		{name: "fresh", hid: HoldID("a", 2)},             // no key: granted
		{name: "busy", hid: HoldID("a", 3)},              // held, no wait: busy
		{name: "busyq", hid: HoldID("a", 4), wait: true}, // held, wait: queued
		{name: "busyq", hid: HoldID("a", 5), wait: true}, // queued behind it
		{name: "mine", hid: HoldID("a", 7)},              // a retried grant: slow
		{name: "dead", hid: HoldID("a", 6)},              // a dead holder: slow
		{name: "idle", hid: HoldID("a", 8)},              // withdrawn: slow
		{name: "fresh", hid: HoldID("a", 9), wait: true}, // granted above in this batch: queued
	}
	single, batch := newBatchWorld(t, ctx, c), newBatchWorld(t, ctx, c)
	setup(single)
	setup(batch)
	acq := func(w *batchWorld, x acquireCall) (Grant, error) {
		return w.e.acquire(ctx, Resource{Kind: Mutex, Name: x.name}, x.hid, x.wait)
	}
	flight := func(w *batchWorld, xs []acquireCall) []attemptResult { return w.e.acquireFlight(ctx, xs) }
	// 3 slow: the retried grant, the dead holder, the withdrawn hold id.
	checkAcquireBatch(t, single, batch, attempts, acq, flight, 3)

	// Releases: idle with nobody waiting, a hand-off to a live waiter, one
	// not held (slow: not found), a hand-off whose first waiter is dead
	// (slow), and the queued waiters.
	for _, w := range []*batchWorld{single, batch} {
		w.grant("handdead", HoldID("a", 20))
		if g, err := w.e.acquire(ctx, Resource{Kind: Mutex, Name: "handdead"}, HoldID("b", 20), true); err != nil || g.Status != Busy {
			t.Fatalf("queue b.20: %+v, %v", g, err)
		}
		w.do("RPOP", w.e.K.Queue(Mutex, "handdead"))
		w.do("RPUSH", w.e.K.Queue(Mutex, "handdead"), HoldID("c", 20), HoldID("b", 20))
	}
	// busyq's holder b.2 hands over to a.4 (a's lease is live).
	releases := []releaseCall{
		{name: "idle", hid: a},
		{name: "fresh", hid: HoldID("a", 2)}, // hands over to a.9, queued behind it
		{name: "busy", hid: HoldID("a", 3)},  // not held by it: slow
		{name: "handdead", hid: HoldID("a", 20)},
	}
	rel := func(w *batchWorld, x releaseCall) (Released, error) {
		return w.e.release(ctx, Resource{Kind: Mutex, Name: x.name}, x.hid, false)
	}
	relFlight := func(w *batchWorld, xs []releaseCall) []releaseResult { return w.e.releaseFlight(ctx, xs) }
	// 2 slow: not held, a dead first waiter.
	checkReleaseBatch(t, single, batch, releases, rel, relFlight, 2)
}

// TestBatchTokensIncrease: the tokens of one batch come from one reading of
// the clock, and each is still above the mutex's last one, also when the
// stored token is ahead of the clock.
func TestBatchTokensIncrease(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := newBatchWorld(t, ctx, srv.Client(t))
	ahead := fmt.Sprintf("%d", time.Now().Add(time.Hour).UnixMicro())
	w.do("SET", w.e.K.Mutex("ahead"), "|"+ahead+"|0|120000||", "PX", "60000")
	w.grant("behind", HoldID("b", 1))
	old, _ := parseTok(w.do("GET", w.e.K.Mutex("behind")))
	w.e.release(ctx, Resource{Kind: Mutex, Name: "behind"}, HoldID("b", 1), false)
	got := w.e.acquireFlight(ctx, []acquireCall{{name: "ahead", hid: HoldID("a", 1)}, {name: "behind", hid: HoldID("a", 2)}})
	for _, r := range got {
		if r.err != nil || r.slow || r.g.Status != Granted {
			t.Fatalf("%+v", r)
		}
	}
	if want := mustInt(t, ahead) + 1; got[0].g.Token != want {
		t.Errorf("token after a stored one ahead of the clock: %d, want %d", got[0].g.Token, want)
	}
	if got[1].g.Token <= old {
		t.Errorf("token %d not above the last one, %d", got[1].g.Token, old)
	}
	// A hand-off in a release batch: above the mutex's last token too.
	w.do("SET", w.e.K.Mutex("ahead"), HoldID("a", 1)+"|"+fmt.Sprint(got[0].g.Token)+"|0|120000||1", "PX", "60000")
	w.do("RPUSH", w.e.K.Queue(Mutex, "ahead"), HoldID("b", 5))
	rs := w.e.releaseFlight(ctx, []releaseCall{{name: "ahead", hid: HoldID("a", 1)}, {name: "behind", hid: HoldID("a", 2)}})
	for _, r := range rs {
		if r.err != nil || r.slow || r.r != Freed {
			t.Fatalf("%+v", r)
		}
	}
	v, _ := w.do("GET", w.e.K.Mutex("ahead")).ToString()
	if f := strings.Split(v, "|"); f[0] != HoldID("b", 5) || mustInt(t, f[1]) != got[0].g.Token+1 {
		t.Errorf("handed-over mutex %q, want holder %s and token %d", v, HoldID("b", 5), got[0].g.Token+1)
	}
}

func parseTok(r rueidis.RedisResult) (int64, error) {
	v, err := r.ToString()
	if err != nil {
		return 0, err
	}
	var n int64
	_, err = fmt.Sscan(strings.Split(v, "|")[1], &n)
	return n, err
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// withdrawForTest withdraws hid as a Claim that gave up does.
func (e Env) withdrawForTest(ctx context.Context, t *testing.T, hid string) {
	t.Helper()
	if _, err := e.release(ctx, Resource{Kind: Mutex, Name: "withdrawn"}, hid, true); err != nil {
		t.Fatal(err)
	}
}

// blockedSend is a batcher's send that reports each flight as it starts
// and answers each item with its own value once told to.
type blockedSend struct {
	mu      sync.Mutex
	flights [][]int
	started chan flightStarted
}

type flightStarted struct {
	ctx     context.Context // the flight's
	items   []int
	proceed chan struct{}
}

func (s *blockedSend) send(ctx context.Context, items []int) []int {
	s.mu.Lock()
	s.flights = append(s.flights, slices.Clone(items))
	s.mu.Unlock()
	f := flightStarted{ctx, slices.Clone(items), make(chan struct{})}
	s.started <- f
	<-f.proceed
	return slices.Clone(items)
}

// TestBatcherPolicy: calls go at once while few are on the way; past that
// they queue and leave together, when a flight comes back or batchSize are
// queued, with at most batchFlights on the way. A call whose ctx ends
// while queued is never sent; every other call gets its own result.
func TestBatcherPolicy(t *testing.T) {
	if batchSiblings < batchFlights || batchSize > batchSiblings {
		t.Fatal("the test assumes batchSiblings >= batchFlights and batchSize <= batchSiblings")
	}
	s := &blockedSend{started: make(chan flightStarted, 100)}
	b := newBatcher(s.send, s.send, nil, overdueInt)
	defer b.stop()
	ctx, stop := context.WithCancel(context.Background()) // a ctx that can end: callers hand their calls to flights
	defer stop()
	var wg sync.WaitGroup
	results := make(chan [2]int, 100)
	call := func(ctx context.Context, i int) {
		wg.Go(func() {
			r, err := b.do(ctx, time.Time{}, i)
			if err != nil {
				r = -1
			}
			results <- [2]int{i, r}
		})
	}
	flight := func(want int) flightStarted {
		t.Helper()
		select {
		case f := <-s.started:
			if len(f.items) != want {
				t.Fatalf("flight of %v, want %d calls", f.items, want)
			}
			return f
		case <-time.After(5 * time.Second):
			t.Fatalf("no flight of %d", want)
		}
		panic("unreachable")
	}
	result := func(want ...int) {
		t.Helper()
		for range want {
			select {
			case r := <-results:
				if !slices.Contains(want, r[0]) || r[1] != r[0] {
					t.Fatalf("call %d got %d; want results of %v", r[0], r[1], want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no result for %v", want)
			}
		}
	}
	// batchSiblings calls go at once, each in a flight of its own.
	var first []flightStarted
	for i := range batchSiblings {
		call(ctx, i)
		first = append(first, flight(1))
	}
	// The next ones queue; one whose ctx ends while queued is dropped.
	cctx, cancel := context.WithCancel(ctx)
	call(cctx, 100)
	waitQueued(t, b, 1)
	cancel()
	if r := <-results; r != [2]int{100, -1} {
		t.Fatalf("canceled queued call: %v, want an error", r)
	}
	waitQueued(t, b, 0)
	// With batchSiblings flights on the way (more than batchFlights), calls
	// queue whatever their number...
	for i := range 10 {
		call(ctx, 10+i)
	}
	waitQueued(t, b, 10)
	// ...until a flight comes back and takes them all with it.
	close(first[0].proceed)
	result(0)
	big := flight(10)
	for _, f := range first[1:] {
		close(f.proceed)
	}
	result(1, 2, 3, 4, 5)
	// Their goroutines park (one still going would take the calls below).
	waitParked(t, b, batchSiblings-1)
	// One flight of 10 on the way: new calls queue until batchSize of them
	// start a flight.
	for i := range batchSize - 1 {
		call(ctx, 30+i)
	}
	waitQueued(t, b, batchSize-1)
	call(ctx, 30+batchSize-1)
	f := flight(batchSize)
	close(big.proceed)
	result(10, 11, 12, 13, 14, 15, 16, 17, 18, 19)
	close(f.proceed)
	result(30, 31, 32, 33, 34, 35)
	wg.Wait()
	for _, f := range s.flights {
		if slices.Contains(f, 100) {
			t.Fatalf("a call whose ctx ended while queued was sent: %v", s.flights)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for start := time.Now(); b.flying != 0 && time.Since(start) < 5*time.Second; {
		b.mu.Unlock()
		time.Sleep(time.Millisecond)
		b.mu.Lock()
	}
	if b.flying != 0 || b.aloft != 0 || len(b.queue) != 0 {
		t.Errorf("batcher not idle: flying %d, aloft %d, queued %d", b.flying, b.aloft, len(b.queue))
	}
	// The flight goroutines are parked for the next flights: the first
	// batchSiblings, which also took the later flights.
	if b.idle != batchSiblings {
		t.Errorf("%d flight goroutines parked, want %d", b.idle, batchSiblings)
	}
}

// waitParked waits until n of b's flight goroutines are parked.
func waitParked[I, R any](t *testing.T, b *batcher[I, R], n int) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		idle := b.idle
		b.mu.Unlock()
		if idle == n {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%d flight goroutines parked, want %d", idle, n)
		}
	}
}

// waitQueued waits until n calls are queued in b.
func waitQueued[I, R any](t *testing.T, b *batcher[I, R], n int) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		q := len(b.queue)
		b.mu.Unlock()
		if q == n {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%d calls queued, want %d", q, n)
		}
	}
}

// TestBatcherCallInFlightReturnsAtCtx: a call whose flight is stuck returns
// when its ctx ends, with ctx's error.
func TestBatcherCallInFlightReturnsAtCtx(t *testing.T) {
	s := &blockedSend{started: make(chan flightStarted, 1)}
	b := newBatcher(s.send, s.send, nil, overdueInt)
	defer b.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.do(ctx, time.Time{}, 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want DeadlineExceeded", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("returned after %v with a 50ms ctx", el)
	}
	close((<-s.started).proceed) // the flight ends; its goroutine exits (goleak checks)
}

// TestBatcherCallerSendsAlone: a call whose ctx never ends, with nothing
// queued, is sent by its caller (no flight goroutine); calls that come
// meanwhile go as usual.
func TestBatcherCallerSendsAlone(t *testing.T) {
	s := &blockedSend{started: make(chan flightStarted, 10)}
	b := newBatcher(s.send, s.send, nil, overdueInt)
	defer b.stop()
	got := make(chan int, 2)
	go func() {
		r, _ := b.do(context.Background(), time.Time{}, 1)
		got <- r
	}()
	f := <-s.started
	b.mu.Lock()
	flying, aloft := b.flying, b.aloft
	b.mu.Unlock()
	if flying != 0 || aloft != 1 {
		t.Fatalf("caller's own flight: %d flight goroutines, %d calls on the way; want 0, 1", flying, aloft)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		r, _ := b.do(ctx, time.Time{}, 2)
		got <- r
	}()
	g := <-s.started // a flight goroutine of its own: one call is on the way
	close(f.proceed)
	close(g.proceed)
	if a, b := <-got, <-got; a+b != 3 {
		t.Fatalf("results %d, %d; want 1 and 2", a, b)
	}
}

// overdueInt is the test batchers' result of an overdue call.
func overdueInt(error) int { return -2 }

// TestBatcherAbandonedFlightIsCanceled: a flight's ctx is canceled once
// every caller it carries has left, long before its deadline, so that it
// starts no retry that could still grant an attempt nobody waits for; it
// stays live while one caller still waits.
func TestBatcherAbandonedFlightIsCanceled(t *testing.T) {
	s := &blockedSend{started: make(chan flightStarted, 100)}
	b := newBatcher(s.send, s.send, nil, overdueInt)
	defer b.stop()
	dl := time.Now().Add(time.Hour)
	type result struct {
		r   int
		err error
	}
	call := func(ctx context.Context, item int) chan result {
		ch := make(chan result, 1)
		go func() {
			r, err := b.do(ctx, dl, item)
			ch <- result{r, err}
		}()
		return ch
	}
	// batchSiblings calls, each on a flight of its own, all held (a ctx
	// that can end: a caller whose ctx never ends sends its call itself).
	held, stopHeld := context.WithCancel(context.Background())
	defer stopHeld()
	var first []flightStarted
	var firstDone []chan result
	for i := range batchSiblings {
		firstDone = append(firstDone, call(held, 100+i))
		first = append(first, <-s.started)
	}
	// Two more queue behind them, and leave together with the next
	// flight goroutine that comes back.
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	doneA := call(ctxA, 1)
	waitQueued(t, b, 1)
	doneB := call(ctxB, 2)
	waitQueued(t, b, 2)
	close(first[0].proceed)
	f := <-s.started
	if !slices.Equal(f.items, []int{1, 2}) {
		t.Fatalf("flight %v, want [1 2]", f.items)
	}
	cancelA()
	if r := <-doneA; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("first caller: %v, want Canceled", r.err)
	}
	if err := f.ctx.Err(); err != nil {
		t.Fatalf("flight ctx ended (%v) while a caller still waits", err)
	}
	cancelB()
	if r := <-doneB; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("second caller: %v, want Canceled", r.err)
	}
	select {
	case <-f.ctx.Done():
		if !errors.Is(f.ctx.Err(), context.Canceled) {
			t.Fatalf("flight ctx: %v, want Canceled (its deadline is an hour away)", f.ctx.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("flight ctx still live 10s after its last caller left")
	}
	close(f.proceed)
	for i, g := range first[1:] {
		close(g.proceed)
		if r := <-firstDone[i+1]; r.err != nil || r.r != 101+i {
			t.Fatalf("held call %d: %v %v", 101+i, r.r, r.err)
		}
	}
	if r := <-firstDone[0]; r.err != nil || r.r != 100 {
		t.Fatalf("held call 100: %v %v", r.r, r.err)
	}
}

// TestBatcherOverdueFlight: a flight still on the way at its deadline (a
// call stuck in rueidis' wait for another goroutine's redial) settles:
// its callers get the failure at that deadline, also those whose ctx has
// none, and calls queued behind the stuck flights get a flight.
func TestBatcherOverdueFlight(t *testing.T) {
	s := &blockedSend{started: make(chan flightStarted, 100)}
	b := newBatcher(s.send, s.send, nil, overdueInt)
	defer b.stop()
	ctx, cancel := context.WithCancel(context.Background()) // no deadline
	defer cancel()
	dl := time.Now().Add(100 * time.Millisecond)
	results := make(chan [2]int, 100)
	var stuck []flightStarted
	for i := range batchSiblings {
		go func() {
			r, _ := b.do(ctx, dl, i)
			results <- [2]int{i, r}
		}()
		stuck = append(stuck, <-s.started)
	}
	go func() {
		r, _ := b.do(ctx, time.Now().Add(time.Minute), 100) // queued behind them
		results <- [2]int{100, r}
	}()
	waitQueued(t, b, 1)
	start := time.Now()
	for range batchSiblings {
		if r := <-results; r[1] != -2 {
			t.Fatalf("call %d of a stuck flight: result %d, want the failure", r[0], r[1])
		}
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("stuck flights settled after %v, deadline 100ms", el)
	}
	f := <-s.started // the queued call's own flight
	if len(f.items) != 1 || f.items[0] != 100 {
		t.Fatalf("flight %v, want the queued call", f.items)
	}
	close(f.proceed)
	if r := <-results; r != [2]int{100, 100} {
		t.Fatalf("queued call: %v", r)
	}
	for _, f := range stuck {
		close(f.proceed) // their late results are dropped
	}
	b.mu.Lock()
	for start := time.Now(); b.flying != 0 && time.Since(start) < 5*time.Second; {
		b.mu.Unlock()
		time.Sleep(time.Millisecond)
		b.mu.Lock()
	}
	defer b.mu.Unlock()
	if b.flying != 0 || b.aloft != 0 || len(b.queue) != 0 {
		t.Errorf("batcher not idle: flying %d, aloft %d, queued %d", b.flying, b.aloft, len(b.queue))
	}
}

// TestAbsentMutexServesItsQueue: a mutex key can expire while its queue
// still holds a live waiter (a lock delay keeps the key only until the
// delay ends, and a waiter with a long TTL may not renew it in time).
// A newcomer must then not be granted the mutex past the waiter, on the
// fast path of the single script nor in a batch; the waiter's re-check
// gets it.
func TestAbsentMutexServesItsQueue(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, batched := range []bool{false, true} {
		w := newBatchWorld(t, ctx, c)
		m := Resource{Kind: Mutex, Name: "m"}
		w.grant("m", HoldID("c", 1))
		if g, err := w.e.acquire(ctx, m, HoldID("b", 1), true); err != nil || g.Status != Busy {
			t.Fatalf("queue b.1: %+v, %v", g, err)
		}
		w.do("DEL", w.e.K.Mutex("m")) // expired, its queue still there
		var g Grant
		if batched {
			r := w.e.acquireFlight(ctx, []acquireCall{{name: "m", hid: HoldID("a", 1)}, {name: "other", hid: HoldID("a", 2)}})
			if r[0].err != nil || !r[0].slow {
				t.Fatalf("batched: newcomer %+v, want slow", r[0])
			}
		}
		g, err := w.e.acquire(ctx, m, HoldID("a", 1), false)
		if err != nil || g.Status == Granted {
			t.Fatalf("batched %v: newcomer past a live waiter: %+v, %v", batched, g, err)
		}
		if g, err := w.e.acquire(ctx, m, HoldID("b", 1), true); err != nil || g.Status != Granted {
			t.Fatalf("batched %v: the waiter's re-check: %+v, %v; want granted", batched, g, err)
		}
		if q, _ := w.do("LLEN", w.e.K.Queue(Mutex, "m")).AsInt64(); q != 0 {
			t.Fatalf("batched %v: %d entries left in the queue", batched, q)
		}
	}
}
