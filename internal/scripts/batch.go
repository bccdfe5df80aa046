package scripts

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/batch"
	"github.com/leasehold/leasehold/internal/conn"
)

var (
	mutexAcquireBatch = newScript(fastOnly("mutex_acquire_batch.lua"), false)
	mutexReleaseBatch = newScript(fastOnly("mutex_release_batch.lua"), false)
)

// fastOnly returns the script of Lua file name, which is all fast path:
// fastpath.lua first, without common.lua's helpers (each a closure Redis
// would create on every call, see join), its includes resolved.
func fastOnly(name string) string { return bare("--@include fastpath.lua\n" + luaFile(name)) }

// Batching: a session's overlapping acquires of one kind (and apart its
// releases) go to Redis as one call of the kind's batch script, which runs
// the single script's fast path for each call (the same Lua text: a
// mutex's fast paths in mutex_fast.lua, semaphore_fast.lua,
// pool_acquire_fast.lua, pool_release_fast.lua).
// A call the fast path does not cover is answered slow (R_SLOW) and sent
// alone with the single script. internal/batch decides which calls fly
// together; this file sends a flight and splits its reply.

// batches are the batchers of one session's Env (see Env.Prepared), indexed
// by kind; nil for a kind without batch scripts.
type batches [RWMutex + 1]*kindBatchers

// kindBatchers are one kind's batchers, of acquires and of releases
// (release nil for a kind whose releases go one call each).
type kindBatchers struct {
	acquire *batch.Batcher[kindCall, attemptResult]
	release *batch.Batcher[kindCall, releaseResult]
}

// kindCall is one acquire attempt or release of a resource.
type kindCall struct {
	r    Resource
	hid  string
	wait bool // acquire: queue when busy
	// first (acquire, with wait): hid is sent for the first time, so no
	// queue holds it yet.
	first bool
}

// queue is the acquire scripts' queue argument for a: "0" not to queue,
// "1" to queue when busy, keeping the place hid may have already (a
// re-check, or a retry of an attempt whose reply was lost), and "2" to
// queue a hold id sent for the first time, for a kind whose scripts take
// it (kindSpec.queueNew): they need not search the queue for it, which
// spares every waiting acquire an LPOS.
func (a kindCall) queue(k *kindSpec) string {
	switch {
	case !a.wait:
		return "0"
	case a.first && k.queueNew:
		return "2"
	}
	return "1"
}

// attemptResult is an attempt's outcome; slow when the batch script's fast
// path did not cover it, and the caller must send the single script.
type attemptResult struct {
	g    Grant
	err  error
	slow bool
}

// releaseResult is a release's outcome; slow as for attemptResult.
type releaseResult struct {
	r    Released
	err  error
	slow bool
}

// newBatches returns the batchers of e. Their flights run on e's client
// without conn.Bound: the callers wait on their own ctx (see
// batch.Batcher).
func newBatches(e Env) *batches {
	f, g := e, e
	f.C, f.batch = conn.Unbound(e.C), nil
	g.batch = nil
	lane := conn.LaneOf(e.C)
	failAcquire := func(err error) attemptResult { return attemptResult{err: err} }
	failRelease := func(err error) releaseResult { return releaseResult{err: err} }
	var bs batches
	for k := range kindSpecs {
		s := &kindSpecs[k]
		if s.acquireFlight == nil {
			continue
		}
		acq := func(e Env) func(context.Context, []kindCall) []attemptResult {
			return func(ctx context.Context, as []kindCall) []attemptResult { return s.acquireFlight(e, ctx, as) }
		}
		rel := func(e Env) func(context.Context, []kindCall) []releaseResult {
			return func(ctx context.Context, rs []kindCall) []releaseResult { return s.releaseFlight(e, ctx, rs) }
		}
		bs[k] = &kindBatchers{acquire: batch.New(acq(f), acq(g), lane, failAcquire)}
		if s.releaseFlight != nil {
			bs[k].release = batch.New(rel(f), rel(g), lane, failRelease)
		}
	}
	return &bs
}

