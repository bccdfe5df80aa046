// Package pool assigns named resources (shards, GPU slots, API accounts) to
// workers: a pool is a set of member keys, and a hold claims one of them.
//
//	shards := pool.New(s, "shards")
//	if err := shards.Add(ctx, "s0", "s1", "s2"); err != nil { // membership stays in Redis
//		return err
//	}
//	h, err := shards.Acquire(ctx) // any free member; blocks, FIFO, while all are held
//	if err != nil {
//		return err
//	}
//	defer h.Release(context.Background())
//	return serve(h.Context(), h.Resource()) // h.Resource() is the member, e.g. "s1"
//
// Acquire claims any free member, the least recently released first (so use
// spreads over the members), and waits FIFO when all are taken; AcquireKey
// claims one named member. A release hands the member directly to the first
// waiter that wants it, in the same script call, and notifies it.
//
// # Guarantees and limits
//
// No member is ever held by two holds at once: a hold's context is canceled
// before its member can be granted to anyone else (see package session for
// the clock assumptions). Members of a crashed holder come back when its
// lease expires. Removing a held member, or Reset (an operator's override
// that frees every held member), ends that hold with an error matching
// session.ErrLost: at once when its session's notification connection is up,
// else within one heartbeat interval — in that window only the fencing token
// (strictly increasing per member) protects against the old holder.
// Acquire and Release cost O(log members + holding sessions + queued
// requests) on the server, not O(members), however many members one session
// holds.
// A member whose holder's lease was lost (not released) stays held for
// that session's LockDelay, as every kind's resource does; a release,
// Remove and Reset start no delay.
package pool
