package scripts

import (
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

// Reply codes: the first element of a script's array reply (the scripts
// return them as bare numbers; see common.lua).
const (
	replyGranted        = 1  // acquire: {1, token[, resource]}
	replyBusy           = 0  // acquire: {0, wait ms, queue position or -1}
	replyLeaseGone      = -1 // acquire: the caller's own lease no longer exists
	replyLimitMismatch  = -2 // semaphore acquire: {-2, stored limit}
	replyNotMember      = -3 // pool acquire {-3}, pool members {-3, key}
	replyEpochMissing   = -5 // the epoch marker is gone: recreate it, retry once
	replyNotReclaimable = -6 // reclaim: the lease was lost outside a restart grace
	replyWithdrawn      = -7 // acquire: the hold id was withdrawn for good
	replyGrace          = -8 // acquire without queueing, not granted during a restart grace: {-8, grace ms left}
)

// Heartbeat replies: {1, revoked hold ids...}, {0} or {2}.
const (
	replyRenewed     = 1
	replyGone        = 0
	replyReclaimable = 2
)

// Reclaim's reply when every hold came back: {0} (else {1, lost hold ids...}).
const replyReclaimed = 0
