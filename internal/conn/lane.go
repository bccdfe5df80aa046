package conn

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Lane is a session's connection of its own for calls whose ctx can be
// canceled: a call that finds it idle runs on the caller's goroutine, in
// rueidis' synchronous mode (the caller writes the request and reads the
// reply itself), with no goroutine between the call and its reply. The
// session's shared client serves such a call through Bound's hand-over to
// another goroutine, or rueidis' pipelining goroutines, either of which
// costs a serial call measurably more client CPU (docs/performance.md).
//
// rueidis' synchronous mode honours a ctx's deadline (a socket deadline) but
// not its cancellation. The lane adds that: when the call's ctx ends, it
// sets a deadline in the past on the connection the call is on, which ends
// the read (or write) at once; rueidis then drops the connection, and the
// next lane call dials a new one with its own ctx. A canceled call costs a
// connection; one that ends normally costs a context.AfterFunc.
//
// One call at a time: a call that finds the lane busy (or the lane's
// client redialling for it) goes the shared way. The lane serves only
// commands that rueidis pipelines (never a blocking one, which rueidis
// would send over a pooled connection the lane does not track), and only
// for a standalone Redis: on Sentinel and Cluster a client holds several
// connections, and the one a call uses is not known here (NewLane returns
// nil, nil for them).
type Lane struct {
	c    rueidis.Client
	busy atomic.Bool // a call is on the lane

	mu   sync.Mutex // guards conn, seq and on
	conn net.Conn   // the connection last dialled (one wire: PipelineMultiplex -1)
	seq  uint64     // numbers the calls on the lane
	on   bool       // call seq is on the lane
}

// NewLane dials the lane of a session with opt, the options of a client
// for the same Redis as the session's, as the session sets them for a
// client it builds (no client-side caching, see lease's clientOptions): it
// returns nil, nil when that Redis is not a standalone server (see Lane).
// ctx bounds the dial.
func NewLane(ctx context.Context, opt rueidis.ClientOption) (*Lane, error) {
	l := &Lane{}
	dial := opt.DialCtxFn
	if dial == nil {
		dial = func(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
			if cfg != nil {
				return (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", dst)
			}
			return d.DialContext(ctx, "tcp", dst)
		}
	}
	opt.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
		c, err := dial(ctx, dst, d, cfg)
		if err == nil {
			l.mu.Lock()
			l.conn = c
			l.mu.Unlock()
		}
		return c, err
	}
	opt.AlwaysPipelining = false
	opt.PipelineMultiplex = -1 // one connection: the one a call is on is l.conn
	opt.DisableRetry = true    // leasehold retries what it can itself
	// rueidis' background PING stays (every Dialer.KeepAlive while idle):
	// it keeps the connection from a server's idle timeout, and finds a
	// dead one before a call does. A PING that races a call switches the
	// connection to pipelining for good; a lane call still returns at its
	// ctx's end there (rueidis itself selects on it), it only pays for the
	// pipelining goroutines until the connection is next redialled.
	opt.BlockingPoolSize = 1
	c, err := NewClient(ctx, opt)
	if err != nil {
		return nil, err
	}
	if c.Mode() != rueidis.ClientModeStandalone {
		go c.Close()
		return nil, nil
	}
	l.c = c
	return l, nil
}

// NewClient is rueidis.NewClient bounded by ctx: NewClient dials and
// handshakes without a context, which takes up to ConnWriteTimeout on a
// paused server and the dialer's timeout when nothing answers. A client
// that arrives after ctx ended is closed.
func NewClient(ctx context.Context, opt rueidis.ClientOption) (rueidis.Client, error) {
	type dialed struct {
		c   rueidis.Client
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		c, err := rueidis.NewClient(opt)
		ch <- dialed{c, err}
	}()
	select {
	case d := <-ch:
		return d.c, d.err
	case <-ctx.Done():
		go func() {
			if d := <-ch; d.err == nil {
				d.c.Close()
			}
		}()
		return nil, context.Cause(ctx)
	}
}

// Close closes the lane's client; a call still on the lane fails (rueidis'
// ErrClosing).
func (l *Lane) Close() {
	if l != nil {
		l.c.Close()
	}
}

// Idle reports whether the lane exists and no call is on it now (another
// call may take it at once: take decides).
func (l *Lane) Idle() bool { return l != nil && !l.busy.Load() }

// take reserves the lane for one call; false when it is busy (or nil).
func (l *Lane) take() bool { return l != nil && l.busy.CompareAndSwap(false, true) }

// do runs cmd on the lane, which the caller took: it returns the reply, or
// ctx.Err() once ctx ends (see Lane). ctx must carry a deadline. It gives
// the lane back.
func (l *Lane) do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	defer l.busy.Store(false)
	if inline(ctx) {
		// Its only end is its deadline, which rueidis' socket deadline
		// honours: nothing to interrupt.
		return l.c.Do(ctx, cmd)
	}
	l.mu.Lock()
	l.seq++
	call := l.seq
	l.on = true
	l.mu.Unlock()
	// The deadline is rueidis' socket deadline; what else ends ctx
	// interrupts the call (an Until ctx's parent: watching the Until ctx
	// itself would give it the timer it saves).
	stop := context.AfterFunc(cancelOf(ctx), func() { l.interrupt(call) })
	r := l.c.Do(ctx, cmd)
	stop()
	l.mu.Lock()
	l.on = false // an interrupt that runs from now on finds another call, or none
	l.mu.Unlock()
	if err := ctx.Err(); err != nil && r.NonRedisError() != nil {
		return rueidis.NewErrorResult(err) // as rueidis reports a ctx that ended
	}
	return r
}

// interrupt ends the read or write of call, if it is still on the lane, by
// a deadline in the past on its connection. rueidis sets a socket deadline
// of its own before each synchronous call, so a connection that survives
// this (the call had just ended) is not affected later.
func (l *Lane) interrupt(call uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.on && l.seq == call && l.conn != nil {
		_ = l.conn.SetDeadline(time.Unix(1, 0))
	}
}

// canLane reports whether a call of cmd with ctx may go on a lane: ctx
// carries a deadline (without one, rueidis would switch the lane to
// pipelining), and cmd is one rueidis pipelines. A call whose ctx ends only
// at that deadline (see inline) takes the lane too: the shared connection
// is pipelined once two calls overlapped on it, the lane stays synchronous.
func canLane(ctx context.Context, cmd rueidis.Completed) bool {
	if cmd.IsBlock() {
		return false
	}
	_, ok := ctx.Deadline()
	return ok
}
