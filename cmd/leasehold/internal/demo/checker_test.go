package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.LeakOptions...) }

// TestCheckerFindsOverlaps: the summary is computed, not assumed: overlapping
// critical sections, a semaphore above its limit and tokens out of order are
// all counted.
func TestCheckerFindsOverlaps(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	c := newChecker()
	add := func(kind, res, holder string, token, weight, limit int64, begin, last int, cause error) {
		c.recs = append(c.recs, &rec{c: c, kind: kind, res: res, holder: holder, token: token, weight: weight,
			limit: limit, begin: at(begin), last: at(last), ended: true, cause: cause})
	}
	// Exclusive: a hands to b cleanly, then c starts before b's last moment.
	add("election", "e", "a", 1, 1, 0, 0, 10, session.ErrLeaseLost)
	add("election", "e", "b", 2, 1, 0, 10, 20, nil)
	add("election", "e", "c", 3, 1, 0, 15, 30, nil)
	// Tokens going backwards on a pool member, no overlap.
	add("pool", "p/k", "a", 5, 1, 0, 0, 10, session.ErrLost)
	add("pool", "p/k", "b", 4, 1, 0, 11, 12, nil)
	// Semaphore limit 2: three at once between 20 and 25.
	add("semaphore", "s", "a", 1, 1, 2, 0, 30, nil)
	add("semaphore", "s", "b", 2, 1, 2, 10, 25, nil)
	add("semaphore", "s", "c", 3, 1, 2, 20, 40, nil)
	add("semaphore", "s", "d", 3, 1, 2, 41, 50, nil) // repeated token
	s := c.summary()
	want := Summary{Granted: 9, HandOffs: 3, Lost: 2, LeaseLost: 1, TakenAway: 1, Overlaps: 2, MaxInUse: 3, Limit: 2, TokenErrors: 2}
	if s != want {
		t.Fatalf("summary %+v\nwant    %+v", s, want)
	}

	clean := newChecker()
	clean.recs = []*rec{
		{c: clean, kind: "semaphore", res: "s", token: 1, weight: 2, limit: 2, begin: at(0), last: at(10), ended: true},
		{c: clean, kind: "semaphore", res: "s", token: 2, weight: 2, limit: 2, begin: at(10), last: at(20), ended: true},
	}
	if s := clean.summary(); s.Overlaps != 0 || s.MaxInUse != 2 || s.TokenErrors != 0 {
		t.Fatalf("back-to-back holds: %+v", s)
	}
}

// TestRun plays the whole story on the embedded Redis.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	sum, err := Run(context.Background(), Config{Out: &out})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Overlaps != 0 || sum.TokenErrors != 0 || sum.Open != 0 || sum.MaxInUse != semLimit || sum.TakenAway != 1 || sum.LeaseLost < 5 {
		t.Fatalf("summary %+v", sum)
	}
	if !strings.Contains(out.String(), "overlaps: 0 ") {
		t.Fatal("no overlaps line")
	}
}
