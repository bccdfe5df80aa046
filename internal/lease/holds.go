package lease

import (
	"context"
	"sync"
	"time"
)

// holdTable is the session's table of live holds. It is guarded by its own
// mutex rather than owned by the loop goroutine so that a grant and a
// release never wake the loop (two goroutine hand-offs per lock+release on
// the hot path); the loop reads it to revoke, reclaim and clean up.
type holdTable struct {
	mu    sync.Mutex           // guards the fields below
	m     map[string]*Hold     // guarded by mu: the live holds by hold id
	early map[string]time.Time // guarded by mu: revoked before registered (a grant racing a Reset)
	ended error                // guarded by mu: why the session ended (endAll): no more holds
}

// add records h. It reports false when the session has ended; h is then
// canceled with the session's cause. A hold revoked before it was
// registered ends at once.
func (t *holdTable) add(h *Hold) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended != nil {
		h.cancel(t.ended)
		return false
	}
	if _, ok := t.early[h.hid]; ok {
		delete(t.early, h.hid)
		h.cancel(takenAway(h))
		return true
	}
	t.m[h.hid] = h
	return true
}

// remove forgets hold id.
func (t *holdTable) remove(id string) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}

// revoke ends hold id with ErrLost (taken away), or remembers the id for a
// grant not registered yet. It returns the hold it ended, if any.
func (t *holdTable) revoke(id string, now time.Time) *Hold {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.m[id]
	if !ok {
		if _, seen := t.early[id]; !seen {
			t.early[id] = now
		}
		return nil
	}
	delete(t.m, id)
	h.cancel(takenAway(h))
	return h
}

// forgetEarly drops remembered early revocations older than ttl.
func (t *holdTable) forgetEarly(now time.Time, ttl time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, at := range t.early {
		if now.Sub(at) > ttl {
			delete(t.early, id)
		}
	}
}

// endAll ends every live hold with cause and refuses new ones: the session
// ended. The holds stay in the table for the loop's cleanup (snapshot).
func (t *holdTable) endAll(cause error) {
	if cause == nil {
		cause = context.Canceled // as context.WithCancelCause does
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = cause
	for _, h := range t.m {
		h.cancel(cause)
	}
}

// snapshot returns the live holds.
func (t *holdTable) snapshot() []*Hold {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Hold, 0, len(t.m))
	for _, h := range t.m {
		out = append(out, h)
	}
	return out
}

// end removes hold id and cancels it with cause, if it is still there.
func (t *holdTable) end(id string, cause func(*Hold) error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h, ok := t.m[id]; ok {
		delete(t.m, id)
		h.cancel(cause(h))
	}
}

// len returns the number of live holds.
func (t *holdTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
