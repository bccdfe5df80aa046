package lease

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/conn"
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
// would be. On a cluster a WAIT must run on a connection to the node that
// ran the scripts, so there beatBatch is a scripts.WaitGatherer and sends
// the tick's commands as one pipeline per node (sendByNode). Every other
// call goes straight to the client.
type beatBatch struct {
	rueidis.Client
	window time.Duration

	mu      sync.Mutex
	parts   int               // guarded by mu: the participants
	pending []*beatCall       // guarded by mu: the commands waiting to be sent
	timer   *time.Timer       // guarded by mu: sends pending after window; nil when none waits
	owners  map[uint16]string // guarded by mu: on a cluster, the node serving a slot, as MOVED told (sendByNode)
}

type beatCall struct {
	ctx  context.Context
	cmd  rueidis.Completed
	wait *rueidis.Completed // the WAIT of a ReplicaAck heartbeat (DoMulti, GatherWait); nil for Do
	slot uint16             // cmd's
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
	return b.gather(&beatCall{ctx: ctx, cmd: cmd, slot: cmd.Slot(), done: make(chan struct{})}).res
}

// GatherWait is scripts.WaitGatherer: a cluster's ReplicaAck heartbeat.
func (b *beatBatch) GatherWait(ctx context.Context, script, wait rueidis.Completed) (rueidis.RedisResult, rueidis.RedisResult) {
	c := b.gather(&beatCall{ctx: ctx, cmd: script, wait: &wait, slot: script.Slot(), done: make(chan struct{})})
	return c.res, c.wres
}

// DoMulti gathers a heartbeat with ReplicaAck (a script, then WAIT), except
// on a cluster; anything else goes straight to the client.
func (b *beatBatch) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if len(cmds) != 2 || cmds[1].Commands()[0] != "WAIT" || b.Client.Mode() == rueidis.ClientModeCluster {
		return b.Client.DoMulti(ctx, cmds...)
	}
	c := b.gather(&beatCall{ctx: ctx, cmd: cmds[0], wait: &cmds[1], slot: cmds[0].Slot(), done: make(chan struct{})})
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
	waits := false
	for _, c := range calls {
		if d, ok := c.ctx.Deadline(); ok && (dl.IsZero() || d.Before(dl)) {
			dl = d
		}
		waits = waits || c.wait != nil
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if !dl.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, dl)
	}
	defer cancel()
	if waits && b.Client.Mode() == rueidis.ClientModeCluster {
		b.sendByNode(ctx, calls)
		return
	}
	answer(calls, b.Client.DoMulti(ctx, commands(calls)...))
}

// commands returns the commands of calls, and one WAIT at their end when
// one of them asked for it (the callers' WAITs are alike: one Env's Acks
// and AckTimeout).
func commands(calls []*beatCall) rueidis.Commands {
	var wait *rueidis.Completed
	cmds := make(rueidis.Commands, len(calls), len(calls)+1)
	for i, c := range calls {
		cmds[i] = c.cmd
		if wait == nil {
			wait = c.wait
		}
	}
	if wait != nil {
		cmds = append(cmds, *wait)
	}
	return cmds
}

// answer gives each call its result from rs, the results of commands(calls).
func answer(calls []*beatCall, rs []rueidis.RedisResult) {
	for i, c := range calls {
		c.res = rs[i]
		if c.wait != nil {
			c.wres = rs[len(calls)]
		}
		close(c.done)
	}
}

// sendByNode sends calls on a cluster as one pipeline per node, over a
// dedicated connection, each ending with one WAIT when one of its calls
// asked for it. A call goes to the node that last answered MOVED for its
// slot, or else to any node, which answers MOVED: the call is then sent
// once more, to the node named, in a second round (the first round's WAIT
// on the wrong node counts nothing of it). A MOVED in the second round, an
// ASK (a slot being migrated) or any error is the call's result, which its
// caller handles as on a dedicated connection of its own.
func (b *beatBatch) sendByNode(ctx context.Context, calls []*beatCall) {
	for _, c := range calls { // a command may be sent twice: rueidis must not recycle it
		c.cmd = c.cmd.Pin()
		if c.wait != nil {
			w := c.wait.Pin()
			c.wait = &w
		}
	}
	for round := 0; len(calls) > 0 && round < 2; round++ {
		nodes := b.Client.Nodes()
		if len(nodes) == 0 {
			answer(calls, conn.Failed(len(calls)+1, rueidis.ErrNoSlot))
			return
		}
		var mu sync.Mutex
		var again []*beatCall
		var wg sync.WaitGroup
		for node, group := range b.byNode(calls, nodes) {
			wg.Go(func() {
				cmds := commands(group)
				rs := conn.Within(ctx, func() []rueidis.RedisResult {
					var rs []rueidis.RedisResult
					_ = node.Dedicated(func(d rueidis.DedicatedClient) error {
						rs = d.DoMulti(ctx, cmds...)
						return nil
					})
					return rs
				}, func(err error) []rueidis.RedisResult { return conn.Failed(len(cmds), err) })
				var done []*beatCall
				for i, c := range group {
					if addr, moved := movedTo(rs[i].Error()); moved {
						b.mu.Lock()
						b.owners[c.slot] = addr
						b.mu.Unlock()
						if round == 0 {
							mu.Lock()
							again = append(again, c)
							mu.Unlock()
							continue
						}
					}
					done = append(done, c)
					c.res = rs[i]
					if c.wait != nil {
						c.wres = rs[len(group)]
					}
				}
				for _, c := range done {
					close(c.done)
				}
			})
		}
		wg.Wait()
		calls = again
	}
}

// byNode groups calls by the node that serves their slot, as far as
// b.owners knows; those of an unknown or gone node go to the first node by
// address.
func (b *beatBatch) byNode(calls []*beatCall, nodes map[string]rueidis.Client) map[rueidis.Client][]*beatCall {
	addrs := make([]string, 0, len(nodes))
	for a := range nodes {
		addrs = append(addrs, a)
	}
	first := nodes[slices.Min(addrs)]
	groups := map[rueidis.Client][]*beatCall{}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.owners == nil {
		b.owners = map[uint16]string{}
	}
	for _, c := range calls {
		node, ok := nodes[b.owners[c.slot]]
		if !ok {
			node = first
		}
		groups[node] = append(groups[node], c)
	}
	return groups
}
