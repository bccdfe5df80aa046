package conn_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/conn"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
)

// laneClient returns the session-like client of srv, BoundLane's over a
// shared client and a lane, and a count of the lane's dials.
func laneClient(t *testing.T, ctx context.Context, srv *redistest.Server) (shared, b rueidis.Client, dials *atomic.Int64) {
	t.Helper()
	shared = testutil.Client(t, srv.Addr())
	dials = new(atomic.Int64)
	o := testutil.ClientOption(srv.Addr())
	o.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, "tcp", addr)
	}
	lane, err := conn.NewLane(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if lane == nil {
		t.Fatal("no lane on a standalone server")
	}
	t.Cleanup(lane.Close)
	return shared, conn.BoundLane(shared, lane), dials
}

// clientID returns the id of the connection that ran a CLIENT ID sent
// through c with ctx.
func clientID(t *testing.T, ctx context.Context, c rueidis.Client) int64 {
	t.Helper()
	id, err := c.Do(ctx, c.B().ClientId().Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestLaneCarriesCancelableCalls: a call whose ctx can be canceled (and
// has a deadline) goes over the lane's connection; one whose ctx never
// ends, or has no deadline, goes over the shared client.
func TestLaneCarriesCancelableCalls(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := testutil.Ctx(t, 10*time.Second)
	shared, b, _ := laneClient(t, ctx, srv)
	sharedID := clientID(t, context.Background(), shared)

	laneID := clientID(t, ctx, b)
	if laneID == sharedID {
		t.Fatalf("a cancelable call went over the shared connection %d", sharedID)
	}
	if id := clientID(t, ctx, b); id != laneID {
		t.Fatalf("the next cancelable call went over connection %d, not the lane's %d", id, laneID)
	}
	if id := clientID(t, context.Background(), b); id != sharedID {
		t.Fatalf("a call whose ctx never ends went over connection %d, not the shared %d", id, sharedID)
	}
	noDeadline, cancel := context.WithCancel(context.Background())
	defer cancel()
	if id := clientID(t, noDeadline, b); id != sharedID {
		t.Fatalf("a call without deadline went over connection %d, not the shared %d", id, sharedID)
	}
}

// TestLaneReturnsAtCancel: a lane call on a server that does not answer
// returns when its ctx is canceled, long before its deadline (rueidis'
// synchronous mode alone would wait for the deadline), also while it
// redials; the lane then dials a new connection for the next call, which
// succeeds.
func TestLaneReturnsAtCancel(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := testutil.Ctx(t, 20*time.Second)
	_, b, dials := laneClient(t, ctx, srv)
	if err := b.Do(ctx, b.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	before := dials.Load()

	srv.Stop()
	stopped := true
	defer func() {
		if stopped {
			srv.Cont()
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	timer := time.AfterFunc(50*time.Millisecond, cancel)
	defer timer.Stop()
	start := time.Now()
	err := b.Do(cctx, b.B().Ping().Build()).Error()
	if el := time.Since(start); el > time.Second {
		t.Fatalf("a lane call canceled after 50ms returned after %v", el)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled lane call: %v, want context.Canceled", err)
	}
	// The next call dials a new connection to the paused server: the
	// connect succeeds (the kernel accepts), the handshake gets no reply.
	// The interrupt ends that too.
	hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
	defer hcancel()
	htimer := time.AfterFunc(50*time.Millisecond, hcancel)
	defer htimer.Stop()
	start = time.Now()
	err = b.Do(hctx, b.B().Ping().Build()).Error()
	if el := time.Since(start); el > time.Second {
		t.Fatalf("a lane call redialling a paused server, canceled after 50ms, returned after %v", el)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled lane call during a redial: %v, want context.Canceled", err)
	}
	srv.Cont()
	stopped = false

	if err := b.Do(ctx, b.B().Ping().Build()).Error(); err != nil {
		t.Fatalf("the lane call after a canceled one: %v", err)
	}
	if n := dials.Load() - before; n != 2 {
		t.Fatalf("the lane dialled %d times after the canceled calls, want 2 (each canceled call's connection is dropped)", n)
	}
}

// TestLaneReturnsAtDeadline: the same for a ctx that reaches its deadline.
func TestLaneReturnsAtDeadline(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := testutil.Ctx(t, 20*time.Second)
	_, b, _ := laneClient(t, ctx, srv)
	if err := b.Do(ctx, b.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	defer srv.Cont()
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := b.Do(cctx, b.B().Ping().Build()).Error()
	if el := time.Since(start); el > time.Second {
		t.Fatalf("a lane call with a 100ms ctx returned after %v", el)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lane call past its deadline: %v, want DeadlineExceeded", err)
	}
}

// TestNoLaneOnCluster: NewLane gives no lane for a Redis Cluster, whose
// client holds a connection per node.
func TestNoLaneOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, redistest.ClusterOptions{Replicas: -1})
	ctx := testutil.Ctx(t, 20*time.Second)
	o := testutil.ClientOption(cl.Seeds()[0])
	o.ForceSingleClient = false
	lane, err := conn.NewLane(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if lane != nil {
		lane.Close()
		t.Fatal("a lane on Redis Cluster")
	}
}

// TestLaneSurvivesIdleTimeout: a lane left idle longer than the server's
// idle-client timeout is still there for the next call (rueidis' PING of
// an idle connection keeps it), so that call does not fail.
func TestLaneSurvivesIdleTimeout(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := testutil.Ctx(t, 20*time.Second)
	_, b, dials := laneClient(t, ctx, srv)
	if err := srv.Do(t, "CONFIG", "SET", "timeout", "2").Error(); err != nil {
		t.Fatal(err)
	}
	id := clientID(t, ctx, b)
	time.Sleep(3500 * time.Millisecond) // the idle time under test, past the server's timeout
	if got := clientID(t, ctx, b); got != id {
		t.Fatalf("after 3.5s idle the lane is connection %d, not %d (dropped by the server's timeout)", got, id)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("the lane dialled %d times, want 1", n)
	}
}
