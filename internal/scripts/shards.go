package scripts

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/slot"
)

// MaxShards is the largest shard count a namespace may be split into.
const MaxShards = 1024

// shardLayout is the version of the sharded layout, recorded in a sharded
// namespace's guard (see shards_guard.lua): a later layout that cannot share
// a namespace with this one bumps it, and the guard refuses the mix.
const shardLayout = 1

var shardsGuard = script("shards_guard.lua")

// ErrShardsMismatch reports that a namespace is laid out with another
// shard count than the session's (see docs/design.md, "A namespace across a
// Cluster"): its names live in other shards, so the session is refused
// rather than let it grant what another session holds elsewhere.
var ErrShardsMismatch = errors.New("the namespace is laid out with another shard count")

// FNV-1a, 64 bits: the hash that places a name in a shard (docs/protocol.md
// gives test vectors for other clients).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// ShardOf returns the shard, in [0, n), that resource name lives in:
// FNV-1a (64 bits) of its bytes modulo n. It is 0 for n <= 1.
func ShardOf(name string, n int) int {
	if n <= 1 {
		return 0
	}
	h := uint64(fnvOffset)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= fnvPrime
	}
	return int(h % uint64(n))
}

// ShardKeys returns the keys of shard k of namespace ns: prefix
// "{<ShardTag(ns, k)>}:".
func ShardKeys(ns string, k int) Keys {
	keys := NewKeys(ShardTag(ns, k))
	keys.shardOf, keys.shard = ns, k
	return keys
}

// NumSlots is the number of Redis Cluster hash slots.
const NumSlots = slot.NumSlots

// ShardTag returns the hash tag of shard k (0 <= k < MaxShards) of
// namespace ns: "ns#k.x", x the smallest integer >= 0 for which the tag's
// hash slot falls in [16·r(k), 16·r(k) + 16), r(k) being k's 10 bits
// reversed. The first N shards' slots are then spread evenly over the
// slot space for every N (0, 8192, 4096, 12288, 2048, ... plus at most
// 15), so a cluster whose slots are split into equal ranges, as redis-cli
// --cluster create splits them, gets about N/masters of them on each
// master: with 3 masters, 16 shards put at most 6 on one (37.5%). A tag
// does not depend on N, so a shard's keys are the same for every shard
// count (the guard's check reads them, see GuardShards). Tags are
// computed once per process and namespace (about 1,000 CRC16s each).
func ShardTag(ns string, k int) string {
	key := [2]any{ns, k}
	if t, ok := shardTags.Load(key); ok {
		return t.(string)
	}
	lo := int(bits.Reverse16(uint16(k))>>6) * 16 // r(k) * 16: k's 10 bits reversed
	base := ns + "#" + strconv.Itoa(k) + "."
	tag := base + "0"
	for x := 0; x < 1<<22; x++ { // a 16-slot window is hit after ~1,024 tries
		t := base + strconv.Itoa(x)
		if sl := Slot(t); sl >= lo && sl < lo+16 {
			tag = t
			break
		}
	}
	shardTags.Store(key, tag)
	return tag
}

// shardTags caches ShardTag: [2]any{ns, k} -> tag.
var shardTags sync.Map

// Slot returns the Redis Cluster hash slot of key (slot.Of).
func Slot(key string) int { return slot.Of(key) }

// shards is the shard count a session records in epoch markers: 1 when
// unsharded.
func (e Env) shards() int { return max(e.Shards, 1) }

