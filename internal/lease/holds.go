package lease

import (
	"context"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/scripts"
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

// due returns the holds whose keys must be kept alive by a heartbeat sent
// now: those whose keys may expire before before.
func (t *holdTable) due(before time.Time) []*Hold {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*Hold
	for _, h := range t.m {
		if h.keyed && h.keysUntil().Before(before) {
			out = append(out, h)
		}
	}
	return out
}

// kept records, from the loop, what a heartbeat did with h's keys (states,
// in h.keys() order): all kept, they now live until at least until; else
// nothing changes, and h ends at its endsAt unless a later heartbeat keeps
// them.
// A key missing on the node that ran the heartbeat may have been deleted,
// or may be on the other node of a slot migration: either way h is not
// sure of it any more, but not sure that it is gone either.
func (h *Hold) kept(states []scripts.KeyState, until time.Time) {
	for _, st := range states {
		if st != scripts.KeyKept {
			return
		}
	}
	if until.After(h.keysUntil()) {
		h.setKeysUntil(until)
	}
}

// expireKeys ends, with ErrLost, the holds whose keys may expire by now
// plus their lock delay (Hold.endsAt), and returns them and the earliest
// time at which another must end (zero when none has keys).
func (t *holdTable) expireKeys(now time.Time) ([]*Hold, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ended []*Hold
	var next time.Time
	for id, h := range t.m {
		if !h.keyed {
			continue
		}
		u := h.endsAt()
		if !u.After(now) {
			delete(t.m, id)
			h.cancel(keysLost(h))
			ended = append(ended, h)
			continue
		}
		if next.IsZero() || u.Before(next) {
			next = u
		}
	}
	return ended, next
}

// keysRecreated records that a reclaim recreated the keys of holds to
// live until at least until, whatever was known of them before.
func keysRecreated(holds []*Hold, until time.Time) {
	for _, h := range holds {
		if h.keyed {
			h.setKeysUntil(until)
		}
	}
}
