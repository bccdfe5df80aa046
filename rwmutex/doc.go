// Package rwmutex provides a distributed read-write mutex held by a
// session.Session: many readers, or one writer.
//
//	rw := rwmutex.New(s, "catalog")
//	r, err := rw.RLock(ctx) // shared with other readers, in any session
//	if err != nil {
//		return err
//	}
//	defer r.Release(context.Background())
//	return serve(r.Context(), r.Token()) // stop when r.Context() ends
//
// Readers and writers wait in one FIFO queue in Redis. A release hands the
// mutex over in the same script call: to the next writer, or to every reader
// at the head of the queue up to the next writer, all in that one call, and
// notifies each of them, so waiting sends no requests. A reader that arrives
// while anyone waits queues behind them: a queued writer is never overtaken
// by later readers, so writers do not starve.
//
// Every grant, read or write, carries a fencing token strictly greater than
// that of every earlier grant of the name, also across Redis restarts and
// across the expiry of an idle mutex's keys. Readers' tokens therefore
// differ from each other, and that orders readers against writers only:
// two readers holding at once fence each other too, so a reader that uses a
// token-fenced store (package fence) with GetFenced or Set makes an earlier
// reader's later calls fail with fence.ErrStale although it still holds.
// Readers should read with fence's plain Get and leave fenced writes to
// writers.
//
// # Guarantees and limits
//
// A hold's context is canceled before a conflicting hold can be granted to
// anyone else (for a read hold: a write hold; for a write hold: any hold),
// provided the client's and the server's clocks run at rates within 1% of
// each other and Redis does not lose acknowledged writes (see the session
// package). The context can be canceled at any time: when the lease cannot
// be renewed in time (Redis down, slow, partitioned), or when an operator
// calls Reset. Work done under the hold must stop when it is, and anything
// it writes to should check the fencing token, because a process paused
// after checking its context (GC, SIGSTOP) can still act late. A session's
// LockDelay applies as for a mutex: a lost writer keeps everyone out, a lost
// reader keeps writers out, for that long beyond the lease's expiry.
//
// There is no upgrade from read to write, and no reentrancy: every call is a
// new hold. An upgrade cannot be offered safely: two readers that both ask
// to upgrade each wait for the other to stop reading, and neither will, a
// deadlock no queue order resolves. Release the read hold and Lock instead
// (and re-check what was read: another writer may have come between). For
// the same reason, a goroutine that calls Lock while its own session still
// holds a read hold of the same name waits forever (until its ctx ends).
//
// Reset is an operator override: the next waiters are granted at once, and
// the old holders learn of it within one heartbeat interval (at once if
// their notification connection is up). Only fencing tokens protect against
// them in that window.
//
// A reader's or writer's hold checks every reader when a writer is to be
// granted, so the cost of a grant grows with the number of readers holding
// at once (one key lookup each): fine for tens or hundreds, not for many
// thousands.
package rwmutex
