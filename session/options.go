package session

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/lease"
)

// Options configures a session. The zero value means every default.
type Options struct {
	// Namespace prefixes every key as "{Namespace}:...", so that all keys of a
	// namespace share one Redis Cluster hash slot. Default "leasehold". It must
	// not contain '{' or '}' and is at most 128 bytes.
	Namespace string

	// TTL is the lease time to live on the server. Default 10s; at least
	// 50ms, at most MaxDuration.
	TTL time.Duration

	// Heartbeat is the renewal interval. Default TTL/3; at least 1ms, at
	// most TTL/2.
	Heartbeat time.Duration

	// Owner is shown by inspection. Default "hostname/pid".
	Owner string

	// LockDelay is how long a resource whose hold was lost (its session's lease
	// expired, not released) stays unavailable once that is noticed, giving a
	// paused old holder time to notice. Default 0; else 1ms (Redis counts
	// in ms) to MaxDuration. Reset does not apply it.
	// With a LockDelay, a session that lost its lease leaves its holds to
	// expire rather than release them, and Hold.Release past the lease's
	// local deadline reports ErrLeaseLost instead of releasing.
	LockDelay time.Duration

	// RestartGrace is how long grants are refused after the namespace's
	// data was lost (a restart without persistence, FLUSHALL or FLUSHDB, a
	// replica promoted empty), counted from when a session notices the
	// loss: sessions still inside their deadline reclaim their lease and
	// holds meanwhile. A namespace records its grace (the first session to
	// find its data missing sets it), and New refuses, with an error
	// matching ErrInvalidOptions, a session whose TTL is longer than the
	// recorded grace or whose RestartGrace is shorter: every session of a
	// namespace must be covered by the grace that any other sets. Default
	// max(TTL, 10s) (DefaultRestartGrace), so that sessions whose TTLs
	// differ but stay within 10s agree without configuration; it must not
	// be shorter than the TTL, nor longer than MaxDuration. A brand-new
	// namespace cannot be told from one whose data was lost: its first
	// grant waits out the grace, unless a test marks it intact
	// (leaseholdtest.MarkIntact).
	RestartGrace time.Duration
	// DisableRestartGrace is refused by New (ErrInvalidOptions): a data
	// loss that no grace covers lets a session be granted what another
	// still holds. Tests and in-process examples on a brand-new server
	// mark their namespace intact instead (leaseholdtest.MarkIntact).
	//
	// Deprecated: setting it makes New fail.
	DisableRestartGrace bool

	// ReplicaAck is the number of replicas that must acknowledge grants and
	// heartbeats (WAIT, in the same round trip): a heartbeat extends the local
	// deadline only once acknowledged, and a grant no replica set acknowledged
	// in time is rolled back and reported as an error matching
	// ErrNotReplicated. With it, a failover to an acknowledged replica loses
	// no grant and no renewal. Default 0 (no WAIT).
	ReplicaAck int
	// ReplicaAckTimeout bounds each WAIT. Default Heartbeat; at least 1ms
	// (WAIT counts in ms, and a timeout of 0 would wait for ever), at most
	// TTL/2.
	ReplicaAckTimeout time.Duration

	// Logger receives lease and hold events. nil: no logs. Neither the
	// session's own goroutine, which owns the lease deadline, nor its
	// heartbeat runs the handler: their records reach it from a goroutine
	// of their own, and when the handler falls 64 records behind, the
	// excess is dropped and counted (a blocked handler must not delay a
	// loss signal). Only a Lock retrying a failed acquire logs on the
	// caller's goroutine. Close waits for the queued records (at most until
	// one TTL after it began); a program that exits without Close may lose
	// the last ones.
	Logger *slog.Logger

	// Metrics registers the leasehold_* collectors (sessions, heartbeats and
	// their latency, time left to the deadline, holds, acquire waits,
	// hand-offs, losses). Sessions sharing a Registerer share the collectors.
	// nil: no metrics.
	Metrics prometheus.Registerer

	// Conn, when set, gives the session a connection of its own to the
	// same Redis as its client, dialled with these options (the session
	// forces what it needs: one connection, no client-side caching, no
	// retries). A call that finds it idle writes its request and reads the
	// reply on the caller's goroutine, instead of being handed to another
	// goroutine and back when its ctx can be canceled, which saves client
	// CPU per call (measured in docs/performance.md). A call
	// whose ctx ends while it is on the connection still returns at once:
	// the connection is then dropped, and the next call dials another. The
	// session closes it in Close; it costs one more TCP connection per
	// session. Dial sets Conn to its own options. Only for a standalone
	// Redis (a client whose Mode is rueidis.ClientModeStandalone): with
	// Sentinel or Cluster a client holds a connection per node, and the
	// session ignores Conn. nil: none.
	Conn *rueidis.ClientOption

	// Shards splits the namespace into this many hash slots, so that one
	// namespace uses every master of a Redis Cluster: each name lives in
	// exactly one shard (FNV-1a of the name modulo Shards), and every
	// primitive works on it unchanged. 0 or 1: unsharded, the layout of
	// every release before; at most MaxShards.
	//
	// The shard count is part of the namespace: every session of it must
	// use the same one, and a session with another is refused with an
	// error matching ErrInvalidOptions (a rolling deploy cannot change it:
	// stop the namespace's processes and delete its keys first). A sharded
	// session keeps one lease copy per shard it uses, opened on first use
	// (one round trip; shard 0's at Dial, which so refuses a session that
	// does not fit the namespace's restart grace) and closed once it has
	// held, waited for and watched nothing for 10 heartbeat intervals;
	// losing one (its master restarted
	// empty, flushed, or failed over without it) ends the holds of that
	// shard only, with ErrLeaseLost, and the shard's next use opens a new
	// copy. The session itself ends only on Close. See docs/design.md, "A
	// namespace across a Cluster".
	Shards int
}

// MaxShards is the largest Options.Shards.
const MaxShards = lease.MaxShards

// MaxDuration is the longest Options.TTL, LockDelay and RestartGrace: 365
// days, far beyond any lease a heartbeat keeps alive; New refuses longer
// ones (ErrInvalidOptions), which would overflow the expiries derived from
// them.
const MaxDuration = lease.MaxDuration

// DefaultRestartGrace is the restart grace of every session whose TTL is
// no longer (see Options.RestartGrace).
const DefaultRestartGrace = lease.DefaultRestartGrace

// MinRedis is the oldest Redis version leasehold supports (7.0: the
// read-only calls use EVALSHA_RO). Dial and New refuse an older one with
// ErrUnsupportedRedis.
const MinRedis = lease.MinRedis

// MaxNameLen is the longest resource name accepted, in bytes.
const MaxNameLen = 1024

// The lease checks names against the same bound: this constant does not
// compile (a negative uint) unless the two are equal.
const _ = uint(MaxNameLen-lease.MaxNameLen) + uint(lease.MaxNameLen-MaxNameLen)

// withDefaults validates o and fills in defaults. Errors match ErrInvalidOptions.
func (o Options) withDefaults() (Options, error) {
	d, err := lease.Options(o).WithDefaults()
	return Options(d), err
}

func (o Options) logger() *slog.Logger { return lease.Options(o).Log() }
