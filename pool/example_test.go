package pool_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/pool"
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
	// miniredis only: production code passes Dial just the address.
	// miniredis answers CLUSTER commands like a one-node cluster (rueidis
	// tells a real standalone Redis from a cluster by itself) and has no
	// client-side caching, which the client MarkIntact builds from opt
	// would ask for (Dial turns it off by itself). MarkIntact marks the
	// brand-new namespace as holding all its data, so that the first grant
	// does not wait out the restart grace. On a real Redis the grace is what
	// keeps a data loss from granting a resource twice, and a brand-new
	// namespace's first grant waits it out once.
	opt := rueidis.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true, DisableCache: true}
	if err := leaseholdtest.MarkIntact(ctx, opt, ""); err != nil {
		log.Fatal(err)
	}
	s, err := session.Dial(ctx, opt, session.Options{TTL: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	gpus := pool.New(s, "gpus")
	if err := gpus.Add(ctx, "gpu0", "gpu1"); err != nil {
		log.Fatal(err)
	}

	h0, err := gpus.Acquire(ctx) // any free member; waits FIFO when none is
	if err != nil {
		log.Fatal(err)
	}
	// Use the member named by h0.Resource() while h0.Context() is live; it is
	// canceled before anyone else can be granted that member.
	fmt.Println("worker A got", h0.Resource())

	h1, err := gpus.TryAcquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker B got", h1.Resource())

	_, err = gpus.TryAcquire(ctx)
	fmt.Println("worker C:", err)

	st, err := gpus.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("members", st.Members, "held", len(st.Held), "free", st.Free)

	if err := h0.Release(ctx); err != nil {
		log.Fatal(err)
	}
	h2, err := gpus.AcquireKey(ctx, h0.Resource()) // that member, waiting if needed
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker C got", h2.Resource(), "newer token:", h2.Token() > h0.Token())

	if err := gpus.Remove(ctx, h1.Resource()); err != nil {
		log.Fatal(err)
	}
	<-h1.Done() // told by notification or by the next heartbeat
	fmt.Println("worker B lost gpu1:", errors.Is(h1.Err(), session.ErrLost))

	// Output:
	// worker A got gpu0
	// worker B got gpu1
	// worker C: pool: no free member
	// members [gpu0 gpu1] held 2 free 0
	// worker C got gpu0 newer token: true
	// worker B lost gpu1: true
}