// batchers returns the batchers of r's kind in e; nil when e has none (an
// Env that Prepared did not make, or a kind without batch scripts).
func (e Env) batchers(r Resource) *kindBatchers {
	if e.batch == nil || int(r.Kind) >= len(e.batch) {
		return nil
	}
	return e.batch[r.Kind]
}

// Stop ends the goroutines that e's batchers keep for their next flights;
// the session calls it as it ends. e still works afterwards.
func (e Env) Stop() {
	if e.batch == nil {
		return
	}
	for _, b := range e.batch {
		if b != nil {
			b.acquire.Stop()
			if b.release != nil {
				b.release.Stop()
			}
		}
	}
}

// acquireFlight sends one flight of acquire attempts of a kind with batch scripts:
// alone, the single script as Env.Acquire sends it; together, batchScript with
// KEYS[1] the caller's lease, ARGV[1] head, and the keys and arguments add
// gives each attempt.
func (e Env) acquireFlight(ctx context.Context, as []kindCall, batchScript *Script, head string,
	add func(keys, args []string, a kindCall) ([]string, []string)) []attemptResult {
	if len(as) == 1 {
		g, err := e.acquireCall(ctx, as[0])
		return []attemptResult{{g: g, err: err}}
	}
	keys, args := []string{e.K.Lease(SessionOf(as[0].hid))}, []string(nil)
	if head != "" {
		args = append(args, head)
	}
	for _, a := range as {
		keys, args = add(keys, args, a)
	}
	res, werr := e.execWait(ctx, batchScript, keys, args)
	return batchGrants(res, werr, len(as), func(i int) string { return as[i].r.Name })
}

// releaseFlight is acquireFlight for releases (no lease key).
func (e Env) releaseFlight(ctx context.Context, rs []kindCall, batchScript *Script, head string,
	add func(keys, args []string, r kindCall) ([]string, []string)) []releaseResult {
	if len(rs) == 1 {
		n, err := e.release(ctx, rs[0].r, rs[0].hid, false)
		return []releaseResult{{r: n, err: err}}
	}
	var keys, args []string
	if head != "" {
		args = append(args, head)
	}
	for _, r := range rs {
		keys, args = add(keys, args, r)
	}
	res, werr := e.execWait(ctx, batchScript, keys, args)
	return batchReleased(res, werr, len(rs))
}

// The flights of each kind with batch scripts: what each attempt or
// release adds to the batch script's keys and arguments.

// mutexAcquireFlight: mutex_acquire_batch.lua.
func (e Env) mutexAcquireFlight(ctx context.Context, as []kindCall) []attemptResult {
	return e.acquireFlight(ctx, as, mutexAcquireBatch, e.mutexOpts(), func(keys, args []string, a kindCall) ([]string, []string) {
		return append(keys, e.K.Mutex(a.r.Name)), append(args, a.queue(&kindSpecs[Mutex])+a.hid)
	})
}

// mutexReleaseFlight: mutex_release_batch.lua.
func (e Env) mutexReleaseFlight(ctx context.Context, rs []kindCall) []releaseResult {
	return e.releaseFlight(ctx, rs, mutexReleaseBatch, e.sharded(), func(keys, args []string, r kindCall) ([]string, []string) {
		return append(keys, e.K.Mutex(r.r.Name)), append(args, r.hid)
	})
}

// semAcquireFlight: semaphore_acquire_batch.lua.
func (e Env) semAcquireFlight(ctx context.Context, as []kindCall) []attemptResult {
	return e.acquireFlight(ctx, as, semAcquireBatch, "", func(keys, args []string, a kindCall) ([]string, []string) {
		return append(keys, e.K.Semaphore(a.r.Name), e.K.SemaphoreHolders(a.r.Name)),
			append(args, a.hid, strconv.FormatInt(a.r.N, 10), strconv.FormatInt(a.r.Limit, 10))
	})
}

// semReleaseFlight: semaphore_release_batch.lua.
func (e Env) semReleaseFlight(ctx context.Context, rs []kindCall) []releaseResult {
	return e.releaseFlight(ctx, rs, semReleaseBatch, "", func(keys, args []string, r kindCall) ([]string, []string) {
		return append(keys, e.K.Semaphore(r.r.Name), e.K.SemaphoreHolders(r.r.Name)),
			append(args, r.hid, strconv.FormatInt(r.r.N, 10))
	})
}

