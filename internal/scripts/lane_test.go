package scripts_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
)

// laneRig is a one-connection client (so the shared pipeline has one
// CLIENT ID) and a Lane on it.
type laneRig struct {
	srv    *redistest.Server
	c      rueidis.Client
	lane   *scripts.Lane
	shared int64          // CLIENT ID of the shared pipeline
	admin  rueidis.Client // for CLIENT LIST and KILL
}

func newLaneRig(t *testing.T) *laneRig {
	t.Helper()
	r := &laneRig{srv: redistest.Start(t, redistest.Options{})}
	o := testutil.ClientOption(r.srv.Addr())
	o.PipelineMultiplex = -1
	c, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	r.c = c
	r.admin = testutil.Client(t, r.srv.Addr())
	r.lane = scripts.NewLane(c)
	t.Cleanup(r.lane.Stop)
	if r.shared, err = c.Do(context.Background(), c.B().ClientId().Build()).AsInt64(); err != nil {
		t.Fatal(err)
	}
	return r
}

// id returns the CLIENT ID of the connection that served a call through the
// lane with a ctx of deadline d from now (none when d is 0).
func (r *laneRig) id(t *testing.T, d time.Duration) (int64, error) {
	t.Helper()
	ctx := context.Background()
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	return r.lane.Do(ctx, r.lane.B().ClientId().Build()).AsInt64()
}

// stop SIGSTOPs the server until cont (or the end of the test) resumes it.
func (r *laneRig) stop(t *testing.T) (cont func()) {
	r.srv.Stop()
	var once sync.Once
	cont = func() { once.Do(r.srv.Cont) }
	t.Cleanup(cont)
	return cont
}

// laneID waits until calls through the lane are served by a connection of
// their own, and returns its CLIENT ID.
func (r *laneRig) laneID(t *testing.T, ctx context.Context) int64 {
	t.Helper()
	var id int64
	testutil.WaitFor(t, ctx, func() bool {
		got, err := r.id(t, time.Second)
		id = got
		return err == nil && got != r.shared
	})
	return id
}

