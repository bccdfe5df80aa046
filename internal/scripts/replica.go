package scripts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/conn"
)

func (e Env) waitCmd() rueidis.Completed {
	return e.C.B().Wait().Numreplicas(int64(e.Acks)).Timeout(e.AckTimeout.Milliseconds()).Build()
}

// ErrNotReplicated reports that fewer replicas than Options.ReplicaAck
// acknowledged a write in time. A grant is then rolled back.
var ErrNotReplicated = errors.New("scripts: not acknowledged by enough replicas")

// execWait runs s and, in the same round trip on the same connection, WAIT
// for e.Acks replicas. Without Acks it is s.Exec. The result is s's reply;
// the error matches ErrNotReplicated when too few replicas acknowledged.
func (e Env) execWait(ctx context.Context, s *Script, keys, args []string) (rueidis.RedisResult, error) {
	if e.Acks <= 0 {
		r := s.Exec(ctx, e.C, keys, args)
		return r, r.Error()
	}
	rs := e.pipeline(ctx, []call{{s, s.keysFor(e.C, keys), args}}, true)
	r, w := rs[0], rs[1]
	if err := r.Error(); err != nil {
		return r, err
	}
	return r, e.acked(w)
}

// call is one script call of a pipeline; keys carry the probe (see keysFor).
type call struct {
	s          *Script
	keys, args []string
}

// pipeline runs calls in one round trip and, with wait, WAIT for e.Acks
// replicas at its end on the same connection, since WAIT counts the writes
// of its own connection: it returns the results of calls, then WAIT's. Calls
// refused with NOSCRIPT are sent again with EVAL in a second round trip
// (with its own WAIT). The whole pipeline is sent again while a call is
// refused with a transient error and ctx lasts: Redis refuses those before
// running the call, and WAIT, which declares no key, gets none of them,
// so a call sent alone that ran is not sent again (a mutex acquire's
// first send, queue "2", goes alone and is not idempotent; the scripts of
// several-call pipelines are, per hold id).
//
// With wait on Redis Cluster, the pipeline runs on a connection dedicated to
// it for its duration: rueidis follows a MOVED or ASK for one command of a
// pipeline by sending that command alone to the new node, which would leave
// WAIT counting the replicas of a node that did not run the script. A
// dedicated connection returns the redirection instead, and the retry sends
// the whole pipeline to the slot's new owner.
//
// A client that is a WaitGatherer (a sharded session's heartbeat batch)
// runs a cluster's one-call WAIT pipelines itself.
func (e Env) pipeline(ctx context.Context, calls []call, wait bool) []rueidis.RedisResult {
	return retry(ctx, func() []rueidis.RedisResult {
		if !wait || e.C.Mode() != rueidis.ClientModeCluster {
			return e.pipelineOn(ctx, e.C, calls, wait)
		}
		if g, ok := e.C.(WaitGatherer); ok && len(calls) == 1 {
			return e.pipelineOn(ctx, gathered{g}, calls, wait)
		}
		return conn.Within(ctx, func() []rueidis.RedisResult {
			var rs []rueidis.RedisResult
			_ = e.C.Dedicated(func(d rueidis.DedicatedClient) error {
				rs = e.pipelineOn(ctx, d, calls, wait)
				return nil
			})
			return rs
		}, func(err error) []rueidis.RedisResult { return conn.Failed(len(calls)+1, err) })
	}, refusal)
}

// multiDoer is what pipelineOn needs of a client or a dedicated connection.
type multiDoer interface {
	DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult
}

// A WaitGatherer runs a pipeline of one script call and WAIT on a Redis
// Cluster over one connection to the node that serves the script's slot,
// as the dedicated connection of pipeline does, but possibly in one
// pipeline with other callers' (the script calls first, one WAIT last):
// it returns the script's result and WAIT's. A redirection (MOVED, ASK)
// comes back as the script's result, as on a dedicated connection.
type WaitGatherer interface {
	GatherWait(ctx context.Context, script, wait rueidis.Completed) (rueidis.RedisResult, rueidis.RedisResult)
}

// gathered is a WaitGatherer as pipelineOn's multiDoer.
type gathered struct{ g WaitGatherer }

func (g gathered) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	r, w := g.g.GatherWait(ctx, multi[0], multi[1])
	return []rueidis.RedisResult{r, w}
}

func (e Env) pipelineOn(ctx context.Context, d multiDoer, calls []call, wait bool) []rueidis.RedisResult {
	cmds := make(rueidis.Commands, 0, len(calls)+1)
	for _, c := range calls {
		cmds = append(cmds, c.s.cmd(e.C, c.keys, c.args))
	}
	if wait {
		cmds = append(cmds, e.waitCmd())
	}
	rs := d.DoMulti(ctx, cmds...)
	var again []int
	for i := range calls {
		if isNoScript(rs[i].Error()) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return rs
	}
	cmds = cmds[:0]
	for _, i := range again {
		c := calls[i]
		cmds = append(cmds, c.s.eval(e.C, c.keys, c.args))
	}
	if wait {
		cmds = append(cmds, e.waitCmd())
	}
	rs2 := d.DoMulti(ctx, cmds...)
	for j, i := range again {
		rs[i] = rs2[j]
	}
	if wait {
		// The first WAIT ran before these writes: only the second one counts.
		rs[len(calls)] = rs2[len(again)]
	}
	return rs
}

// acked returns nil when WAIT's reply w counts at least e.Acks replicas,
// else an error matching ErrNotReplicated (or WAIT's own error).
func (e Env) acked(w rueidis.RedisResult) error {
	n, err := w.AsInt64()
	if err != nil {
		return fmt.Errorf("scripts: WAIT: %w", err)
	}
	if n < int64(e.Acks) {
		return fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, n, e.Acks, e.AckTimeout)
	}
	return nil
}

// refusal returns the first error of rs that is transient, else the first
// error, else nil: a pipeline is sent again when any call was refused.
func refusal(rs []rueidis.RedisResult) error {
	var first error
	for _, r := range rs {
		err := r.Error()
		if transient(err) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// Confirm makes sure that everything the server did before (a grant handed
// over by another client's release) has reached e.Acks replicas: it renews
// session sid's lease (a write of this connection, after the hand-off in the
// replication stream) and WAITs for it. It reports whether the lease existed.
func (e Env) Confirm(ctx context.Context, sid string, ttl time.Duration) (bool, error) {
	r, err := e.execWait(ctx, heartbeat, []string{e.K.Lease(sid)}, []string{ms(ttl), e.K.Prefix, "0", "0"})
	if err != nil {
		return false, err
	}
	v, err := r.ToArray()
	if err != nil || len(v) == 0 {
		return false, errReply
	}
	st, err := v[0].AsInt64()
	return st == replyRenewed, err
}
