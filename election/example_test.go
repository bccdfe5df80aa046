package election_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/session"
)

// The example runs on an in-process miniredis so that it is self-contained;
// point InitAddress at a real Redis in production. One session campaigns to
// be the active scheduler; another one only watches who leads.
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
	dial := func() *session.Session {
		s, err := session.Dial(ctx, opt, session.Options{TTL: 5 * time.Second})
		if err != nil {
			log.Fatal(err)
		}
		return s
	}
	s, watcher := dial(), dial()
	defer s.Close()
	defer watcher.Close()

	e := election.New(s, "scheduler")
	h, err := e.Campaign(ctx, "node-a:8080") // blocks, FIFO, until this session leads
	if err != nil {
		log.Fatal(err)
	}
	// Lead under h.Context(): it is canceled the moment leadership can no
	// longer be proven, before anyone else can be elected. h.Token() is the
	// term: pass it to storage that rejects writes of deposed leaders.
	fmt.Println("leading", h.Resource(), "err:", h.Context().Err())

	wctx, stop := context.WithCancel(ctx)
	leaders := election.New(watcher, "scheduler").Observe(wctx) // starts with the current leader
	l := <-leaders
	fmt.Println("observed:", l.Value, "term matches:", l.Token == h.Token())

	if err := e.Proclaim(ctx, "node-a:9090"); err != nil { // change the value, same term
		log.Fatal(err)
	}
	l, err = election.New(watcher, "scheduler").Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", l.Value, "session matches:", l.Session == s.ID())

	if err := h.Release(ctx); err != nil { // resign: the next candidate, if any, leads at once
		log.Fatal(err)
	}
	for l := range leaders { // every change, always ending with the latest
		if l == (election.Leader{}) {
			fmt.Println("observed: nobody leads")
			break
		}
	}
	stop()
	_, err = e.Leader(ctx)
	fmt.Println("after resigning:", errors.Is(err, election.ErrNoLeader))
	fmt.Println("proclaim:", e.Proclaim(ctx, "node-a:7070"))
	// Output:
	// leading scheduler err: <nil>
	// observed: node-a:8080 term matches: true
	// leader: node-a:9090 session matches: true
	// observed: nobody leads
	// after resigning: true
	// proclaim: election "scheduler": election: not the leader
}

// An Observer follows who leads and, once its channel is closed, says why
// the observation ended.
func ExampleElection_Observer() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	// ForceSingleClient, DisableCache and MarkIntact: for miniredis only
	// (see Example).
	opt := rueidis.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true, DisableCache: true}
	if err := leaseholdtest.MarkIntact(context.Background(), opt, ""); err != nil {
		log.Fatal(err)
	}
	s, err := session.Dial(context.Background(), opt, session.Options{TTL: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx, stop := context.WithCancelCause(context.Background())
	o := election.New(s, "scheduler").Observer(ctx)
	fmt.Println("nobody leads:", <-o.C() == election.Leader{}) // the current state comes first

	h, err := election.New(s, "scheduler").Campaign(context.Background(), "node-a:8080")
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(context.Background())
	fmt.Println("observed:", (<-o.C()).Value)

	stop(errors.New("shutting down"))
	for range o.C() { // read until the channel is closed
	}
	fmt.Println("observer ended:", o.Err()) // ctx's cause; the session's end or an invalid name otherwise
	// Output:
	// nobody leads: true
	// observed: node-a:8080
	// observer ended: shutting down
}
