package lease

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// multiClient records the sizes of the DoMulti calls that reach it.
type multiClient struct {
	rueidis.Client
	mu    sync.Mutex
	sizes []int
}

func (c *multiClient) DoMulti(_ context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(cmds))
	c.mu.Unlock()
	return make([]rueidis.RedisResult, len(cmds))
}

func (c *multiClient) got() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.sizes...)
}

// TestBeatBatch: the commands of all participants go as one DoMulti, sent
// as soon as the last arrives; one alone goes after the window; a
// participant leaving sends what waits for it no longer.
func TestBeatBatch(t *testing.T) {
	c := &multiClient{}
	b := newBeatBatch(c, time.Hour) // only a full batch (or a leave) sends
	b.join(3)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { b.Do(context.Background(), rueidis.Completed{}) })
	}
	wg.Wait()
	if got := c.got(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("three participants' commands went as %v, want one DoMulti of 3", got)
	}
	for range 2 {
		wg.Go(func() { b.Do(context.Background(), rueidis.Completed{}) })
	}
	for b.waiting() < 2 {
		time.Sleep(time.Millisecond) // polls the batch's own state
	}
	b.join(-1)
	wg.Wait()
	if got := c.got(); len(got) != 2 || got[1] != 2 {
		t.Fatalf("after a participant left: %v, want a DoMulti of the 2 waiting", got)
	}

	w := newBeatBatch(c, 5*time.Millisecond)
	w.join(2)
	start := time.Now()
	w.Do(context.Background(), rueidis.Completed{})
	if got := c.got(); len(got) != 3 || got[2] != 1 || time.Since(start) < 5*time.Millisecond {
		t.Fatalf("one of two participants: %v after %v, want a DoMulti of 1 after the 5 ms window", got, time.Since(start))
	}
}
