package session_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// A session holds a mutex until it is closed. The example runs on an
// in-process miniredis so that it is self-contained; point InitAddress at a
// real Redis in production.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	ctx := context.Background()

	opt := rueidis.ClientOption{
		InitAddress: []string{mr.Addr()},
		// For miniredis only, which answers CLUSTER commands like a
		// one-node cluster: production code leaves ForceSingleClient
		// unset, and rueidis tells a standalone Redis from a cluster.
		ForceSingleClient: true,
		// For miniredis only, which has no client-side caching: the
		// client MarkIntact builds from opt would ask for it (Dial turns
		// it off by itself).
		DisableCache: true,
	}
	// For this brand-new miniredis only: MarkIntact marks the namespace as
	// holding all its data, so that the first grant does not wait out the
	// restart grace. Production code must not call it: on a real Redis the
	// grace is what keeps a data loss from granting a resource twice, and a
	// brand-new namespace's first grant waits it out once.
	if err := leaseholdtest.MarkIntact(ctx, opt, ""); err != nil {
		log.Fatal(err)
	}
	s, err := session.Dial(ctx, opt, session.Options{TTL: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close() // idempotent

	h, err := mutex.New(s, "reindex").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Work under h.Context(): it is canceled the moment the hold can no
	// longer be proven, before anyone else can get the mutex.
	fmt.Println("holding", h.Resource(), "err:", h.Err())

	// Close releases every hold in Redis and deletes the lease; the holds'
	// contexts end with ErrClosed. A lost lease would end them with an error
	// matching ErrLeaseLost instead.
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}
	<-h.Done()
	fmt.Println("hold ended:", context.Cause(h.Context()))
	fmt.Println("session ended:", s.Err())
	// Output:
	// holding reindex err: <nil>
	// hold ended: session: closed
	// session ended: session: closed
}

// New opens a session on a client the caller owns. Build the client as
// Dial builds its own: DisableCache on, and a ConnWriteTimeout below the TTL.
func ExampleNew() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	ctx := context.Background()

	const ttl = 5 * time.Second
	opt := rueidis.ClientOption{
		InitAddress:       []string{mr.Addr()},
		DisableCache:      true,    // leasehold uses no client-side caching
		ConnWriteTimeout:  ttl / 2, // give up a stalled connection within the lease
		ForceSingleClient: true,    // for miniredis only (see Example)
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // after the session's Close: the caller owns the client

	if err := leaseholdtest.MarkIntact(ctx, opt, ""); err != nil { // for miniredis only (see Example)
		log.Fatal(err)
	}
	s, err := session.New(ctx, c, session.Options{TTL: ttl})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	fmt.Println("TTL:", s.Options().TTL, "heartbeat:", s.Options().Heartbeat.Round(time.Millisecond))
	// Output:
	// TTL: 5s heartbeat: 1.667s
}

// A Manager keeps a process working through lease losses: Run runs fn on
// the live session, and again on a new one when the lease is lost.
func ExampleManager_Run() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	ctx := context.Background()

	opt := rueidis.ClientOption{
		InitAddress:       []string{mr.Addr()},
		DisableCache:      true,
		ConnWriteTimeout:  2500 * time.Millisecond, // below the TTL, as for New
		ForceSingleClient: true,                    // for miniredis only (see Example)
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if err := leaseholdtest.MarkIntact(ctx, opt, ""); err != nil { // for miniredis only (see Example)
		log.Fatal(err)
	}
	m := session.NewManager(c, session.Options{TTL: 5 * time.Second})
	defer m.Close()

	err = m.Run(ctx, func(ctx context.Context, s *session.Session) error {
		// ctx ends with the session: stop working when it does.
		h, err := mutex.New(s, "reindex").Lock(ctx)
		if err != nil {
			return err
		}
		defer h.Release(context.Background())
		fmt.Println("reindexing under", h.Resource())
		return nil
	})
	fmt.Println("Run:", err)
	// Output:
	// reindexing under reindex
	// Run: <nil>
}

// Options.Shards spreads one namespace over many hash slots, so that on a
// Redis Cluster it uses every master; every session of the namespace uses
// the same count, and one with another count is refused.
func ExampleOptions_shards() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	ctx := context.Background()
	opt := rueidis.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true, DisableCache: true} // miniredis only, as in Example
	// For this brand-new miniredis only (see Example): every shard intact.
	if err := leaseholdtest.MarkIntactShards(ctx, opt, "orders", 16); err != nil {
		log.Fatal(err)
	}
	o := session.Options{Namespace: "orders", TTL: 5 * time.Second, Shards: 16}
	s, err := session.Dial(ctx, opt, o)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for _, name := range []string{"order-1", "order-2", "order-3"} {
		h, err := mutex.New(s, name).Lock(ctx) // each name in its own shard's slot
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("holding", h.Resource())
		_ = h.Release(ctx)
	}
	o.Shards = 8
	_, err = session.Dial(ctx, opt, o)
	fmt.Println("8 shards refused:", errors.Is(err, session.ErrShardsMismatch))
	// Output:
	// holding order-1
	// holding order-2
	// holding order-3
	// 8 shards refused: true
}
