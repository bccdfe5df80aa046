package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/session"
)

// checker records every hold of the story and computes, at the end, whether
// any two holders of one resource overlapped, whether a semaphore ever had
// more permits in use than its limit, and whether fencing tokens only grew.
//
// A hold's critical section is [begin, last]: begin is taken after the grant
// returned; last is the latest instant at which the holder checked that its
// hold was still valid. The holder reads the clock *before* that check, so
// every instant in [begin, last] is one at which the hold was provably
// valid; the library promises that no two such intervals of one resource
// overlap (a context is canceled before anyone else can be granted).
//
// The check is the hold's context and its session's local deadline: the
// context is canceled by a timer goroutine at that deadline, and under CPU
// starvation that goroutine can run late; comparing the clock with
// Session.Deadline does not depend on it.
type checker struct {
	mu      sync.Mutex
	recs    []*rec
	grants  map[string]int // resource -> grants so far (for "term N")
	changed chan struct{}  // closed and replaced on every change
}

// rec is one hold as the holder saw it.
type rec struct {
	c      *checker
	s      *session.Session
	kind   string // "election", "semaphore", "pool"
	res    string // resource: election or semaphore name, "pool/member"
	holder string
	token  int64
	weight int64 // semaphore permits
	limit  int64 // semaphore limit
	n      int   // 1-based grant number of res

	begin, last time.Time
	ended       bool
	cause       error // nil: released
}

func newChecker() *checker {
	return &checker{grants: map[string]int{}, changed: make(chan struct{})}
}

func (c *checker) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// begin records a grant of session s that just returned.
func (c *checker) begin(s *session.Session, kind, res, holder string, token, weight, limit int64) *rec {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.grants[res]++
	r := &rec{c: c, s: s, kind: kind, res: res, holder: holder, token: token, weight: weight, limit: limit,
		n: c.grants[res], begin: now, last: now}
	c.recs = append(c.recs, r)
	c.notify()
	return r
}

// valid reports whether h is still held, and if so extends the critical
// section to an instant read before the check.
func (r *rec) valid(h *session.Hold) bool {
	now := time.Now()
	if h.Err() != nil || !now.Before(r.s.Deadline()) {
		return false
	}
	r.c.mu.Lock()
	r.last = now
	r.c.mu.Unlock()
	return true
}

// hold keeps the critical section open, checking the hold every 10ms, until
// d has passed (d <= 0: until ctx ends) or the hold ends. It reports whether
// the hold ended first (lost); then h.Err() tells why.
func (r *rec) hold(ctx context.Context, h *session.Hold, d time.Duration) (lost bool) {
	defer func() {
		if lost {
			// The deadline can pass a moment before the session's timer
			// cancels the context: wait for it, so that h.Err() is set.
			t := time.NewTimer(time.Second)
			defer t.Stop()
			select {
			case <-h.Done():
			case <-t.C:
			}
		}
	}()
	var until <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		until = t.C
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if !r.valid(h) {
			return true
		}
		select {
		case <-h.Done():
		case <-tick.C:
		case <-until:
			return !r.valid(h)
		case <-ctx.Done():
			return !r.valid(h)
		}
	}
}

// lostCause is why lost hold h ended.
func lostCause(h *session.Hold) error {
	if err := h.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: its local deadline passed", session.ErrLeaseLost)
}

// end records the end of the hold: cause nil for a release.
func (r *rec) end(cause error) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.ended, r.cause = true, cause
	r.c.notify()
}

// waitFor blocks until cond (called with the lock held) is true, ctx ends or
// d passes.
func (c *checker) waitFor(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		c.mu.Lock()
		ok, ch := cond(), c.changed
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-t.C:
			return errors.New("demo: stuck waiting for " + what)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// open returns the holds of res not ended. c.mu held.
func (c *checker) open(res string) []*rec {
	var out []*rec
	for _, r := range c.recs {
		if r.res == res && !r.ended {
			out = append(out, r)
		}
	}
	return out
}

// inUse returns the permits of semaphore res held now. It locks c.mu.
func (c *checker) inUse(res string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := int64(0)
	for _, r := range c.open(res) {
		n += r.weight
	}
	return n
}

// counts returns how many grants and losses were recorded since t.
func (c *checker) since(t time.Time) (grants, losses int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.recs {
		if !r.begin.Before(t) {
			grants++
		}
		if r.ended && r.cause != nil && !r.last.Before(t) {
			losses++
		}
	}
	return grants, losses
}

// Summary is what the checker found.
type Summary struct {
	Granted     int   // holds granted
	HandOffs    int   // grants of a mutex, leadership or member whose previous holder was another node
	Lost        int   // holds that ended without a release
	LeaseLost   int   //   of which: the lease could not be renewed in time
	TakenAway   int   //   of which: taken away (pool member removed)
	Overlaps    int   // critical sections of one exclusive resource overlapping, plus semaphore instants above the limit
	MaxInUse    int64 // highest semaphore use seen
	Limit       int64 // that semaphore's limit
	TokenErrors int   // exclusive grants whose token was not above the previous one's; repeated semaphore tokens
	Open        int   // holds not ended (0 at the end of the story)
}

func (c *checker) summary() Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s Summary
	byRes := map[string][]*rec{}
	for _, r := range c.recs {
		s.Granted++
		byRes[r.res] = append(byRes[r.res], r)
		switch {
		case !r.ended:
			s.Open++
		case errors.Is(r.cause, session.ErrLeaseLost):
			s.Lost++
			s.LeaseLost++
		case r.cause != nil:
			s.Lost++
			s.TakenAway++
		}
	}
	for _, rs := range byRes {
		slices.SortFunc(rs, func(a, b *rec) int { return a.begin.Compare(b.begin) })
		if rs[0].kind == "semaphore" {
			// Concurrent holders record their grants in no particular
			// order: tokens must only be distinct.
			seen := map[int64]bool{}
			for _, r := range rs {
				if seen[r.token] {
					s.TokenErrors++
				}
				seen[r.token] = true
			}
			use, over := semaphoreUse(rs)
			s.Overlaps += over
			if use > s.MaxInUse {
				s.MaxInUse, s.Limit = use, rs[0].limit
			}
			continue
		}
		for i := 1; i < len(rs); i++ {
			if rs[i].token <= rs[i-1].token {
				s.TokenErrors++
			}
			if rs[i].holder != rs[i-1].holder {
				s.HandOffs++
			}
			for j := range i {
				if rs[i].begin.Before(rs[j].last) {
					s.Overlaps++
				}
			}
		}
	}
	return s
}

// semaphoreUse sweeps the critical sections of one semaphore and returns the
// highest use and the number of times use rose above the limit.
func semaphoreUse(rs []*rec) (maxUse int64, over int) {
	type ev struct {
		at time.Time
		d  int64
	}
	evs := make([]ev, 0, 2*len(rs))
	for _, r := range rs {
		evs = append(evs, ev{r.begin, r.weight}, ev{r.last, -r.weight})
	}
	// At equal instants, ends first: [a, b] and [b, c] do not overlap.
	slices.SortFunc(evs, func(a, b ev) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.d, b.d))
	})
	use := int64(0)
	for _, e := range evs {
		use += e.d
		maxUse = max(maxUse, use)
		if e.d > 0 && use > rs[0].limit {
			over++
		}
	}
	return maxUse, over
}
