package schedule

import (
	"testing"
	"time"
)

// TestKeptInterval: a record's keep counts the interval to the next slot,
// and five years (maxEvery) where robfig's search finds no next slot: from
// Feb 29 2096 the next Feb 29 is in 2104 (2100 is no leap year), past its
// five-year horizon, and Next's zero time made the interval negative.
func TestKeptInterval(t *testing.T) {
	sl, err := parse("0 0 29 2 *", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	leap := time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)
	if got, want := sl.keptInterval(leap), 4*365*24*time.Hour+24*time.Hour; got != want {
		t.Errorf("keptInterval(%v) = %v; want %v, to Feb 29 2032", leap, got, want)
	}
	last := time.Date(2096, 2, 29, 0, 0, 0, 0, time.UTC)
	if !sl.next(last).IsZero() {
		t.Fatalf("next(%v) = %v; the test needs robfig to find none", last, sl.next(last))
	}
	if got := sl.keptInterval(last); got != maxEvery {
		t.Errorf("keptInterval(%v) = %v; want maxEvery (%v)", last, got, maxEvery)
	}
}
