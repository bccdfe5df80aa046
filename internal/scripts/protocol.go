package scripts

import (
	"regexp"
	"strconv"
	"strings"
)

// The protocol between the Go code and the scripts, named once: hold ids
// here, key names in keys.go, reply codes below. common.lua mirrors the hold
// id (sid_of) and the key layout for the scripts.

// HoldID returns the id of session sid's n-th hold: "<sid>.<n in base 36>".
// A hold id names its session, so scripts find the holder's lease from it.
func HoldID(sid string, n uint64) string {
	return sid + "." + strconv.FormatUint(n, 36)
}

// SessionOf returns the session id in hold id hid (sid_of in common.lua).
func SessionOf(hid string) string {
	sid, _, _ := strings.Cut(hid, ".")
	return sid
}

// CopyID returns the id of a sharded session's lease copy in a shard
// (lease.Group): the session's own id sid for the shard's first copy,
// "<sid>-<g>" for the g-th that replaced one that ended (a new id, since
// withdrawn hold ids die with the old copy's lease).
func CopyID(sid string, g int) string {
	if g == 0 {
		return sid
	}
	return sid + "-" + strconv.Itoa(g)
}

// CopyOf returns the session id of lease copy id (CopyID's inverse): id
// itself unless it ends in "-<g>", g >= 1. Only meaningful in a sharded
// namespace: an unsharded session's id has no such suffix (16 hex digits).
func CopyOf(id string) string {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 {
		return id
	}
	if g, err := strconv.Atoi(id[i+1:]); err != nil || g < 1 || strconv.Itoa(g) != id[i+1:] {
		return id
	}
	return id[:i]
}

// holdSID is the Lua pattern that reads the session id out of a hold id
// (SessionOf's rule): the scripts' P_HOLD_SID, which sid_of and the fast
// paths (where a call of sid_of would cost a closure) match with.
const holdSID = `^([^.]+)%.`

// Reply codes: the first element of a script's array reply, or the whole
// reply of a release. The scripts name them as Lua locals that join
// declares from these constants (protocolConsts).
const (
	replyGranted        = 1   // acquire: {1, token[, resource]}
	replyBusy           = 0   // acquire: {0, wait ms, queue position or -1}
	replyLeaseGone      = -1  // acquire: the caller's own lease no longer exists
	replyLimitMismatch  = -2  // semaphore acquire: {-2, stored limit}
	replyNotMember      = -3  // pool acquire {-3}, pool members {-3, key}
	replyEpochMissing   = -5  // the epoch marker is gone: recreate it, retry once
	replyNotReclaimable = -6  // reclaim: the lease was lost outside a restart grace
	replyWithdrawn      = -7  // acquire: the hold id was withdrawn for good
	replyGrace          = -8  // acquire without queueing, not granted during a restart grace: {-8, grace ms left}
	replySlow           = -9  // a batch script's reply for one call its fast path does not cover (see batch.go)
	replyGraceMismatch  = -10 // session open: {-10, the namespace's restart grace ms}
	replyShardsMismatch = -11 // session open: {-11, the namespace's shard count, 0 for a sharded namespace's guard}
)

// Heartbeat replies: {1, key codes, replication id, server ms, revoked hold
// ids...}, {0} or {2}.
const (
	replyRenewed     = 1
	replyGone        = 0
	replyReclaimable = 2
)

// Reclaim's reply when the lease still exists, so nothing was to reclaim:
// {0} (else {1, lost hold ids...} after a reclaim, {-5} or {-6}).
const (
	replyReclaimed   = 0
	replyReclaimLost = 1
)

// Session open: {1, grace, replication id} when the lease was created, {0}
// when the id is taken, {-5} when the epoch marker is missing, {-10, grace}
// when the session does not fit the namespace's restart grace.
const (
	replyOpened  = 1
	replyIDTaken = 0
)

// The guard of a sharded namespace (shards_guard.lua): {1, shards,
// version}, {0} or {-1}.
const (
	replyGuardFound     = 1
	replyGuardMissing   = 0
	replyGuardUnsharded = -1
)

