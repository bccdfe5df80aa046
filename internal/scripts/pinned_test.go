package scripts

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.LeakOptions...) }

func clientOption(addr string) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       []string{addr},
		DisableCache:      true,
		ForceSingleClient: true,
		ConnWriteTimeout:  time.Second,
	}
}

func newClient(t *testing.T, o rueidis.ClientOption) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// pinned starts a server and pins a client to it (o, when set, changes the
// client's options); admin is another client of that server.
func pinned(t *testing.T, o func(*rueidis.ClientOption)) (srv *redistest.Server, p *Pinned, admin rueidis.Client, ctx context.Context) {
	t.Helper()
	srv = redistest.Start(t, redistest.Options{})
	opt := clientOption(srv.Addr())
	if o != nil {
		o(&opt)
	}
	p = Pin(newClient(t, opt))
	p.pinLone = true // the tests' calls are lone: pin them too
	t.Cleanup(p.Unpin)
	return srv, p, newClient(t, clientOption(srv.Addr())), testCtx(t, 10*time.Second)
}

// pinnedID waits until p has a pinned connection and returns its Redis
// client id.
func pinnedID(t *testing.T, ctx context.Context, p *Pinned) int64 {
	t.Helper()
	for p.cur.Load() == nil {
		if ctx.Err() != nil {
			t.Fatal("no connection pinned")
		}
		time.Sleep(time.Millisecond) // no event tells a dial ended
	}
	id, err := p.Do(ctx, p.B().ClientId().Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func clientID(t *testing.T, ctx context.Context, c rueidis.Client) int64 {
	t.Helper()
	id, err := c.Do(ctx, c.B().ClientId().Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestPinnedUsesItsOwnConnection: on a standalone client, calls go over a
// connection of their own once it is dialled, not the client's shared one;
// after Unpin they go over the shared one and the pinned one is closed.
func TestPinnedUsesItsOwnConnection(t *testing.T) {
	_, p, _, ctx := pinned(t, nil)
	c := p.c
	own, shared := pinnedID(t, ctx, p), clientID(t, ctx, c)
	if own == shared {
		t.Fatalf("pinned calls run on the shared connection (client id %d)", shared)
	}
	rs := p.DoMulti(ctx, p.B().ClientId().Build(), p.B().Ping().Build())
	if id, err := rs[0].AsInt64(); err != nil || id != own {
		t.Fatalf("DoMulti ran on client %d (%v), want the pinned %d", id, err, own)
	}
	p.Unpin()
	if id := clientID(t, ctx, p); id != shared {
		t.Fatalf("after Unpin a call ran on client %d, want the shared %d", id, shared)
	}
	for {
		s, err := c.Do(ctx, c.B().ClientList().Id().ClientId(own).Build()).ToString()
		if err == nil && !strings.Contains(s, "id="+strconv.FormatInt(own, 10)+" ") {
			break // the pinned connection is gone from the server
		}
		if ctx.Err() != nil {
			t.Fatalf("pinned connection %d still open after Unpin", own)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPinnedOnlyOverlappingCalls: a lone call goes over the shared
// connection (one hand-over fewer when that connection is idle); a call
// made while another is in flight goes over the pinned one.
func TestPinnedOnlyOverlappingCalls(t *testing.T) {
	_, p, _, ctx := pinned(t, nil)
	own := pinnedID(t, ctx, p)
	p.pinLone = false
	shared := clientID(t, ctx, p.c)
	if id := clientID(t, ctx, p); id != shared {
		t.Fatalf("a lone call ran on client %d, want the shared %d", id, shared)
	}
	done := make(chan error, 1)
	go func() { // in flight for 300ms
		done <- p.Do(ctx, p.B().Blpop().Key("nothing").Timeout(0.3).Build()).Error()
	}()
	for p.calls.Load() == 0 {
		time.Sleep(time.Millisecond) // no event tells the call started
	}
	if id := clientID(t, ctx, p); id != own {
		t.Fatalf("a call overlapping another ran on client %d, want the pinned %d", id, own)
	}
	if err := <-done; !rueidis.IsRedisNil(err) {
		t.Fatalf("BLPOP: %v, want a nil reply", err)
	}
}

// sentinelMode reports a sentinel client's mode for a standalone client.
type sentinelMode struct {
	rueidis.Client
	dedicated *atomic.Int64
}

func (sentinelMode) Mode() rueidis.ClientMode { return rueidis.ClientModeSentinel }

func (c sentinelMode) Dedicate() (rueidis.DedicatedClient, func()) {
	c.dedicated.Add(1)
	return c.Client.Dedicate()
}

// TestPinnedOnlyStandalone: a sentinel (or cluster) client's dedicated
// connection would not follow a failover, so nothing is pinned: calls go
// over the shared connection.
func TestPinnedOnlyStandalone(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	var dedicated atomic.Int64
	c := sentinelMode{newClient(t, clientOption(srv.Addr())), &dedicated}
	ctx := testCtx(t, 10*time.Second)
	p := Pin(c)
	defer p.Unpin()
	for range 3 {
		if id, shared := clientID(t, ctx, p), clientID(t, ctx, c); id != shared {
			t.Fatalf("a call ran on client %d, want the shared %d", id, shared)
		}
	}
	if n := dedicated.Load(); n != 0 || p.cur.Load() != nil {
		t.Fatalf("%d connections dedicated for a sentinel client, want none", n)
	}
}

// TestPinnedReplacesABrokenConnection: when the pinned connection is killed,
// it is unpinned at once (rueidis reports the close), so no call fails on
// it, and a new connection is pinned.
func TestPinnedReplacesABrokenConnection(t *testing.T) {
	_, p, admin, ctx := pinned(t, nil)
	first := pinnedID(t, ctx, p)
	d := p.cur.Load()
	if err := admin.Do(ctx, admin.B().ClientKill().Id(first).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for p.cur.Load() == d {
		if ctx.Err() != nil {
			t.Fatal("the killed connection is still pinned")
		}
		time.Sleep(time.Millisecond) // no event tells the close was seen
	}
	for i := range 3 {
		if err := p.Do(ctx, p.B().Ping().Build()).Error(); err != nil {
			t.Fatalf("call %d after the pinned connection was killed: %v", i, err)
		}
	}
	if second := pinnedID(t, ctx, p); second == first {
		t.Fatalf("the killed connection %d is pinned again", first)
	}
}

// TestPinnedDropsAReadOnlyNode: a READONLY reply (the node became a
// replica) unpins the connection like a broken one.
func TestPinnedDropsAReadOnlyNode(t *testing.T) {
	_, p, admin, ctx := pinned(t, nil)
	pinnedID(t, ctx, p)
	d := p.cur.Load()
	// A replica of a port nobody listens on: read-only, and stays so.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if err := admin.Do(ctx, admin.B().Replicaof().Host("127.0.0.1").Port(int64(port)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	defer admin.Do(context.Background(), admin.B().Replicaof().No().One().Build())
	err = p.Do(ctx, p.B().Set().Key("k").Value("v").Build()).Error()
	if err == nil || !broken(err) {
		t.Fatalf("SET on a replica: %v, want a READONLY error that unpins", err)
	}
	if p.cur.Load() == d {
		t.Fatal("the connection to the read-only node is still pinned")
	}
}

// TestPinnedHonoursCtx: with Redis paused, a call on the pinned connection
// returns when its ctx ends, whether it is canceled or past its deadline,
// and the connection is unpinned (the abandoned call keeps its slot in the
// connection's ring until Redis answers).
func TestPinnedHonoursCtx(t *testing.T) {
	srv, p, _, ctx := pinned(t, func(o *rueidis.ClientOption) { o.ConnWriteTimeout = 5 * time.Second })
	for _, cancelIt := range []bool{false, true} {
		pinnedID(t, ctx, p)
		d := p.cur.Load()
		srv.Stop()
		// A deadline far away, so that only the cancellation can end the
		// second call.
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		want := context.DeadlineExceeded
		if cancelIt {
			cctx, cancel = context.WithTimeout(ctx, time.Minute)
			want = context.Canceled
			time.AfterFunc(100*time.Millisecond, cancel)
		}
		start := time.Now()
		err := p.Do(cctx, p.B().Ping().Build()).Error()
		el := time.Since(start)
		cancel()
		srv.Cont()
		if el > 500*time.Millisecond {
			t.Fatalf("a call ended by its ctx after 100ms returned after %v", el)
		}
		if !errors.Is(err, want) {
			t.Fatalf("call with Redis paused: %v, want %v", err, want)
		}
		if p.cur.Load() == d {
			t.Fatal("the connection of an abandoned call is still pinned")
		}
	}
}

// TestBoundNeverWaitsForADial: a call through Bound that finds the shared
// connection being redialled by another call returns when its own ctx ends,
// not when the dial does (rueidis waits for the dial whatever the ctx).
func TestBoundNeverWaitsForADial(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	dialing := make(chan struct{}, 1)
	var hold atomic.Bool
	o := clientOption(srv.Addr())
	o.PipelineMultiplex = -1 // one connection: every call shares its redial
	o.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
		if hold.Load() {
			select {
			case dialing <- struct{}{}:
			default:
			}
			<-ctx.Done() // a dial that lasts as long as the dialling call allows
			return nil, ctx.Err()
		}
		return d.DialContext(ctx, "tcp", addr)
	}
	c := newClient(t, o)
	admin := newClient(t, clientOption(srv.Addr()))
	ctx := testCtx(t, 10*time.Second)
	b := Bound(c)
	id := clientID(t, ctx, c)
	hold.Store(true)
	if err := admin.Do(ctx, admin.B().ClientKill().Id(id).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// The first call finds the connection gone; the next one redials,
	// which lasts until its 2 s ctx ends.
	done := make(chan struct{})
	go func() {
		defer close(done)
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for dctx.Err() == nil && c.Do(dctx, c.B().Ping().Build()).Error() != nil {
		}
	}()
	defer func() { <-done }()
	select {
	case <-dialing:
	case <-ctx.Done():
		t.Fatal("no redial")
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := b.Do(cctx, b.B().Ping().Build()).Error()
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Fatalf("a bound call with a 100ms ctx returned after %v, during another call's dial", el)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("bound call during a dial: %v, want DeadlineExceeded", err)
	}
}
