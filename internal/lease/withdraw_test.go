package lease

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
)

// TestLateAcquireAfterWithdrawal: a waiter that gave up withdraws its hold
// id, so an acquire attempt for it that arrives late (delayed in the
// network, or resent on a new connection) can neither queue nor be granted:
// the resource never goes to a session that stopped waiting for it.
func TestLateAcquireAfterWithdrawal(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := Options{Namespace: redistest.Namespace(t), TTL: 2 * time.Second}
	if err := scripts.MarkIntact(ctx, c, scripts.NewKeys(o.Namespace)); err != nil {
		t.Fatal(err)
	}
	a, err := New(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r := scripts.Resource{Kind: scripts.Mutex, Name: "m"}
	h, err := a.Claim(ctx, r, false)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = b.Claim(wctx, r, true)
	wcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter: %v, want DeadlineExceeded", err)
	}
	hid := b.id + "." + strconv.FormatUint(b.nextHold.Load(), 36)
	// The withdrawal runs in the background: wait for the queue to empty.
	for {
		in, err := b.env.MutexInspect(ctx, "m")
		if err != nil {
			t.Fatal(err)
		}
		if in.Waiters == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// A late copy of the waiter's acquire now arrives.
	g, err := b.env.Acquire(ctx, r, hid, true)
	if err != nil || g.Status != scripts.Withdrawn {
		t.Fatalf("late acquire of a withdrawn hold id = %+v, %v; want Withdrawn", g, err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if in, err := b.env.MutexInspect(ctx, "m"); err != nil || in.HoldID != "" {
		t.Fatalf("after release: holder %q, %v; want free (nobody waits)", in.HoldID, err)
	}
}
