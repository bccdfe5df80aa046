package lease

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// beatBatch is the client a Group's lease copies send their heartbeats
// through (and the Group its guard re-assert): they leave at the same ticks
// (Session.nextBeat), and beatBatch gathers the single commands that arrive
// together into one DoMulti, which rueidis sends as one pipeline per node.
// So a sharded session costs one request per node per heartbeat interval,
// whatever the number of shards it uses; on one server, one request in all.
//
// A command waits at most window for the others; it is sent at once when
// every participant (the live copies and the guard) has one waiting. The
// wait counts against the heartbeat, whose deadline is counted from before
// it: a heartbeat that waits is only ever judged earlier than it was sent.
//
// With ReplicaAck a heartbeat is a pipeline of its script and WAIT
// (scripts.Env.pipeline), which DoMulti gathers too on one server or
// Sentinel: the tick's scripts and one WAIT at their end, which counts
// the replicas that have every write before it on that connection, so
// each caller's WAIT reply is as true of its script as its own WAIT's
// would be. On a cluster those pipelines go over a dedicated connection to
// the script's node (Dedicated, not gathered): one request per copy. Every
// other call goes straight to the client.
type beatBatch struct {
	rueidis.Client
	window time.Duration

	mu      sync.Mutex
	parts   int         // guarded by mu: the participants
	pending []*beatCall // guarded by mu: the commands waiting to be sent
	timer   *time.Timer // guarded by mu: sends pending after window; nil when none waits
}

type beatCall struct {
	ctx  context.Context
	cmd  rueidis.Completed
	wait *rueidis.Completed // the WAIT of a ReplicaAck heartbeat (DoMulti); nil for Do
	res  rueidis.RedisResult
	wres rueidis.RedisResult // WAIT's reply, with wait
	done chan struct{}
}

func newBeatBatch(c rueidis.Client, window time.Duration) *beatBatch {
	return &beatBatch{Client: c, window: window}
}

// join adds n participants (negative: removes them).
func (b *beatBatch) join(n int) {
	b.mu.Lock()
	b.parts += n
	full := len(b.pending) > 0 && len(b.pending) >= b.parts
	b.mu.Unlock()
	if full {
		b.flush()
	}
}

// waiting returns how many commands wait to be sent.
func (b *beatBatch) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// Do sends cmd with the other participants' commands of the same tick.
func (b *beatBatch) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return b.gather(&beatCall{ctx: ctx, cmd: cmd, done: make(chan struct{})}).res
}

// DoMulti gathers a heartbeat with ReplicaAck (a script, then WAIT), except
// on a cluster; anything else goes straight to the client.
func (b *beatBatch) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if len(cmds) != 2 || cmds[1].Commands()[0] != "WAIT" || b.Client.Mode() == rueidis.ClientModeCluster {
		return b.Client.DoMulti(ctx, cmds...)
	}
	c := b.gather(&beatCall{ctx: ctx, cmd: cmds[0], wait: &cmds[1], done: make(chan struct{})})
	return []rueidis.RedisResult{c.res, c.wres}
}

// gather queues c, sends the queue when it is full, and returns c once
// answered.
func (b *beatBatch) gather(c *beatCall) *beatCall {
	b.mu.Lock()
	b.pending = append(b.pending, c)
	full := len(b.pending) >= b.parts
	if !full && b.timer == nil {
		b.timer = time.AfterFunc(b.window, b.flush)
	}
	b.mu.Unlock()
	if full {
		b.flush()
	}
	<-c.done
	return c
}

// flush sends what waits, as one DoMulti bounded by the earliest of the
// callers' deadlines (their copies' local deadlines, all about as far). A
// caller's cancellation alone does not end the others' call; its own call
// still ends by its deadline.
func (b *beatBatch) flush() {
	b.mu.Lock()
	calls := b.pending
	b.pending = nil
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.mu.Unlock()
	if len(calls) == 0 {
		return
	}
	var dl time.Time
	var wait *rueidis.Completed
	cmds := make(rueidis.Commands, len(calls), len(calls)+1)
	for i, c := range calls {
		cmds[i] = c.cmd
		if d, ok := c.ctx.Deadline(); ok && (dl.IsZero() || d.Before(dl)) {
			dl = d
		}
		if wait == nil {
			wait = c.wait // the callers' WAITs are alike (one Env's Acks and AckTimeout)
		}
	}
	if wait != nil {
		cmds = append(cmds, *wait)
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if !dl.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, dl)
	}
	defer cancel()
	rs := b.Client.DoMulti(ctx, cmds...)
	for i, c := range calls {
		c.res = rs[i]
		if c.wait != nil {
			c.wres = rs[len(calls)]
		}
		close(c.done)
	}
}
