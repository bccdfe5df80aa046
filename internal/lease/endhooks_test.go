package lease

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/scripts"
)

// TestEndHooks: a hook added before the end runs once, at the end, however
// many times and from however many goroutines the hold is ended; one added
// after runs at once. The hold's context is canceled before the hooks run,
// so they see its cause.
func TestEndHooks(t *testing.T) {
	h, _ := (&Session{}).newHold(scripts.Resource{Kind: scripts.Mutex, Name: "m"}, "s.1", "m", 1)
	var mu sync.Mutex
	var got []string
	record := func(name string) func() {
		return func() {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, name+":"+context.Cause(h.ctx).Error())
		}
	}
	h.ended.add(record("before"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { h.cancel(ErrReleased) })
	}
	wg.Wait()
	h.ended.add(record("after"))
	h.cancel(errors.New("again"))
	want := []string{"before:" + ErrReleased.Error(), "after:" + ErrReleased.Error()}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("hooks ran %q, want %q", got, want)
	}
}
