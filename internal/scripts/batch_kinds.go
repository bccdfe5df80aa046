package scripts

import (
	"context"
	"strconv"
)

// Batching of the other kinds' calls: as for the mutex (see batch.go), a
// session's overlapping semaphore acquires, and apart its releases (and
// its pool acquires, and its pool releases), go to Redis as one call of a
// batch script that runs the single script's fast path for each
// (semaphore_fast.lua, pool_core.lua: the same Lua text in both), with the
// same policy. A call the fast path does not cover is answered slow and
// sent alone with the single script.

// kindCall is one acquire attempt or release of a resource of a kind other
// than the mutex.
type kindCall struct {
	r    Resource
	hid  string
	wait bool // acquire: queue when busy
}

// batchable reports whether calls on r go through a batcher of e: the
// kinds that have batch scripts, in an Env that Prepared made.
func (e Env) batchable(r Resource) bool {
	return e.batch != nil && (r.Kind == Semaphore || r.Kind == Pool)
}

// kindBatchers returns the acquire and release batchers of kind k
// (batchable).
func (b *batches) kindBatchers(k Kind) (acquire *batcher[kindCall, attemptResult], release *batcher[kindCall, releaseResult]) {
	if k == Pool {
		return b.poolAcquire, b.poolRelease
	}
	return b.semAcquire, b.semRelease
}

// kindAcquireFlight sends one flight of acquire attempts of the kind of
// batch: alone, the single script; together, batch with KEYS[1] the
// caller's lease and the keys and arguments add gives each attempt.
func (e Env) kindAcquireFlight(ctx context.Context, as []kindCall, batch *Script,
	add func(keys, args []string, a kindCall) ([]string, []string)) []attemptResult {
	if len(as) == 1 {
		g, err := e.acquire(ctx, as[0].r, as[0].hid, as[0].wait)
		return []attemptResult{{g: g, err: err}}
	}
	keys, args := []string{e.K.Lease(SessionOf(as[0].hid))}, []string(nil)
	for _, a := range as {
		keys, args = add(keys, args, a)
	}
	res, werr := e.execWait(ctx, batch, keys, args)
	return batchGrants(res, werr, len(as), func(i int) string { return as[i].r.Name })
}

// kindReleaseFlight is kindAcquireFlight for releases (no lease key).
func (e Env) kindReleaseFlight(ctx context.Context, rs []kindCall, batch *Script,
	add func(keys, args []string, r kindCall) ([]string, []string)) []releaseResult {
	if len(rs) == 1 {
		n, err := e.release(ctx, rs[0].r, rs[0].hid, false)
		return []releaseResult{{r: n, err: err}}
	}
	var keys, args []string
	for _, r := range rs {
		keys, args = add(keys, args, r)
	}
	res, werr := e.execWait(ctx, batch, keys, args)
	return batchReleased(res, werr, len(rs))
}

// The flights of the semaphore (semaphore_*_batch.lua) and the pool
// (pool_*_batch.lua): what each attempt or release adds to the batch.
func (e Env) semAcquireFlight(ctx context.Context, as []kindCall) []attemptResult {
	return e.kindAcquireFlight(ctx, as, semAcquireBatch, func(keys, args []string, a kindCall) ([]string, []string) {
		return append(keys, e.semKeys(a.r.Name)...),
			append(args, a.hid, strconv.FormatInt(a.r.N, 10), strconv.FormatInt(a.r.Limit, 10))
	})
}

func (e Env) semReleaseFlight(ctx context.Context, rs []kindCall) []releaseResult {
	return e.kindReleaseFlight(ctx, rs, semReleaseBatch, func(keys, args []string, r kindCall) ([]string, []string) {
		return append(keys, e.semKeys(r.r.Name)...), append(args, r.hid, strconv.FormatInt(r.r.N, 10))
	})
}

func (e Env) poolAcquireFlight(ctx context.Context, as []kindCall) []attemptResult {
	return e.kindAcquireFlight(ctx, as, poolAcquireBatch, func(keys, args []string, a kindCall) ([]string, []string) {
		return append(keys, e.K.Queue(Pool, a.r.Name)), append(args, a.hid, e.K.PoolBase(a.r.Name), a.r.Key)
	})
}

func (e Env) poolReleaseFlight(ctx context.Context, rs []kindCall) []releaseResult {
	return e.kindReleaseFlight(ctx, rs, poolReleaseBatch, func(keys, args []string, r kindCall) ([]string, []string) {
		return append(keys, e.K.Queue(Pool, r.r.Name)), append(args, r.hid, e.K.PoolBase(r.r.Name))
	})
}