// GuardShards makes sure that namespace ns is, or becomes, a namespace of
// n > 1 shards, and returns an error matching ErrShardsMismatch when it is
// not: the guard {ns}:epoch records another shard count, or is an
// unsharded namespace's marker. A missing guard is created only after
// reading the epoch markers of every possible shard (0..MaxShards-1, one
// pipeline: a rare path, taken when a namespace is new or its guard was
// lost) and finding none that records another shard count: losing the
// guard's master alone cannot let a session of another layout in while
// the shards of the old one still hold.
//
// Before it creates the guard, it replaces the epoch marker "0" (marked
// intact, and no session opened there since) of each of the n shards with
// a restart grace from now (epoch_init.lua with "1", one pipeline; any
// failure fails the call, and the guard stays missing for the next
// session to do it again). A "0" records no shard count, so the check
// above cannot tell it from a new namespace's; but a namespace marked
// intact for tests gets its guard too (MarkIntactShards), so a "0" found
// with the guard missing may have outlived the loss of the guard and of
// every shard a session used, and a session of another shard count would
// grant names there that the old holders still hold in their lost shards.
// Before and not after: once the guard exists, another session of this
// count skips all this and may open a copy on the "0" at once. (Should a
// session of the old count re-assert the guard meanwhile, this one is
// refused, and the old layout's sessions are refused in those unused
// shards, which now record this count: a misconfigured deploy costs
// availability there, never a second holder.)
//
// Having created the guard, it sets the epoch marker of each of the n
// shards that has none (epoch_init.lua, with restart grace grace, in one
// pipeline): the shards of a new namespace, or of one whose data was lost,
// then share one restart grace from now, instead of each starting its own
// at its first use.
func GuardShards(ctx context.Context, c rueidis.Client, ns string, n int, grace time.Duration) error {
	guard := NewKeys(ns).Epoch()
	found, _, err := runGuard(ctx, c, guard, n, guardRead)
	if err != nil || found != 0 {
		return guardErr(ns, n, found, err)
	}
	// Every possible shard, not only this session's n: a namespace of more
	// shards keeps holders in shards n and above too.
	if err := checkShardMarkers(ctx, c, ns, n, MaxShards); err != nil {
		return err
	}
	for _, r := range initShardMarkers(ctx, c, ns, n, grace, true) {
		if err := r.Error(); err != nil {
			return err
		}
	}
	found, _, err = runGuard(ctx, c, guard, n, guardCreate)
	if err := guardErr(ns, n, found, err); err != nil {
		return err
	}
	// Best effort: a shard whose marker this misses gets one at its first use.
	initShardMarkers(ctx, c, ns, n, grace, false)
	return nil
}

// initShardMarkers runs epoch_init.lua on the epoch markers of shards
// 0..n-1 of namespace ns, in one pipeline: with onlyIntact, replacing a
// marker "0" only; else setting a missing one.
func initShardMarkers(ctx context.Context, c rueidis.Client, ns string, n int, grace time.Duration, onlyIntact bool) []rueidis.RedisResult {
	mode := "0"
	if onlyIntact {
		mode = "1"
	}
	calls := make([]call, n)
	for k := range n {
		keys := []string{ShardKeys(ns, k).Epoch()}
		calls[k] = call{epochInit, epochInit.keysFor(c, keys), []string{ms(grace), strconv.Itoa(n), mode}}
	}
	return Env{C: c}.pipeline(ctx, calls, false)
}

// probeShards is how many shards' markers an unsharded session reads
// before it recreates its own missing marker (Env.InitEpoch): shards
// 0..63, every shard of a namespace of up to 64, and for a larger one 64
// slots spread evenly over the slot space (every 256th, see ShardTag), so
// on every master of a cluster of up to 64 masters whose slots are split
// into equal ranges. All 1,024 would cost every new unsharded namespace's
// first open, and every recreation of its marker, a 1,024-command
// pipeline: 5 ms on a loaded 2-core machine over TCP, and more than the 1 s
// an open had over miniredis' in-memory connection (TestOptionsValidation),
// against 0.3 and 1.7 ms for 64. Each probed namespace's 64 tags stay
// cached (shardTags).
const probeShards = 64

// checkShardMarkers reads the epoch markers of shards 0..upTo-1 of
// namespace ns (one pipeline; MaxShards for every possible shard) and
// returns an error matching ErrShardsMismatch when one records a shard
// count other than n (1 for an unsharded session). It is the rare path of
// a namespace whose epoch marker or guard is missing: new, or lost with
// its master's data.
func checkShardMarkers(ctx context.Context, c rueidis.Client, ns string, n, upTo int) error {
	cmds := make(rueidis.Commands, upTo)
	for k := range upTo {
		cmds[k] = c.B().Get().Key(ShardKeys(ns, k).Epoch()).Build()
	}
	for k, r := range c.DoMulti(ctx, cmds...) {
		v, err := r.ToString()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			if e, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(e.Error(), "WRONGTYPE") {
				return fmt.Errorf("%w: shard %d of namespace %q is itself a sharded namespace's guard", ErrShardsMismatch, k, ns)
			}
			return err
		}
		if got, ok := markerShards(v); ok && got != n {
			return fmt.Errorf("%w: shard %d of namespace %q records %d shards, this session has %d",
				ErrShardsMismatch, k, ns, got, n)
		}
	}
	return nil
}

