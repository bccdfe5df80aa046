package lease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
)

// TestRefusedWhileWaiting: a refusal that retrying cannot fix ends a wait
// at its next attempt, as an error matching ErrRedisRefused that wraps
// Redis' reply, and withdraws the hold id (a refusal inside a script may
// come after the script queued it): the waiter leaves the queue, and the
// mutex released later goes to nobody.
func TestRefusedWhileWaiting(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acl := func(rules ...string) {
		t.Helper()
		if err := srv.Do(t, append([]string{"ACL", "SETUSER", "lh"}, rules...)...).Error(); err != nil {
			t.Fatal(err)
		}
	}
	acl("on", ">pw", "~{"+ns+"}:*", "&{"+ns+"}:*", "+@all", "-@dangerous")
	admin := srv.Client(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, Username: "lh", Password: "pw",
		DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := Options{Namespace: ns, TTL: time.Second}
	if err := scripts.MarkIntact(ctx, admin, scripts.NewKeys(ns)); err != nil {
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
	queued := func() int64 {
		n, err := admin.Do(ctx, admin.B().Llen().Key("{"+ns+"}:q:m:m").Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waited := make(chan error, 1)
	go func() {
		_, err := b.Claim(ctx, r, true)
		waited <- err
	}()
	for queued() != 1 {
		time.Sleep(time.Millisecond) // no event tells that the waiter is queued
	}
	hid := scripts.HoldID(b.id, b.nextHold.Load())
	// The waiter's re-check (its fallback timer, about the holder's TTL
	// away) calls LPOS in the script; the withdrawal does not.
	acl("-lpos")
	select {
	case err = <-waited:
	case <-time.After(5 * o.TTL):
		t.Fatal("the wait did not end on the refusal")
	}
	var re *rueidis.RedisError
	if !errors.Is(err, ErrRedisRefused) || !errors.As(err, &re) || !strings.Contains(re.Error(), "can't run this command") {
		t.Fatalf("waiting Claim = %v; want an error matching ErrRedisRefused wrapping Redis' ACL refusal", err)
	}
	acl("+lpos")
	// The withdrawal runs in the background, from the loop.
	for {
		n, err := admin.Do(ctx, admin.B().Hexists().Key("{"+ns+"}:s:"+b.id).Field("x:"+hid).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if n := queued(); n != 0 {
		t.Fatalf("%d left in the queue after the withdrawal; want 0", n)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if in, err := a.env.MutexInspect(ctx, "m"); err != nil || in.HoldID != "" {
		t.Fatalf("after release: holder %q, %v; want free (its waiter withdrew)", in.HoldID, err)
	}
	if err := b.Err(); err != nil {
		t.Fatalf("the waiter's session ended: %v", err)
	}
}
