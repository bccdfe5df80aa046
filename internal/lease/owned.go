package lease

import (
	"context"
	"sync"
)

// owned is the goroutines a session (or a Group) owns for leasehold's own
// packages (Session.Go): started until close, and waited for by it.
type owned struct {
	mu     sync.Mutex     // guards closed and the wg.Go calls against close's Wait
	closed bool           // guarded by mu: set by close, no more Go
	wg     sync.WaitGroup // the goroutines started by Go
}

// Go runs f(ctx) in a goroutine of its own and reports true, unless close
// has run or ctx has ended (then it runs nothing and reports false).
func (o *owned) Go(ctx context.Context, f func(ctx context.Context)) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || ctx.Err() != nil {
		return false
	}
	o.wg.Go(func() { f(ctx) })
	return true
}

// close refuses every later Go and waits for the goroutines started.
func (o *owned) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.wg.Wait()
}
