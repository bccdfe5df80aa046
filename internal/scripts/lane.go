package scripts

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// laneRetry is how long a lane whose connection failed waits before it
// dedicates another: a down server costs one dial per second, not one per
// call.
const laneRetry = time.Second

// Lane is Bound(c) with a fast lane: a call with a deadline that finds the
// lane idle runs on one connection dedicated from c, which rueidis serves in
// its synchronous mode (the caller's goroutine writes the command and reads
// the reply). Every other call, and every call while the lane is busy,
// failed or not dialled yet, goes through Bound(c) and c's shared pipeline.
//
// Why: once a connection has served two overlapping calls, rueidis serves it
// with a writer and a reader goroutine for good, and each call then costs
// two goroutine wake-ups more than on a connection nobody shares; on a
// 2-vCPU VM that was 30-50 µs per round trip, a third of an idle one
// (docs/design.md, "A fast lane for serial calls"). A session's calls are
// mostly serial, and its heartbeats alone would make the shared connection
// pipelined.
//
// Why it keeps Bound's promise: rueidis' synchronous mode honours the ctx
// deadline (it sets the connection's deadline and closes the connection when
// it passes) but not a cancellation. A lane call whose ctx can only end by
// its deadline (UntilDeadline of a parent that is never canceled) runs on
// the caller's goroutine; any other lane call runs in its own goroutine and
// the caller returns when ctx ends, while the abandoned call ends by the
// deadline at the latest and the lane stays busy (its callers take the
// shared pipeline) until it has. A call without a deadline never takes the
// lane: without one, the synchronous mode could wait forever. A connection
// that returned anything but a Redis error (a timeout, a dropped connection,
// a ctx that ended) is given back to c, which closes it if broken, and the
// lane dedicates a new one on a later call, at most once per laneRetry.
// rueidis' Dedicate takes no ctx and dials inline, so the lane dedicates in
// a goroutine of its own and no call ever waits for that dial.
//
// Only standalone clients get a lane: a connection dedicated from a Sentinel
// client stays on the master it was dialled to after a failover, and a
// cluster client's is bound to one slot. NewLane(c) of any other client is
// Bound(c).
type Lane struct {
	bounded
	// held is the lane's lock, taken by CompareAndSwap and never waited for:
	// its holder alone reads and writes conn and after, and is a call on
	// the connection, a dial, or Stop.
	held   atomic.Bool
	closed atomic.Bool
	conn   *laneConn
	after  time.Time // no dial before
}

type laneConn struct {
	c       rueidis.DedicatedClient
	release func()
}

// NewLane returns c with Bound's promise and, for a standalone client, a
// fast lane; Stop gives the lane's connection back to c.
func NewLane(c rueidis.Client) *Lane {
	l := &Lane{bounded: bounded{c}}
	if c.Mode() != rueidis.ClientModeStandalone {
		l.closed.Store(true)
		l.held.Store(true)
	}
	return l
}

// Stop gives the lane's connection back to the client (once the call on it,
// if any, has ended); later calls all take the shared pipeline. It does not
// close the client.
func (l *Lane) Stop() {
	l.closed.Store(true)
	if l.held.CompareAndSwap(false, true) {
		l.drop()
	}
}

// Do runs cmd on the lane when it can, else through Bound.
func (l *Lane) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	lc := l.take(ctx)
	if lc == nil {
		return l.bounded.Do(ctx, cmd)
	}
	call := func() rueidis.RedisResult {
		r := lc.c.Do(ctx, cmd)
		l.give(r.NonRedisError() != nil)
		return r
	}
	if _, ok := ctx.(deadlineOnly); ok {
		return call()
	}
	return within(ctx, call, func(err error) rueidis.RedisResult { return rueidis.NewErrorResult(err) })
}

// DoMulti runs multi on the lane when it can, else through Bound.
func (l *Lane) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	lc := l.take(ctx)
	if lc == nil {
		return l.bounded.DoMulti(ctx, multi...)
	}
	call := func() []rueidis.RedisResult {
		rs := lc.c.DoMulti(ctx, multi...)
		failed := len(rs) != len(multi)
		for _, r := range rs {
			failed = failed || r.NonRedisError() != nil
		}
		l.give(failed)
		return rs
	}
	if _, ok := ctx.(deadlineOnly); ok {
		return call()
	}
	return within(ctx, call, func(err error) []rueidis.RedisResult { return failedAll(len(multi), err) })
}

// UntilDeadline is context.WithDeadline(parent, d), marked for the lane
// when parent can never be canceled (its Done is nil): such a ctx ends only
// at d, which rueidis' synchronous mode honours itself (it sets the
// connection's deadline), so a lane call with it runs on the caller's
// goroutine, with no hand-over at all. Any other ctx, and this one on the
// shared pipeline, goes through Bound's goroutine.
func UntilDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithDeadline(parent, d)
	if parent.Done() != nil {
		return ctx, cancel
	}
	return deadlineOnly{ctx}, cancel
}

type deadlineOnly struct{ context.Context }

// take returns the lane's connection, held for the caller, or nil when the
// caller must take the shared pipeline; it starts a dial when the lane has
// no connection.
func (l *Lane) take(ctx context.Context) *laneConn {
	if _, ok := ctx.Deadline(); !ok || ctx.Err() != nil || !l.held.CompareAndSwap(false, true) {
		return nil
	}
	if l.closed.Load() {
		l.drop() // Stop lost the race for held: its work falls to us
		return nil
	}
	if l.conn != nil {
		return l.conn
	}
	if time.Now().Before(l.after) {
		l.unhold()
		return nil
	}
	go func() {
		c, release := l.bounded.Client.Dedicate()
		l.conn = &laneConn{c, release}
		l.unhold()
	}()
	return nil
}

// give ends the holder's use of the connection; a connection that failed is
// given back to the client.
func (l *Lane) give(failed bool) {
	if failed {
		l.drop()
		l.after = time.Now().Add(laneRetry)
	}
	l.unhold()
}

// unhold releases held; if Stop ran meanwhile and found the lane held, its
// work falls to whoever takes held next, which may be us.
func (l *Lane) unhold() {
	l.held.Store(false)
	if l.closed.Load() && l.held.CompareAndSwap(false, true) {
		l.drop()
	}
}

// drop gives the connection, if any, back to the client. The caller holds
// the lane.
func (l *Lane) drop() {
	if l.conn != nil {
		l.conn.release()
		l.conn = nil
	}
}
