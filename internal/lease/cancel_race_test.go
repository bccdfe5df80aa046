package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
)

// raceKind is one of the primitives' blocking calls, as Claim sees it.
type raceKind struct {
	name string
	// whole is what a holder claims of resource name: together, all of it.
	whole func(name string) []scripts.Resource
	// want is what waiter i asks for of resource name.
	want func(name string, i int) scripts.Resource
	// setup prepares resource name once (a pool's members), or is nil.
	setup func(ctx context.Context, s *Session, name string) error
}

func raceKinds() []raceKind {
	one := func(r scripts.Resource) []scripts.Resource { return []scripts.Resource{r} }
	mu := func(name string) scripts.Resource { return scripts.Resource{Kind: scripts.Mutex, Name: name} }
	rw := func(name string, shared bool) scripts.Resource {
		return scripts.Resource{Kind: scripts.RWMutex, Name: name, Shared: shared}
	}
	sem := func(name string, n int64) scripts.Resource {
		return scripts.Resource{Kind: scripts.Semaphore, Name: name, N: n, Limit: 2}
	}
	pool := func(name string) scripts.Resource { return scripts.Resource{Kind: scripts.Pool, Name: name} }
	el := func(name, value string) scripts.Resource {
		return scripts.Resource{Kind: scripts.Election, Name: name, Value: value}
	}
	return []raceKind{
		{name: "Mutex.Lock",
			whole: func(n string) []scripts.Resource { return one(mu(n)) },
			want:  func(n string, _ int) scripts.Resource { return mu(n) }},
		{name: "RWMutex.RLock",
			whole: func(n string) []scripts.Resource { return one(rw(n, false)) },
			want:  func(n string, _ int) scripts.Resource { return rw(n, true) }},
		{name: "RWMutex.Lock",
			whole: func(n string) []scripts.Resource { return one(rw(n, true)) },
			want:  func(n string, _ int) scripts.Resource { return rw(n, false) }},
		{name: "Semaphore.Acquire",
			whole: func(n string) []scripts.Resource { return one(sem(n, 2)) },
			want:  func(n string, _ int) scripts.Resource { return sem(n, 1) }},
		{name: "Pool.Acquire",
			whole: func(n string) []scripts.Resource { return []scripts.Resource{pool(n), pool(n)} },
			want:  func(n string, _ int) scripts.Resource { return pool(n) },
			setup: func(ctx context.Context, s *Session, n string) error {
				_, _, err := s.env.PoolChange(ctx, n, "add", []string{"a", "b"})
				return err
			}},
		{name: "Election.Campaign",
			whole: func(n string) []scripts.Resource { return one(el(n, "holder")) },
			want:  func(n string, i int) scripts.Resource { return el(n, fmt.Sprint("waiter-", i)) }},
	}
}

// TestCanceledWaiterNotGranted ports rueidislock's
// TestLocker_WithContext_MissingPeers to every blocking call: a call whose
// ctx ended before the resource was released returns ctx's cause and never
// a hold, also when the hand-off (or a re-check answered granted) reaches
// it as it sees ctx's end (both ready in its select); and the grant it
// gives back goes on, so the resource ends up free.
//
// Each round, one session holds the whole of several resources while the
// waiters of other sessions call the blocking claim on them. One waiter in
// eight has its ctx end before its call; then the ctxs of all end at once,
// most waiters still in their first attempt, and at once the holder
// releases every resource concurrently. Every grant is made after that
// release, so after every waiter's ctx ended: every waiter must fail.
func TestCanceledWaiterNotGranted(t *testing.T) {
	for _, k := range raceKinds() {
		t.Run(k.name, func(t *testing.T) { testCanceledWaiterNotGranted(t, k) })
	}
}

