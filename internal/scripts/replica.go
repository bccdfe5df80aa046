package scripts

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Script is one Lua script: rueidis runs it (EVALSHA, EVAL on NOSCRIPT),
// and Cmd builds its EVALSHA for a pipeline with WAIT.
type Script struct {
	*rueidis.Lua
	sha  string
	text string
}

func newScript(text string, readOnly bool) *Script {
	sum := sha1.Sum([]byte(text))
	l := rueidis.NewLuaScript(text)
	if readOnly {
		l = rueidis.NewLuaScriptReadOnly(text)
	}
	return &Script{Lua: l, sha: hex.EncodeToString(sum[:]), text: text}
}

// cmd builds the script's EVALSHA, for pipelines.
func (s *Script) cmd(c rueidis.Client, keys, args []string) rueidis.Completed {
	return c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

func (e Env) waitCmd() rueidis.Completed {
	return e.C.B().Wait().Numreplicas(int64(e.Acks)).Timeout(e.AckTimeout.Milliseconds()).Build()
}

// ErrNotReplicated reports that fewer replicas than Options.ReplicaAck
// acknowledged a write in time. A grant is then rolled back.
var ErrNotReplicated = errors.New("not acknowledged by enough replicas")

// execWait runs s and, in the same round trip on the same connection, WAIT
// for e.Acks replicas. Without Acks it is s.Exec. The result is s's reply;
// the error matches ErrNotReplicated when too few replicas acknowledged.
func (e Env) execWait(ctx context.Context, s *Script, keys, args []string) (rueidis.RedisResult, error) {
	if e.Acks <= 0 {
		r := s.Exec(ctx, e.C, keys, args)
		return r, r.Error()
	}
	// WAIT counts the writes of its own connection: it must travel in the
	// same pipeline (rueidis sends a multi holding a blocking command on one
	// dedicated connection).
	rs := e.C.DoMulti(ctx, s.cmd(e.C, keys, args), e.waitCmd())
	r, w := rs[0], rs[1]
	if isNoScript(r.Error()) {
		if err := e.C.Do(ctx, e.C.B().ScriptLoad().Script(s.text).Build()).Error(); err != nil {
			return r, err
		}
		rs = e.C.DoMulti(ctx, s.cmd(e.C, keys, args), e.waitCmd())
		r, w = rs[0], rs[1]
	}
	if err := r.Error(); err != nil {
		return r, err
	}
	n, err := w.AsInt64()
	if err != nil {
		return r, fmt.Errorf("scripts: WAIT: %w", err)
	}
	if n < int64(e.Acks) {
		return r, fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, n, e.Acks, e.AckTimeout)
	}
	return r, nil
}

// Confirm makes sure that everything the server did before (a grant handed
// over by another client's release) has reached e.Acks replicas: it renews
// session sid's lease (a write of this connection, after the hand-off in the
// replication stream) and WAITs for it. It reports whether the lease existed.
func (e Env) Confirm(ctx context.Context, sid string, ttl time.Duration) (bool, error) {
	r, err := e.execWait(ctx, heartbeat, []string{e.K.Lease(sid), e.K.Revoked(sid)}, []string{ms(ttl), e.K.Prefix})
	if err != nil {
		return false, err
	}
	v, err := r.ToArray()
	if err != nil || len(v) == 0 {
		return false, errReply
	}
	st, err := v[0].AsInt64()
	return st == Renewed, err
}
