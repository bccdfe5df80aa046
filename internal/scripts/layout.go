package scripts

import "strings"

// The suffixes, after a pool's base (PoolBase), of the two keys of which a
// pool with members has at least one (pool_lib.lua spells them too: the
// scripts build them from the base).
const (
	poolFree = "f"
	poolHeld = "h"
)

// PoolFree is the zset {ns}:pool:<name>:f of a pool's free members.
func (k Keys) PoolFree(name string) string { return k.PoolBase(name) + poolFree }

// PoolHeld is the hash {ns}:pool:<name>:h of a pool's held members.
func (k Keys) PoolHeld(name string) string { return k.PoolBase(name) + poolHeld }

// A Listing finds the records of one kind in a namespace by their keys:
// Pattern is what SCAN matches, Name turns each key found back into the
// record's name. It is how tools that read a namespace (leasehold status,
// reset --all) list what is there without spelling key names.
//
// A Listing is a value, safe for concurrent use.
type Listing struct {
	base  string   // the start of every key listed: "{ns}:" and the kind's infix
	marks []string // when set, a key names a record only if it ends in ":" and one of these
}

// Sessions lists the sessions of the namespace by their leases
// {ns}:s:<sid>; Name returns the session id.
func (k Keys) Sessions() Listing { return Listing{base: k.Prefix + keyLease} }

// All lists every key of the namespace (its hash tag's, not a shard's);
// Name returns the key without the prefix {ns}:.
func (k Keys) All() Listing { return Listing{base: k.Prefix} }

// Jobs lists the scheduled jobs of the namespace by their records
// {ns}:job:<name> (see Keys.Job); Name returns the job's name.
func (k Keys) Jobs() Listing { return Listing{base: k.Prefix + keyJob} }

// Listing lists the resources of kind by the one key each has while it
// exists: {ns}:m:<name>, {ns}:sem:<name>, {ns}:el:<name>, {ns}:rw:<name>;
// a pool, which has several keys, by its free and held keys (PoolFree,
// PoolHeld), of which a pool with members has at least one. It panics on
// an unknown kind.
func (k Keys) Listing(kind Kind) Listing {
	s, ok := kind.spec()
	if !ok {
		panic("scripts: no listing of kind " + kind.String())
	}
	return Listing{base: k.Prefix + s.key, marks: s.listed}
}

// Pattern is the SCAN MATCH pattern of the listing's keys, the namespace
// escaped. It matches every key Name accepts, and may match others (a
// pool's other keys), which Name rejects.
func (l Listing) Pattern() string { return globEscape(l.base) + "*" }

// Name returns the name of the record whose key is key, and false when key
// is not one of the listing's. Names are never empty.
func (l Listing) Name(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, l.base)
	if !ok {
		return "", false
	}
	if l.marks == nil {
		return name, name != ""
	}
	for _, m := range l.marks {
		if n, cut := strings.CutSuffix(name, ":"+m); cut {
			return n, n != ""
		}
	}
	return "", false
}

// globEscape escapes the characters special in Redis glob patterns. It
// goes byte by byte: Redis matches bytes, and a namespace need not be
// valid UTF-8 (ranging over runes wrote U+FFFD for an invalid byte, and
// the pattern then matched none of the namespace's keys).
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