func testCanceledWaiterNotGranted(t *testing.T, k raceKind) {
	const (
		rounds    = 40
		resources = 16 // per round, each waited for by a few waiters: many hand-offs race
		waiters   = 48
		sessions  = 2 // the waiters'
	)
	srv := redistest.Start(t, redistest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := srv.Client(t)
	o := Options{Namespace: redistest.Namespace(t), TTL: 2 * time.Second}
	if err := scripts.MarkIntact(ctx, c, scripts.NewKeys(o.Namespace)); err != nil {
		t.Fatal(err)
	}
	ss := make([]*Session, 1+sessions)
	for i := range ss {
		s, err := New(ctx, c, o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ss[i] = s
	}
	holder, ws := ss[0], ss[1:]
	names := make([]string, resources)
	for j := range names {
		names[j] = fmt.Sprint("r", j)
		if k.setup != nil {
			if err := k.setup(ctx, holder, names[j]); err != nil {
				t.Fatal(err)
			}
		}
	}
	gaveUp := errors.New("the waiter gave up")
	granted := 0 // waiters handed a hold although their ctx had ended
	for round := range rounds {
		holds := make([][]*Hold, resources) // the holder's, by resource
		for j, n := range names {
			for _, r := range k.whole(n) {
				h, err := holder.Claim(ctx, r, false)
				if err != nil {
					t.Fatalf("round %d: holder: %v (left held by the round before?)", round, err)
				}
				holds[j] = append(holds[j], h)
			}
		}
		type result struct {
			h   *Hold
			err error
		}
		results := make([]result, waiters)
		cancels := make([]context.CancelCauseFunc, waiters)
		var wg sync.WaitGroup
		for i := range waiters {
			wctx, wcancel := context.WithCancelCause(ctx)
			cancels[i] = wcancel
			if i%8 == 0 {
				wcancel(gaveUp) // ends before the call
			}
			wg.Go(func() {
				h, err := ws[i%sessions].Claim(wctx, k.want(names[i%resources], i), true)
				results[i] = result{h, err}
			})
		}
		// One round trip of the test's own lets most waiters send their
		// first attempt. Then resource j's releaser ends the ctxs of j's
		// waiters and at once releases j: its hand-offs arrive while
		// those waiters are still taking their attempts' answers.
		if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var rg sync.WaitGroup
		for j := range names {
			rg.Go(func() {
				<-start
				for i := j; i < waiters; i += resources {
					cancels[i](gaveUp)
				}
				for _, h := range holds[j] {
					if err := h.Release(ctx); err != nil {
						t.Errorf("round %d: holder's release: %v", round, err)
					}
				}
			})
		}
		close(start)
		rg.Wait()
		wg.Wait()
		for i, res := range results {
			if res.h != nil {
				granted++
				t.Logf("round %d: waiter %d was granted %s after its ctx ended", round, i, res.h.describe())
				if err := res.h.Release(ctx); err != nil {
					t.Fatalf("round %d: releasing waiter %d's hold: %v", round, i, err)
				}
				continue
			}
			if !errors.Is(res.err, gaveUp) {
				t.Errorf("round %d: waiter %d: %v; want ctx's cause %q", round, i, res.err, gaveUp)
			}
		}
		// The waiters' withdrawals run in the background: every resource
		// is whole again once they are through.
		freeCtx, freeCancel := context.WithTimeout(ctx, 10*time.Second)
		var fg sync.WaitGroup
		for _, n := range names {
			fg.Go(func() {
				var hs []*Hold
				for _, r := range k.whole(n) {
					h, err := holder.Claim(freeCtx, r, true)
					if err != nil {
						t.Errorf("round %d: %s %s never became whole again: %v", round, k.name, n, err)
						break
					}
					hs = append(hs, h)
				}
				for _, h := range hs {
					if err := h.Release(ctx); err != nil {
						t.Errorf("round %d: release after the check: %v", round, err)
					}
				}
			})
		}
		fg.Wait()
		freeCancel()
		if t.Failed() {
			t.FailNow()
		}
	}
	if granted > 0 {
		t.Errorf("%d of %d waiters were granted a hold although their ctx had ended before the release",
			granted, rounds*waiters)
	}
}
