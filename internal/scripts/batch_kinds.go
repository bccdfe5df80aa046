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

// semAcquireFlight sends one flight of semaphore acquire attempts: alone,
// the single script; together, semaphore_acquire_batch.lua.
func (e Env) semAcquireFlight(ctx context.Context, as []kindCall) []attemptResult {
	out := make([]attemptResult, len(as))
	if len(as) == 1 {
		out[0].g, out[0].err = e.acquire(ctx, as[0].r, as[0].hid, as[0].wait)
		return out
	}
	keys := make([]string, 1, 1+3*len(as))
	args := make([]string, 0, 3*len(as))
	keys[0] = e.K.Lease(SessionOf(as[0].hid))
	for _, a := range as {
		keys = append(keys, e.semKeys(a.r.Name)...)
		args = append(args, a.hid, strconv.FormatInt(a.r.N, 10), strconv.FormatInt(a.r.Limit, 10))
	}
	res, werr := e.execWait(ctx, semAcquireBatch, keys, args)
	return batchGrants(res, werr, len(as), func(i int) string { return as[i].r.Name })
}

// semReleaseFlight sends one flight of semaphore releases: alone, the
// single script; together, semaphore_release_batch.lua.
func (e Env) semReleaseFlight(ctx context.Context, rs []kindCall) []releaseResult {
	out := make([]releaseResult, len(rs))
	if len(rs) == 1 {
		out[0].r, out[0].err = e.release(ctx, rs[0].r, rs[0].hid, false)
		return out
	}
	keys := make([]string, 0, 3*len(rs))
	args := make([]string, 0, 2*len(rs))
	for _, r := range rs {
		keys = append(keys, e.semKeys(r.r.Name)...)
		args = append(args, r.hid, strconv.FormatInt(r.r.N, 10))
	}
	res, werr := e.execWait(ctx, semReleaseBatch, keys, args)
	return batchReleased(res, werr, len(rs))
}

// poolAcquireFlight sends one flight of pool acquire attempts: alone, the
// single script; together, pool_acquire_batch.lua.
func (e Env) poolAcquireFlight(ctx context.Context, as []kindCall) []attemptResult {
	out := make([]attemptResult, len(as))
	if len(as) == 1 {
		out[0].g, out[0].err = e.acquire(ctx, as[0].r, as[0].hid, as[0].wait)
		return out
	}
	keys := make([]string, 1, 1+len(as))
	args := make([]string, 0, 3*len(as))
	keys[0] = e.K.Lease(SessionOf(as[0].hid))
	for _, a := range as {
		keys = append(keys, e.K.Queue(Pool, a.r.Name))
		args = append(args, a.hid, e.K.PoolBase(a.r.Name), a.r.Key)
	}
	res, werr := e.execWait(ctx, poolAcquireBatch, keys, args)
	return batchGrants(res, werr, len(as), func(i int) string { return as[i].r.Name })
}

// poolReleaseFlight sends one flight of pool releases: alone, the single
// script; together, pool_release_batch.lua.
func (e Env) poolReleaseFlight(ctx context.Context, rs []kindCall) []releaseResult {
	out := make([]releaseResult, len(rs))
	if len(rs) == 1 {
		out[0].r, out[0].err = e.release(ctx, rs[0].r, rs[0].hid, false)
		return out
	}
	keys := make([]string, len(rs))
	args := make([]string, 0, 2*len(rs))
	for i, r := range rs {
		keys[i] = e.K.Queue(Pool, r.r.Name)
		args = append(args, r.hid, e.K.PoolBase(r.r.Name))
	}
	res, werr := e.execWait(ctx, poolReleaseBatch, keys, args)
	return batchReleased(res, werr, len(rs))
}