// poolAcquireFlight: pool_acquire_batch.lua.
func (e Env) poolAcquireFlight(ctx context.Context, as []kindCall) []attemptResult {
	return e.acquireFlight(ctx, as, poolAcquireBatch, "", func(keys, args []string, a kindCall) ([]string, []string) {
		return append(keys, e.K.Queue(Pool, a.r.Name)), append(args, a.hid, e.K.PoolBase(a.r.Name), a.r.Key)
	})
}

// poolReleaseFlight: pool_release_batch.lua.
func (e Env) poolReleaseFlight(ctx context.Context, rs []kindCall) []releaseResult {
	return e.releaseFlight(ctx, rs, poolReleaseBatch, "", func(keys, args []string, r kindCall) ([]string, []string) {
		return append(keys, e.K.Queue(Pool, r.r.Name)), append(args, r.hid, e.K.PoolBase(r.r.Name))
	})
}

// batchGrants reads the replies of a batch acquire script for n attempts
// (name(i) is the resource name of the i-th); werr is the batch's WAIT
// outcome.
func batchGrants(res rueidis.RedisResult, werr error, n int, name func(i int) string) []attemptResult {
	out := make([]attemptResult, n)
	v, err := res.ToArray()
	if err == nil && len(v) != n {
		err = fmt.Errorf("%w: %d replies for %d attempts", errReply, len(v), n)
	}
	for i := range out {
		if err != nil {
			out[i].err = err
			continue
		}
		out[i] = batchGrant(v[i], name(i), werr)
	}
	return out
}

// batchGrant reads one attempt's reply of a batch acquire script: a grant
// as parseAcquire reads it, or slow; werr is the batch's WAIT outcome.
func batchGrant(m rueidis.RedisMessage, name string, werr error) (out attemptResult) {
	if r, err := m.ToArray(); err == nil && len(r) == 1 {
		if c, err := r[0].AsInt64(); err == nil && c == replySlow {
			return attemptResult{slow: true}
		}
	}
	out.g, out.err = parseAcquire(&m, name)
	if out.err == nil && out.g.Status == Granted && werr != nil {
		out.err = werr // not replicated: the caller rolls the grant back
	}
	return out
}

// batchReleased reads the replies of a batch release script for n
// releases: each released, or slow; werr is the batch's WAIT outcome.
func batchReleased(res rueidis.RedisResult, werr error, n int) []releaseResult {
	out := make([]releaseResult, n)
	v, err := res.ToArray()
	if err == nil && len(v) != n {
		err = fmt.Errorf("%w: %d replies for %d releases", errReply, len(v), n)
	}
	for i := range out {
		if err != nil {
			out[i].err = err
			continue
		}
		c, err := v[i].AsInt64()
		switch {
		case err != nil:
			out[i].err = err
		case c == replySlow:
			out[i].slow = true
		default:
			out[i].r, out[i].err = Released(c), werr
		}
	}
	return out
}

// rwAcquireFlight: rwmutex_acquire_batch.lua.
func (e Env) rwAcquireFlight(ctx context.Context, as []kindCall) []attemptResult {
	return e.acquireFlight(ctx, as, rwAcquireBatch, "", func(keys, args []string, a kindCall) ([]string, []string) {
		return append(keys, e.rwKeys(a.r.Name)...), append(args, oneIf(a.wait)+oneIf(a.r.Shared)+a.hid)
	})
}

// rwReleaseFlight: rwmutex_release_batch.lua (writers' releases only, see
// kind.go).
func (e Env) rwReleaseFlight(ctx context.Context, rs []kindCall) []releaseResult {
	return e.releaseFlight(ctx, rs, rwReleaseBatch, "", func(keys, args []string, r kindCall) ([]string, []string) {
		return append(keys, e.K.RWMutex(r.r.Name)), append(args, r.hid)
	})
}