// protocolConsts are the reply codes above, the release outcomes and the
// key infixes of keys.go, as the scripts name them: the scripts return
// {R_GRANTED, token}, not {1, token}, and build a lease key as p .. K_LEASE
// .. sid, so that Go and Lua name each once. join declares, as Lua locals,
// the ones each part of a script uses (protocolLocals).
// TestLuaNamesDeclared checks that every such name a script uses is here,
// since Lua reads an undeclared one as nil.
var protocolConsts = []luaConst{
	{"R_GRANTED", replyGranted},
	{"R_BUSY", replyBusy},
	{"R_LEASE_GONE", replyLeaseGone},
	{"R_LIMIT_MISMATCH", replyLimitMismatch},
	{"R_NOT_MEMBER", replyNotMember},
	{"R_EPOCH_MISSING", replyEpochMissing},
	{"R_NOT_RECLAIMABLE", replyNotReclaimable},
	{"R_WITHDRAWN", replyWithdrawn},
	{"R_GRACE", replyGrace},
	{"R_SLOW", replySlow},
	{"R_GRACE_MISMATCH", replyGraceMismatch},
	{"R_SHARDS_MISMATCH", replyShardsMismatch},
	{"HB_RENEWED", replyRenewed},
	{"HB_GONE", replyGone},
	{"HB_RECLAIMABLE", replyReclaimable},
	{"RECLAIM_NONE", replyReclaimed},
	{"RECLAIM_LOST", replyReclaimLost},
	{"GUARD_FOUND", replyGuardFound},
	{"GUARD_MISSING", replyGuardMissing},
	{"GUARD_UNSHARDED", replyGuardUnsharded},
	{"OPEN_CREATED", replyOpened},
	{"OPEN_TAKEN", replyIDTaken},
	{"REL_NOT_FOUND", int(NotFound)},
	{"REL_FREED", int(Freed)},
	{"REL_DEQUEUED", int(Dequeued)},
	{"K_LEASE", keyLease},
	{"K_CHANNEL", keyChannel},
	{"K_EPOCH", keyEpoch},
	{"K_MUTEX", keyMutex},
	{"K_QUEUE", keyQueue},
	{"K_SEMAPHORE", keySemaphore},
	{"K_SEMAPHORE_HOLDERS", keySemaphoreHolders},
	{"K_POOL", keyPool},
	{"K_POOL_INDEX", keyPoolIndex},
	{"K_ELECTION", keyElection},
	{"K_RWMUTEX", keyRWMutex},
	{"K_RWMUTEX_READERS", keyRWMutexReaders},
	{"P_HOLD_SID", holdSID},
}

// luaProtocolName matches the names of protocolConsts in a script.
var luaProtocolName = regexp.MustCompile(`\b(?:R|HB|REL|RECLAIM|OPEN|GUARD|K|P)_[A-Z_]+\b`)

// protocolLocals returns one Lua statement declaring the protocolConsts
// that text names and declared does not hold yet, and adds them to
// declared. Declaring only those keeps every call of a fast path from
// setting the thirty-odd locals it does not read.
func protocolLocals(text string, declared map[string]bool) string {
	used := map[string]bool{}
	for _, n := range luaProtocolName.FindAllString(text, -1) {
		used[n] = true
	}
	var cs []luaConst
	for _, c := range protocolConsts {
		if used[c.name] && !declared[c.name] {
			cs = append(cs, c)
			declared[c.name] = true
		}
	}
	if len(cs) == 0 {
		return ""
	}
	return luaLocals(cs)
}

// luaConst is one of protocolConsts: an int or a string.
type luaConst struct {
	name string
	v    any
}

// luaLocals returns one Lua statement declaring cs as locals.
func luaLocals(cs []luaConst) string {
	names := make([]string, len(cs))
	vals := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.name
		switch v := c.v.(type) {
		case int:
			vals[i] = strconv.Itoa(v)
		case string:
			vals[i] = strconv.Quote(v) // plain ASCII, no backslash: Go's quoting is Lua's
		default:
			panic("scripts: Lua constant " + c.name + " of unsupported type")
		}
	}
	return "local " + strings.Join(names, ", ") + " = " + strings.Join(vals, ", ") + "\n"
}