// MarkIntactShards marks namespace ns of n > 1 shards intact, as
// MarkIntact does an unsharded one, for tests and examples on a brand-new
// server: each shard's epoch marker is set to "0" where missing, then the
// guard is created. The guard is what tells GuardShards that the "0"s are
// a test's, not survivors of a data loss. Like MarkIntact, it changes
// nothing in a namespace in use: one with a guard (laid out already, with
// any shard count), an unsharded one, or one whose shards record another
// shard count (a session of n shards is refused there, with
// ErrShardsMismatch). Should a session of another count lay the namespace
// out meanwhile, it returns an error matching ErrShardsMismatch.
func MarkIntactShards(ctx context.Context, c rueidis.Client, ns string, n int) error {
	guard := NewKeys(ns).Epoch()
	found, _, err := runGuard(ctx, c, guard, n, guardRead)
	if err != nil || found != replyGuardMissing {
		return err
	}
	if err := checkShardMarkers(ctx, c, ns, n, MaxShards); err != nil {
		if errors.Is(err, ErrShardsMismatch) {
			return nil
		}
		return err
	}
	ks := make([]Keys, n)
	for k := range ks {
		ks[k] = ShardKeys(ns, k)
	}
	if err := MarkIntact(ctx, c, ks...); err != nil {
		return err
	}
	found, _, err = runGuard(ctx, c, guard, n, guardCreate)
	return guardErr(ns, n, found, err)
}

// ReadShards reads the shard count of namespace ns from its guard, in one
// script call that changes nothing: N for a sharded namespace, 1 when
// {ns}:epoch is an unsharded namespace's epoch marker, 0 when it is
// missing (or marked intact, "0"): a namespace no session has laid out
// yet, or whose guard Redis lost. A guard of another layout version is an
// error matching ErrShardsMismatch.
func ReadShards(ctx context.Context, c rueidis.Client, ns string) (int, error) {
	found, _, err := runGuard(ctx, c, NewKeys(ns).Epoch(), 0, guardRead)
	switch {
	case err != nil:
		return 0, err
	case found == replyGuardUnsharded:
		return 1, nil
	}
	return found, nil
}

// AssertShards re-asserts the guard of namespace ns, which a live session
// of n > 1 shards knows to be its own: it recreates a guard lost with its
// master's data, replacing an unsharded marker written meanwhile (replaced
// reports it: a session without the shard count opened in the gap, and is
// refused from now on), and returns an error matching ErrShardsMismatch
// when the guard records another shard count.
func AssertShards(ctx context.Context, c rueidis.Client, ns string, n int) (replaced bool, err error) {
	found, replaced, err := runGuard(ctx, c, NewKeys(ns).Epoch(), n, guardAssert)
	return replaced, guardErr(ns, n, found, err)
}

// The modes of shards_guard.lua.
const (
	guardRead   = "0"
	guardCreate = "1"
	guardAssert = "2"
)

// runGuard runs shards_guard.lua in mode and returns the shard count the
// guard records, 0 (replyGuardMissing) when it is missing and mode is
// guardRead, -1 (replyGuardUnsharded) when the key is an unsharded
// namespace's marker (never in mode guardAssert, which replaces it).
func runGuard(ctx context.Context, c rueidis.Client, guard string, n int, mode string) (found int, replaced bool, err error) {
	v, err := shardsGuard.Exec(ctx, c, []string{guard},
		[]string{strconv.Itoa(n), strconv.Itoa(shardLayout), mode}).AsIntSlice()
	if err != nil {
		return 0, false, err
	}
	switch {
	case len(v) == 1 && (v[0] == replyGuardMissing || v[0] == replyGuardUnsharded):
		return int(v[0]), false, nil
	case (len(v) == 3 || len(v) == 4) && v[0] == replyGuardFound:
		if v[2] != shardLayout {
			return 0, false, fmt.Errorf("%w: the guard records layout version %d, this release knows %d", ErrShardsMismatch, v[2], shardLayout)
		}
		return int(v[1]), len(v) == 4, nil
	}
	return 0, false, fmt.Errorf("%w: %v", errReply, v)
}

func guardErr(ns string, n, found int, err error) error {
	switch {
	case err != nil:
		return err
	case found == replyGuardUnsharded:
		return fmt.Errorf("%w: namespace %q is in use unsharded (its epoch marker is a string); "+
			"stop its processes and delete its keys before sharding it", ErrShardsMismatch, ns)
	case found != n:
		return fmt.Errorf("%w: namespace %q has %d shards, this session %d", ErrShardsMismatch, ns, found, n)
	}
	return nil
}

// markerShards returns the shard count an epoch marker value records: 1
// when none (see epoch_lib.lua epoch_shards). ok is false for a marker
// that records no grace either (marked intact, see MarkIntact), which the
// first session to open there records its own in (see session_open.lua),
// and for a value that is no marker.
func markerShards(v string) (n int, ok bool) {
	if !strings.Contains(v, "|") {
		return 0, false
	}
	_, _, n, ok = parseEpoch(v)
	return n, ok
}
