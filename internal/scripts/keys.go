package scripts

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The infixes of key names after the prefix "{ns}:", named once: the
// functions below use them, and the scripts get them as the Lua locals
// K_LEASE, K_CHANNEL, ... (see protocolConsts).
const (
	keyLease            = "s:"
	keyChannel          = "n:"
	keyEpoch            = "epoch"
	keyMutex            = "m:"
	keyQueue            = "q:" // then the kind's short name, ":" and the name
	keySemaphore        = "sem:"
	keySemaphoreHolders = "semh:"
	keyPool             = "pool:"
	keyPoolIndex        = "i:" // after a pool's base: the index {ns}:pool:<name>:i:<sid> of a session's members
	keyElection         = "el:"
	keyRWMutex          = "rw:"
	keyRWMutexReaders   = "rwr:"
	keyJob              = "job:"  // a scheduled job's record (schedule.go)
	keyJobHistory       = "jobh:" // its runs
)

// Keys builds every Redis key and channel name of one namespace. All of them
// start with the hash tag "{ns}", so they live in one Redis Cluster slot and
// every script is single-slot.
type Keys struct {
	// Prefix is "{ns}:"; scripts receive it to build the keys of sessions
	// they only learn about from stored hold ids.
	Prefix string

	// shardOf is the namespace whose shard these keys are (ShardKeys),
	// shard its number; "" for a namespace's own keys. For messages only.
	shardOf string
	shard   int
}

// NewKeys returns the keys of namespace ns, which must not contain '{' or '}'.
func NewKeys(ns string) Keys { return Keys{Prefix: "{" + ns + "}:"} }

// Namespace returns the namespace the keys were built for: for a shard's
// keys, the shard's tag (see ShardTag).
func (k Keys) Namespace() string {
	return strings.TrimSuffix(strings.TrimPrefix(k.Prefix, "{"), "}:")
}

// Describe names the keys' namespace for a message a user reads:
// `namespace "ns"`, or `shard k of namespace "ns"` for a shard's keys.
func (k Keys) Describe() string {
	if ns, shard, ok := k.Shard(); ok {
		return fmt.Sprintf("shard %d of namespace %q", shard, ns)
	}
	return fmt.Sprintf("namespace %q", k.Namespace())
}

// Shard returns the namespace and shard number of a shard's keys
// (ShardKeys); ok is false for a namespace's own keys.
func (k Keys) Shard() (ns string, shard int, ok bool) {
	return k.shardOf, k.shard, k.shardOf != ""
}

// Lease is the session lease hash {ns}:s:<sid>; its TTL is the session's.
func (k Keys) Lease(sid string) string { return k.Prefix + keyLease + sid }

// Channel is the pub/sub channel {ns}:n:<sid> on which a session hears that a
// waiter was granted, or that a hold was taken away.
func (k Keys) Channel(sid string) string { return k.Prefix + keyChannel + sid }

// Mutex is the mutex string {ns}:m:<name>: holder hold id, last token, lock
// delay, idle time, lock delay end and waiter mark (see mutex_lib.lua).
func (k Keys) Mutex(name string) string { return k.Prefix + keyMutex + name }

// Queue is the FIFO waiter list {ns}:q:<kind>:<name>.
func (k Keys) Queue(kind Kind, name string) string {
	return k.Prefix + keyQueue + kind.short() + ":" + name
}

// The key {ns}:migrating never exists: on Redis Cluster every script
// declares it, so that Redis refuses scripts while the slot migrates (see
// Script.keysFor).

// Epoch is the marker {ns}:epoch whose presence says the namespace's data is intact.
func (k Keys) Epoch() string { return k.Prefix + keyEpoch }

// Probe is the migration probe {ns}:migrating, which no script ever
// writes: every script declares it on Redis Cluster (see Script).
func (k Keys) Probe() string { return k.Prefix + probeSuffix }

// Semaphore is the semaphore hash {ns}:sem:<name>: limit, permits used, last token.
func (k Keys) Semaphore(name string) string { return k.Prefix + keySemaphore + name }

// SemaphoreHolders is the hash {ns}:semh:<name>: hold id -> "<n>:<token>" or "<n>:<token>:<lock delay ms>".
func (k Keys) SemaphoreHolders(name string) string { return k.Prefix + keySemaphoreHolders + name }

// PoolBase is the prefix {ns}:pool:<name>: of a pool's keys (see pool_lib.lua).
func (k Keys) PoolBase(name string) string { return k.Prefix + keyPool + name + ":" }

// Election is the election hash {ns}:el:<name>: leader hold id, term, value.
func (k Keys) Election(name string) string { return k.Prefix + keyElection + name }

// ElectionCandidates is the hash {ns}:elc:<name> of queued candidates' values.
func (k Keys) ElectionCandidates(name string) string { return k.Prefix + "elc:" + name }

// ElectionChannel is the channel {ns}:elw:<name> on which every change of
// leader or value is announced as "<term>|<hold id>|<value>".
func (k Keys) ElectionChannel(name string) string { return k.Prefix + "elw:" + name }

// RWMutex is the read-write mutex hash {ns}:rw:<name>: writer hold id, last
// token, lock delays (see rwmutex_lib.lua).
func (k Keys) RWMutex(name string) string { return k.Prefix + keyRWMutex + name }

// RWMutexReaders is the hash {ns}:rwr:<name>: reader hold id -> "<lock delay>:<token>".
func (k Keys) RWMutexReaders(name string) string { return k.Prefix + keyRWMutexReaders + name }

// Kept returns the keys that record a hold of r, which its session keeps
// alive with its heartbeat (see heartbeat.lua and common.lua held_ms) and
// which must exist while the hold does. A pool's keys are its membership,
// which is configuration and never expires: none.
func (k Keys) Kept(r Resource) []string {
	if s, ok := r.Kind.spec(); ok && s.kept != nil {
		return s.kept(k, r)
	}
	return nil
}

// KeptWaiting returns the keys that a wait for r keeps alive: Kept(r), the
// first held of them, then the other keys of r a hold may come to use and
// the queue (an election's candidate values too).
func (k Keys) KeptWaiting(r Resource) (keys []string, held int) {
	keys = k.Kept(r)
	held = len(keys)
	if waiting := r.Kind.mustSpec().waiting; waiting != nil {
		keys = append(keys, waiting(k, r)...)
	}
	return append(keys, k.Queue(r.Kind, r.Name)), held
}

// ParseEpoch reads an epoch marker value "<until>|<grace>" (see
// common.lua grace_left), "<until>|<grace>|<shards>" in a shard of a
// sharded namespace: the server time (ms) until which grants are refused, 0
// for none, and the namespace's restart grace, 0 when none is recorded.
func ParseEpoch(v string) (untilMs int64, grace time.Duration, ok bool) {
	untilMs, grace, _, ok = parseEpoch(v)
	return untilMs, grace, ok
}

// parseEpoch is ParseEpoch, with the shard count recorded (1 when none).
func parseEpoch(v string) (untilMs int64, grace time.Duration, shards int, ok bool) {
	parts := strings.Split(v, "|")
	if len(parts) > 3 {
		return 0, 0, 0, false
	}
	nums := make([]int64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return 0, 0, 0, false
		}
		nums[i] = n
	}
	shards = 1
	if len(nums) > 1 {
		grace = time.Duration(nums[1]) * time.Millisecond
	}
	if len(nums) > 2 {
		shards = int(nums[2])
	}
	return nums[0], grace, shards, true
}
