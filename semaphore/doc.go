// Package semaphore provides a weighted counting semaphore shared by every
// session of a namespace: at most Limit permits are held at once, across all
// processes.
//
//	sem := semaphore.New(s, "partner-api", 4) // at most 4 permits held at once, in all processes
//	h, err := sem.Acquire(ctx, 1)             // blocks, FIFO, until a permit is free
//	if err != nil {
//		return err
//	}
//	defer h.Release(context.Background())
//	return callPartner(h.Context())
//
// Acquire waits FIFO, like golang.org/x/sync/semaphore but across processes:
// a large request at the head of the queue is not starved by smaller ones
// behind it. A release hands permits directly to the waiters that now fit, in
// the same script call, and notifies them.
//
// # Guarantees and limits
//
// Permits are held by sessions: a holder that crashes gives its permits back
// when its lease expires (within the TTL), with no operator action and no
// Release — the classic leak of TTL-less Redis semaphores cannot happen. Each
// hold's context is canceled before its permits can be granted to anyone else
// (see package session for the clock assumptions). Every grant carries a
// fencing token, strictly increasing per semaphore.
//
// Reset is an operator override: every permit is taken away and the queue
// served at once, and the old holders learn of it within one heartbeat
// interval (at once if their notification connection is up), their holds
// ending with an error matching session.ErrLost. Only fencing tokens
// protect against an old holder in that window.
//
// The limit lives in Redis. The first user stores it; a client passing a
// different limit gets ErrLimitMismatch, so two deployments that disagree
// notice instead of silently using two limits. SetLimit changes it on
// purpose (as does `leasehold sem-limit NAME N`): an operator's limit
// overrides every client's until ClearLimit, and stays in Redis while the
// semaphore is idle. Shrinking never revokes current holders, new grants
// wait until use drops below the new limit. Waiters queued before a SetLimit
// keep their place; one asking for more than the new limit could never be
// served, so its Acquire fails with ErrLimitMismatch instead of blocking the
// queue.
//
// # Changing the limit in a rolling deploy
//
// Old pods pass the old limit to New, new pods the new one; without an
// operator's limit, whichever stored its limit first makes the others fail
// with ErrLimitMismatch. So:
//
//  1. Before the rollout, set the new limit: `leasehold sem-limit NAME 6`
//     (or SetLimit). From then on old and new pods both use 6 and neither
//     fails; holders keep what they hold.
//  2. Roll out the pods that pass 6 to New.
//  3. Optionally `leasehold sem-limit --clear NAME`, so that a later
//     disagreement between deployments is reported again. Leaving the
//     operator's limit in place is also fine: it is then the limit, whatever
//     the pods pass.
//
// Rolling back is the same with the old limit.
//
// Permits whose holder's lease was lost (not released) stay in use for that
// session's LockDelay, as every kind's resource does; a release and Reset
// start no delay.
package semaphore
