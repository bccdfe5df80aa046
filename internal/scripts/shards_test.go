package scripts

import (
	"hash/fnv"
	"math/bits"
	"strings"
	"testing"
	"time"
)

// TestShardOfVectors: ShardOf is FNV-1a (64 bits) modulo the shard count,
// with the test vectors docs/protocol.md gives other clients.
func TestShardOfVectors(t *testing.T) {
	for _, v := range []struct {
		name string
		hash uint64
	}{{"", 0xcbf29ce484222325}, {"a", 0xaf63dc4c8601ec8c}, {"foobar", 0x85944171f73967e8}} {
		h := fnv.New64a()
		h.Write([]byte(v.name))
		if h.Sum64() != v.hash {
			t.Fatalf("fnv1a64(%q) = %x, the vector says %x", v.name, h.Sum64(), v.hash)
		}
		for _, n := range []int{2, 3, 16, 1000, MaxShards} {
			if got, want := ShardOf(v.name, n), int(v.hash%uint64(n)); got != want {
				t.Errorf("ShardOf(%q, %d) = %d, want %d", v.name, n, got, want)
			}
		}
	}
	if ShardOf("x", 1) != 0 || ShardOf("x", 0) != 0 {
		t.Error("an unsharded namespace has one shard, 0")
	}
}

// TestParseEpochShards: the marker's forms, with and without a grace and
// a shard count.
func TestParseEpochShards(t *testing.T) {
	for _, c := range []struct {
		v       string
		until   int64
		grace   time.Duration
		shards  int
		ok      bool
		counted bool // markerShards' ok
	}{
		{"0", 0, 0, 1, true, false},
		{"0|10000", 0, 10 * time.Second, 1, true, true},
		{"17|10000|16", 17, 10 * time.Second, 16, true, true},
		{"x|1", 0, 0, 0, false, false},
		{"1|2|3|4", 0, 0, 0, false, false},
	} {
		u, g, n, ok := parseEpoch(c.v)
		if ok != c.ok || (ok && (u != c.until || g != c.grace || n != c.shards)) {
			t.Errorf("parseEpoch(%q) = %d %v %d %v", c.v, u, g, n, ok)
		}
		if _, counted := markerShards(c.v); counted != c.counted {
			t.Errorf("markerShards(%q) ok = %v, want %v", c.v, counted, c.counted)
		}
	}
}

// TestShardTagsSpread: shard tags land in their slot windows, agree with
// Redis' CRC16 (the test vector of the Redis Cluster spec), and 16 shards
// of any namespace put at most 6 on one of 3 equal masters.
func TestShardTagsSpread(t *testing.T) {
	if got := Slot("123456789"); got != 0x31C3%NumSlots {
		t.Fatalf("Slot(123456789) = %d, want CRC16 0x31C3", got)
	}
	if Slot("{user1000}.following") != Slot("user1000") {
		t.Fatal("a hash tag's slot is the tag's")
	}
	// The vectors of docs/protocol.md.
	for k, want := range []string{"leasehold#0.622", "leasehold#1.419", "leasehold#2.376", "leasehold#3.1340"} {
		if got := ShardTag("leasehold", k); got != want {
			t.Errorf("ShardTag(leasehold, %d) = %q, want %q", k, got, want)
		}
	}
	for _, ns := range []string{"leasehold", "orders", "t-x-1"} {
		per := [3]int{}
		for k := range 16 {
			tag := ShardTag(ns, k)
			lo := int(bits.Reverse16(uint16(k))>>6) * 16
			if sl := Slot(tag); sl < lo || sl >= lo+16 {
				t.Fatalf("shard %d of %s: tag %q in slot %d, outside [%d, %d)", k, ns, tag, sl, lo, lo+16)
			}
			per[min(Slot(tag)*3/NumSlots, 2)]++
		}
		if m := max(per[0], per[1], per[2]); m > 6 {
			t.Errorf("%s: 16 shards over 3 equal masters: %v", ns, per)
		}
	}
	if ShardKeys("ns", 3).Prefix != "{"+ShardTag("ns", 3)+"}:" || !strings.HasPrefix(ShardTag("ns", 3), "ns#3.") {
		t.Errorf("ShardKeys(ns, 3) = %q", ShardKeys("ns", 3).Prefix)
	}
}

// TestCopyID: a lease copy's id and the session it belongs to.
func TestCopyID(t *testing.T) {
	for _, c := range []struct {
		sid string
		g   int
	}{{"0123456789abcdef", 0}, {"0123456789abcdef", 1}, {"0123456789abcdef", 12}} {
		id := CopyID(c.sid, c.g)
		if got := CopyOf(id); got != c.sid {
			t.Errorf("CopyOf(CopyID(%q, %d) = %q) = %q", c.sid, c.g, id, got)
		}
	}
	for _, id := range []string{"abc-0", "abc-x", "-3", "abc-01"} {
		if got := CopyOf(id); got != id {
			t.Errorf("CopyOf(%q) = %q, want it unchanged", id, got)
		}
	}
}
