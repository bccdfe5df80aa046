package rwmutex_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/rwmutex"
	"github.com/leasehold/leasehold/session"
)

// The example runs on an in-process miniredis so that it is self-contained;
// point InitAddress at a real Redis in production.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	ctx := context.Background()

	// ForceSingleClient, DisableCache and MarkIntact are for this in-process
	// miniredis only: production code passes Dial just the address (see the
	// mutex package's example).
	opt := rueidis.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true, DisableCache: true}
	if err := leaseholdtest.MarkIntact(ctx, opt, ""); err != nil {
		log.Fatal(err)
	}
	s, err := session.Dial(ctx, opt, session.Options{TTL: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	rw := rwmutex.New(s, "catalog")
	r1, err := rw.RLock(ctx) // readers share the mutex...
	if err != nil {
		log.Fatal(err)
	}
	r2, err := rw.TryRLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, err = rw.TryLock(ctx) // ...and keep writers out
	fmt.Println("TryLock beside readers:", errors.Is(err, rwmutex.ErrLocked))

	st, err := rw.Holders(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("readers:", len(st.Readers), "writer:", st.Writer != nil)

	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, err := rw.Lock(ctx) // exclusive; its token exceeds both readers'
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("writer's token is the newest:", w.Token() > r2.Token() && r2.Token() > r1.Token())
	_ = w.Release(ctx)
	// Output:
	// TryLock beside readers: true
	// readers: 2 writer: false
	// writer's token is the newest: true
}
