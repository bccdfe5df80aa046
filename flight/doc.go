// Package flight is a distributed singleflight: one computation of a key at
// a time across every process sharing a session namespace, with its result
// cached in Redis for the others (the "dogpile lock").
//
//	g := flight.New(s, "reports", flight.Options{TTL: time.Minute}) // values fresh for a minute
//	v, err := g.Do(ctx, "daily:2026-11-25", func(ctx context.Context) ([]byte, error) {
//		return render(ctx) // ctx ends if this process loses the right to compute
//	})
//	...
//	err = g.Forget(ctx, "daily:2026-11-25") // drop the cached value everywhere
//
// Do reads the key's cached outcome in one round trip and returns a fresh
// one at once. On a miss, it takes the key's mutex (package mutex, name
// "flight:<group>:<key>"): the first caller computes, under the hold, and
// stores its outcome with a fenced script before releasing; the others
// queue FIFO in Redis, wait without sending requests (the release hands the
// mutex to the next waiter and notifies it), find the stored outcome and
// release at once. Within one process, concurrent calls of a Group for one
// key share one call (golang.org/x/sync/singleflight), so a process queues
// at most once per key. With Options.ServeStale, an expired value is
// returned at once while one caller, the one whose TryLock wins, recomputes
// it.
//
// # Guarantees and limits
//
// At most one caller computes a key at a time, with the session package's
// guarantees: its fn's ctx is canceled before the mutex can be granted to
// anyone else (when its lease can no longer be proven), so another caller
// starts computing only once the first one's right has ended. An outcome is
// stored only by the live holder of the key's mutex, with a token no lower
// than any stored before: a process paused past its lease (GC, SIGSTOP)
// cannot replace the value of the caller that took over; its Do fails with
// an error matching ErrDiscarded and session.ErrLost (session.ErrLeaseLost
// when its lease was lost). fn may still have run twice in that case, or
// after its process died: a computation is not a transaction. Make fn's side
// effects idempotent, or fence them with the hold's token (which Do does not
// expose: fn is for computing values).
//
// A caller waiting for a computation gets the value or the error (wrapped in
// ErrFailed) its computer stored. If the computer stored nothing (its process
// died, its lease was lost, its ctx ended, its value was over MaxValue), the
// next waiter computes itself: after a crash, within the dead session's TTL.
// An error is not cached unless Options.ErrorTTL says so: the callers that
// waited for the failed computation get it once, and the next Do computes
// again.
//
// The hand-off through waiters is serial: each waiting process, in turn,
// is handed the mutex, reads the value and releases (two round trips and a
// wake-up), so the last of N waiting processes gets the value about 2N round
// trips after it was stored (docs/flight.md has the measured figures).
//
// Values are byte slices of at most Options.MaxValue (1 MiB by default),
// stored in one Redis hash {ns}:f:<group>:<key> in the namespace's slot,
// kept for max(TTL, 10s) (twice that with ServeStale) after the last store,
// then deleted by Redis. Group names may not contain ':', and
// "flight:<group>:<key>" must fit session.MaxNameLen. A mutex of that name
// taken with package mutex would block the group's computations.
package flight
