package scripts_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestListingPatternOnRedis: a listing's pattern, given to SCAN on a real
// Redis, finds the keys of a namespace with glob characters and bytes that
// are not UTF-8, and none of a namespace that differs in such a byte.
func TestListingPatternOnRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := testutil.Client(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mine, other := scripts.NewKeys("n\xff*s?[x]\\\xc3"), scripts.NewKeys("n\xfe*s?[x]\\\xc3")
	for _, k := range []string{mine.Mutex("a"), mine.Mutex("b\xff"), other.Mutex("a")} {
		if err := c.Do(ctx, c.B().Set().Key(k).Value("v").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for what, l := range map[string]scripts.Listing{"mutexes": mine.Listing(scripts.Mutex), "all": mine.All()} {
		var found []string
		for cursor := uint64(0); ; {
			e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(l.Pattern()).Count(100).Build()).AsScanEntry()
			if err != nil {
				t.Fatal(err)
			}
			found = append(found, e.Elements...)
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
		slices.Sort(found)
		if want := []string{mine.Mutex("a"), mine.Mutex("b\xff")}; !slices.Equal(found, want) {
			t.Errorf("%s: SCAN MATCH %q found %q; want %q", what, l.Pattern(), found, want)
		}
	}
}
