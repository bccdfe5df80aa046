package batch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
	b := New(s.send, s.send, nil, overdueInt)
	defer b.Stop()
	ctx, stop := context.WithCancel(context.Background()) // a ctx that can end: callers hand their calls to flights
	defer stop()
	var wg sync.WaitGroup
	results := make(chan [2]int, 100)
	call := func(ctx context.Context, i int) {
		wg.Go(func() {
			r, err := b.Do(ctx, time.Time{}, i)
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
func waitParked[I, R any](t *testing.T, b *Batcher[I, R], n int) {
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
func waitQueued[I, R any](t *testing.T, b *Batcher[I, R], n int) {
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
	b := New(s.send, s.send, nil, overdueInt)
	defer b.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.Do(ctx, time.Time{}, 1)
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
	b := New(s.send, s.send, nil, overdueInt)
	defer b.Stop()
	got := make(chan int, 2)
	go func() {
		r, _ := b.Do(context.Background(), time.Time{}, 1)
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
		r, _ := b.Do(ctx, time.Time{}, 2)
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
	b := New(s.send, s.send, nil, overdueInt)
	defer b.Stop()
	dl := time.Now().Add(time.Hour)
	type result struct {
		r   int
		err error
	}
	call := func(ctx context.Context, item int) chan result {
		ch := make(chan result, 1)
		go func() {
			r, err := b.Do(ctx, dl, item)
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
	b := New(s.send, s.send, nil, overdueInt)
	defer b.Stop()
	ctx, cancel := context.WithCancel(context.Background()) // no deadline
	defer cancel()
	dl := time.Now().Add(100 * time.Millisecond)
	results := make(chan [2]int, 100)
	var stuck []flightStarted
	for i := range batchSiblings {
		go func() {
			r, _ := b.Do(ctx, dl, i)
			results <- [2]int{i, r}
		}()
		stuck = append(stuck, <-s.started)
	}
	go func() {
		r, _ := b.Do(ctx, time.Now().Add(time.Minute), 100) // queued behind them
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
