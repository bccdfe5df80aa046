package scripts

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Script is one Lua script. Exec runs it with EVALSHA and, on NOSCRIPT, with
// EVAL on the same node (whichever node owns the keys' slot: a replica just
// promoted, a master restarted empty or a SCRIPT FLUSH all lose the cache).
//
// On Redis Cluster every call also declares the namespace's migration probe
// {ns}:migrating, a key that never exists. While the namespace's slot is
// being migrated, Redis then refuses the call before running it (TRYAGAIN,
// since a declared key is missing on both nodes) instead of running it on a
// node that lacks some of the keys the script reads without declaring them
// (the lease of a holder found in a mutex hash, the epoch marker): on the
// importing node such a key reads as absent, which would make a live holder
// look dead. The heartbeat alone runs without the probe (see unprobed and
// heartbeat.lua), so leases outlive a slow move. Exec retries the errors
// Redis answers before running a script (see transient) until ctx ends.
type Script struct {
	sha      string
	text     string
	readOnly bool
	noProbe  bool // see unprobed
}

// unprobed marks s as safe to run during a slot migration without the
// probe: it declares every key whose absence it acts on (heartbeat.lua says
// why that holds for it).
func unprobed(s *Script) *Script {
	s.noProbe = true
	return s
}

func newScript(text string, readOnly bool) *Script {
	sum := sha1.Sum([]byte(text))
	return &Script{sha: hex.EncodeToString(sum[:]), text: text, readOnly: readOnly}
}

// Exec runs the script on the node of keys' slot: EVALSHA, then EVAL on
// NOSCRIPT, retried while Redis refuses it before running it (see transient)
// and ctx lasts. Every key must be in one namespace (start with "{ns}:").
func (s *Script) Exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	keys = s.keysFor(c, keys)
	return retry(ctx, func() rueidis.RedisResult {
		r := c.Do(ctx, s.cmd(c, keys, args))
		if isNoScript(r.Error()) {
			r = c.Do(ctx, s.eval(c, keys, args))
		}
		return r
	}, rueidis.RedisResult.Error)
}

// cmd builds the script's EVALSHA (EVALSHA_RO for a read-only script).
// keys must already carry the probe (see keysFor).
func (s *Script) cmd(c rueidis.Client, keys, args []string) rueidis.Completed {
	if s.readOnly {
		return c.B().EvalshaRo().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	}
	return c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// eval builds the script's EVAL, which also loads it into the node's cache.
func (s *Script) eval(c rueidis.Client, keys, args []string) rueidis.Completed {
	if s.readOnly {
		return c.B().EvalRo().Script(s.text).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	}
	return c.B().Eval().Script(s.text).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// probeSuffix names the migration probe {ns}:migrating, which no script
// ever writes (see Script).
const probeSuffix = "migrating"

// keysFor returns the keys to declare for a call of s: keys plus the
// namespace's migration probe on Redis Cluster, keys unchanged elsewhere or
// for an unprobed script. Scripts never read the probe: it is the last of
// KEYS, after the ones their headers name.
func (s *Script) keysFor(c rueidis.Client, keys []string) []string {
	if s.noProbe || len(keys) == 0 || c.Mode() != rueidis.ClientModeCluster {
		return keys
	}
	p := prefixOf(keys[0])
	out := make([]string, len(keys), len(keys)+1)
	copy(out, keys)
	return append(out, p+probeSuffix)
}

// prefixOf returns the namespace prefix "{ns}:" of key k.
func prefixOf(k string) string {
	if i := strings.Index(k, "}:"); i >= 0 {
		return k[:i+2]
	}
	return k
}

func isNoScript(err error) bool {
	e, ok := rueidis.IsRedisErr(err)
	return ok && e.IsNoScript()
}

// transient reports an error that Redis answers before it runs a command,
// so that sending the command again is safe and may succeed: TRYAGAIN (a
// slot being migrated), CLUSTERDOWN (a failover in progress), LOADING (a
// restarted node loading its data), and MOVED or ASK that reached us
// (rueidis follows them itself, up to its redirect limit). None of them says
// anything about a lease: they are never taken as proof of loss.
func transient(err error) bool {
	e, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	if _, moved := e.IsMoved(); moved {
		return true
	}
	if _, ask := e.IsAsk(); ask {
		return true
	}
	return e.IsTryAgain() || e.IsClusterDown() || e.IsLoading()
}

// Pauses between attempts refused with a transient error.
const (
	minTransientPause = 2 * time.Millisecond
	maxTransientPause = 100 * time.Millisecond
)

// retry runs call until errOf of its result is not transient or ctx ends,
// pausing between attempts (doubling from 2 ms to 100 ms). It returns the
// last result: with ctx ended, still the transient error, which callers
// handle like any failed call.
func retry[T any](ctx context.Context, call func() T, errOf func(T) error) T {
	pause := minTransientPause
	for {
		r := call()
		if !transient(errOf(r)) {
			return r
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return r
		}
		pause = min(2*pause, maxTransientPause)
	}
}

// Text returns the text of script file name (as "mutex_acquire.lua") as
// Redis runs it: with its helpers and the protocol's declarations. Only
// the scripts that bench/micro_test.go measures are known; "" otherwise.
func Text(name string) string {
	switch name {
	case "mutex_acquire.lua":
		return mutexAcquire.text
	case "mutex_release.lua":
		return mutexRelease.text
	case "heartbeat.lua":
		return heartbeat.text
	}
	return ""
}