// TestLaneServesSerialCallsAlone: once dialled, every call with a deadline
// runs on the lane's own connection, a call without a deadline never does,
// and a call that finds the lane busy takes the shared pipeline instead of
// waiting.
func TestLaneServesSerialCallsAlone(t *testing.T) {
	r := newLaneRig(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	lane := r.laneID(t, ctx)
	for range 50 {
		if id, err := r.id(t, time.Second); err != nil || id != lane {
			t.Fatalf("serial call served by client %d (%v), want the lane's %d", id, err, lane)
		}
	}
	if id, err := r.id(t, 0); err != nil || id != r.shared {
		t.Fatalf("call without a deadline served by client %d (%v), want the shared pipeline's %d", id, err, r.shared)
	}

	// Occupy the lane with a blocking call, then call again.
	blocked := make(chan error, 1)
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	go func() { blocked <- r.lane.Do(bctx, r.lane.B().Blpop().Key("lane:nothing").Timeout(0).Build()).Error() }()
	testutil.WaitFor(t, ctx, func() bool { return blockedClient(t, r, lane) })
	if id, err := r.id(t, time.Second); err != nil || id != r.shared {
		t.Fatalf("call while the lane is busy served by client %d (%v), want the shared pipeline's %d", id, err, r.shared)
	}
	if err := r.c.Do(ctx, r.c.B().Lpush().Key("lane:nothing").Element("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != nil {
		t.Fatalf("the blocking call on the lane: %v", err)
	}
	if id, err := r.id(t, time.Second); err != nil || id != lane {
		t.Fatalf("call after the lane is free again served by client %d (%v), want the lane's %d", id, err, lane)
	}
}

// blockedClient reports whether client id is blocked in a command.
func blockedClient(t *testing.T, r *laneRig, id int64) bool {
	t.Helper()
	list, err := r.admin.Do(context.Background(), r.admin.B().ClientList().Id().ClientId(id).Build()).ToString()
	return err == nil && strings.Contains(list, "flags=b")
}

// TestLaneCallEndsWithItsCtx: with Redis stopped, a lane call returns when
// its ctx is canceled, long before its deadline (rueidis' synchronous mode
// honours only the deadline); while the abandoned call waits, calls take the
// shared pipeline and end with their own ctx; once Redis is back, the lane
// serves calls again.
func TestLaneCallEndsWithItsCtx(t *testing.T) {
	r := newLaneRig(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	lane := r.laneID(t, ctx)
	cont := r.stop(t)

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	err := r.lane.Do(cctx, r.lane.B().Ping().Build()).Error()
	if el := time.Since(start); el > time.Second || !errors.Is(err, context.Canceled) {
		t.Fatalf("lane call canceled after 100ms returned %v after %v, want context.Canceled at once", err, el)
	}
	start = time.Now()
	_, err = r.id(t, 100*time.Millisecond)
	if el := time.Since(start); el > time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call with a 100ms ctx while Redis is stopped returned %v after %v, want DeadlineExceeded", err, el)
	}

	cont()
	testutil.WaitFor(t, ctx, func() bool {
		id, err := r.id(t, time.Second)
		return err == nil && id == lane
	})
}

// TestLaneDeadlineOnlyCallEndsAtItsDeadline: a lane call whose ctx only ends
// at its deadline (UntilDeadline of a ctx that is never canceled) runs
// without Bound's goroutine and still returns at that deadline with Redis
// stopped, well before ConnWriteTimeout (1 s); the lane then serves calls on
// a new connection once Redis is back.
func TestLaneDeadlineOnlyCallEndsAtItsDeadline(t *testing.T) {
	r := newLaneRig(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	old := r.laneID(t, ctx)
	cont := r.stop(t)
	dctx, cancel := scripts.UntilDeadline(context.Background(), time.Now().Add(200*time.Millisecond))
	defer cancel()
	start := time.Now()
	err := r.lane.Do(dctx, r.lane.B().Ping().Build()).Error()
	if el := time.Since(start); el < 150*time.Millisecond || el > 700*time.Millisecond || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lane call with a 200ms deadline returned %v after %v, want DeadlineExceeded at 200ms", err, el)
	}
	cont()
	if id := r.laneID(t, ctx); id == old {
		t.Fatalf("lane still on connection %d, which passed its deadline", id)
	}
}

// TestLaneRedialsAfterItsConnectionDies: a lane whose connection was killed
// fails that call, gives the connection back, and serves later calls on a
// new connection of its own.
func TestLaneRedialsAfterItsConnectionDies(t *testing.T) {
	r := newLaneRig(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	old := r.laneID(t, ctx)
	if err := r.admin.Do(ctx, r.admin.B().ClientKill().Id(old).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if id, err := r.id(t, time.Second); err == nil && id == old {
		t.Fatalf("call after the lane's connection was killed served by it (%d)", id)
	}
	if id := r.laneID(t, ctx); id == old {
		t.Fatalf("lane still on the killed connection %d", id)
	}
}

// TestLaneStopGivesTheConnectionBack: lanes that are stopped give their
// connection back to the client's pool, so lanes used and stopped one after
// another leave the server with no more connections than one lane needs;
// a stopped lane sends everything through the shared pipeline.
func TestLaneStopGivesTheConnectionBack(t *testing.T) {
	r := newLaneRig(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	r.laneID(t, ctx)
	r.lane.Stop()
	if id, err := r.id(t, time.Second); err != nil || id != r.shared {
		t.Fatalf("call through a stopped lane served by client %d (%v), want the shared pipeline's %d", id, err, r.shared)
	}
	before := clients(t, r)
	for range 10 {
		l := scripts.NewLane(r.c)
		testutil.WaitFor(t, ctx, func() bool {
			id, err := l.Do(ctx, l.B().ClientId().Build()).AsInt64()
			return err == nil && id != r.shared
		})
		l.Stop()
	}
	if after := clients(t, r); after > before {
		t.Fatalf("%d connections after 10 lanes were used and stopped, %d before", after, before)
	}
}

// TestLaneStopDuringACall: a lane stopped while a call is on its connection
// gives the connection back when the call ends, and the call's result is
// intact.
func TestLaneStopDuringACall(t *testing.T) {
	r := newLaneRig(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	lane := r.laneID(t, ctx)
	before := clients(t, r)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := r.lane.Do(ctx, r.lane.B().Blpop().Key("lane:stop").Timeout(0).Build()).Error(); err != nil {
			t.Errorf("call on the lane during Stop: %v", err)
		}
	})
	testutil.WaitFor(t, ctx, func() bool { return blockedClient(t, r, lane) })
	r.lane.Stop()
	if err := r.c.Do(ctx, r.c.B().Lpush().Key("lane:stop").Element("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// The connection is back in the pool: a dedicated connection taken now
	// is the lane's.
	d, release := r.c.Dedicate()
	defer release()
	if id, err := d.Do(ctx, d.B().ClientId().Build()).AsInt64(); err != nil || id != lane {
		t.Fatalf("dedicated connection after Stop is client %d (%v), want the lane's %d given back", id, err, lane)
	}
	if after := clients(t, r); after != before {
		t.Fatalf("%d connections after Stop, %d before", after, before)
	}
}

// clients returns the number of connections to the server.
func clients(t *testing.T, r *laneRig) int {
	t.Helper()
	list, err := r.admin.Do(context.Background(), r.admin.B().ClientList().Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(strings.TrimSpace(list), "\n") + 1
}
