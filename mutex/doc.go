// Package mutex provides a distributed mutual-exclusion lock held by a
// session.Session.
//
//	h, err := mutex.New(s, "reindex").Lock(ctx) // blocks, FIFO, until granted
//	if err != nil {
//		return err
//	}
//	defer h.Release(context.Background())
//	return reindex(h.Context(), h.Token()) // stop when h.Context() ends; fence writes with the token
//
// Lock waits FIFO: waiters queue in Redis, and a Release hands the mutex
// directly to the first live waiter in the same script call and notifies it,
// so waiting sends no requests and a hand-off costs no extra round trip.
// Every grant carries a fencing token, strictly increasing per mutex.
//
// # Guarantees and limits
//
// A hold's context is canceled before the mutex can be granted to anyone
// else, provided the client's and the server's clocks run at rates within 1%
// of each other and Redis does not lose acknowledged writes (see the
// session package). The context can be canceled at any time: when the lease
// cannot be renewed in time (Redis down, slow, partitioned), or when an
// operator calls Reset. Work done under the lock must stop when it is, and
// anything the work writes to should check the fencing token, because a
// process paused after checking its context (GC, SIGSTOP) can still act late.
//
// Reset is an operator override: the next waiter is granted at once, and the
// old holder learns of it within one heartbeat interval (at once if its
// notification connection is up). Only fencing tokens protect against the
// old holder in that window.
package mutex
