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
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/conn"
	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.LeakOptions...) }

// TestBoundNeverWaitsForADial: a call through Bound that finds the shared
// connection being redialled by another call returns when its own ctx ends,
// not when the dial does (rueidis waits for the dial whatever the ctx).
func TestBoundNeverWaitsForADial(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	dialing := make(chan struct{}, 1)
	var hold atomic.Bool
	o := testutil.ClientOption(srv.Addr()) // ConnWriteTimeout 1 s
	o.PipelineMultiplex = -1               // one connection: every call shares its redial
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
	c, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	admin := testutil.Client(t, srv.Addr())
	ctx := testutil.Ctx(t, 10*time.Second)
	b := conn.Bound(c)
	id, err := c.Do(ctx, c.B().ClientId().Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
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
	err = b.Do(cctx, b.B().Ping().Build()).Error()
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Fatalf("a bound call with a 100ms ctx returned after %v, during another call's dial", el)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("bound call during a dial: %v, want DeadlineExceeded", err)
	}
}

// TestUntil: Until bounds a call by the earlier of ctx's end and dl, adding
// a deadline of its own only when dl comes first.
func TestUntil(t *testing.T) {
	dl := time.Now().Add(time.Hour)

	early, cancelEarly := context.WithDeadline(context.Background(), dl.Add(-time.Minute))
	defer cancelEarly()
	if c, cancel := conn.Until(early, dl); c != early {
		cancel()
		t.Fatal("a ctx that ends before dl was wrapped again")
	}

	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"never ends", context.Background()},
		{"later deadline", func() context.Context {
			c, cancel := context.WithDeadline(context.Background(), dl.Add(time.Minute))
			t.Cleanup(cancel)
			return c
		}()},
	} {
		c, cancel := conn.Until(tc.ctx, dl)
		if d, ok := c.Deadline(); !ok || !d.Equal(dl) {
			t.Errorf("%s: deadline %v %v, want %v", tc.name, d, ok, dl)
		}
		cancel()
		if c.Err() == nil {
			t.Errorf("%s: ctx still live after cancel", tc.name)
		}
	}

	if c, cancel := conn.Until(early, time.Time{}); c != early {
		cancel()
		t.Fatal("a zero dl wrapped ctx")
	}
}

// TestUntilWithoutTimer: an Until ctx ends at its deadline and at its
// parent's end whether or not Done was asked for (Done is what gives it a
// timer), and its CancelFunc ends it.
func TestUntilWithoutTimer(t *testing.T) {
	type key struct{}
	parent, cancelParent := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
	defer cancelParent(nil)

	past, stop := conn.Until(parent, time.Now().Add(-time.Millisecond))
	if err := past.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("past deadline, Done never asked: Err %v, want DeadlineExceeded", err)
	}
	<-past.Done() // closed: the deadline has passed
	stop()

	c, stop := conn.Until(parent, time.Now().Add(time.Hour))
	defer stop()
	if c.Value(key{}) != "v" {
		t.Error("Value does not reach the parent")
	}
	if err := c.Err(); err != nil {
		t.Fatalf("live ctx: Err %v", err)
	}
	why := errors.New("why")
	cancelParent(why)
	if err := c.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("parent canceled, Done never asked: Err %v, want Canceled", err)
	}
	<-c.Done()
	if got := context.Cause(c); got != why {
		t.Errorf("Cause %v, want the parent's %v", got, why)
	}

	d, stopD := conn.Until(context.Background(), time.Now().Add(time.Hour))
	stopD()
	if err := d.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("after its CancelFunc, Done never asked: Err %v, want Canceled", err)
	}
	<-d.Done() // asked after the CancelFunc: already closed
}
