// Package scripts holds leasehold's Lua scripts and the typed Go functions that
// run them. Callers never see raw replies.
//
// Each script lives in its own <name>.lua file with a header naming its KEYS,
// ARGV and reply. A file names the files it uses with a line
// "--@include <file>.lua", which join replaces by that file's text at init
// (recursively, indented as the line; a file goes into a script at most
// once, a later line naming it is dropped; a name that is no file panics).
// common.lua holds helpers that go first in every script, or at a line
// "--@helpers" when the script has one: code above that line runs before
// the helpers exist, which makes a fast path cheaper (every helper is a
// closure Redis creates on every call); such a script gets the few helpers
// of fastpath.lua first, as do the batch scripts, which are all fast path
// (fastOnly). Code shared by a fast path and a batch script is either
// functions that go above "--@helpers" (semaphore_fast.lua,
// pool_acquire_fast.lua, pool_release_fast.lua) or, where a call would
// cost the hot path, statement text included where it runs: the single
// script's top level, the batch script's loop (mutex_acquire_fast.lua,
// mutex_release_fast.lua). testdata/assembled
// holds every script as Redis runs it (TestGolden). No script text is ever
// built from input, every varying value goes through KEYS or ARGV.
// docs/protocol.md specifies the keys, values, scripts and replies.
//
// What the hot paths avoid, each measured in redis-server instructions
// (docs/performance.md): a Lua number as an argument of redis.call (Redis
// formats it with snprintf; constants are written as strings, and
// TestNoNumberLiterals keeps them so), tonumber of a token (a strtod:
// new_token.lua compares tokens as strings), a key or argument the script
// does not read (Redis builds a Lua string of each on every call), and a
// string function call where one match with captures does.
//
// Validity model: a hold is valid while the resource records its hold id and
// the lease of the session in that id exists. Renewing the lease renews
// every hold of the session; their keys, which expire later than the
// lease, need renewing only every few heartbeats (heartbeat.lua: O(1 +
// revoked + keys)). A grant checks the current holder's lease and treats a
// holder whose lease is gone as absent.
package scripts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/conn"
)

// script builds the script of Lua file name (see join).
func script(name string) *Script {
	return newScript(join(luaFile(name)), false)
}

// readOnly is script for a script that only reads (EVALSHA_RO).
func readOnly(name string) *Script {
	return newScript(join(luaFile(name)), true)
}

// helpersMark is the line of a script where the helpers go.
const helpersMark = "\n--@helpers\n"

// join assembles the text Redis runs from a script's file, body: common.lua
// first, or, when body has a "--@helpers" line, fastpath.lua first and
// common.lua at that line; then the include directives resolved (see
// expand), and each part preceded by the protocol names it uses (see
// protocolLocals).
func join(body string) string {
	seen, declared := map[string]bool{}, map[string]bool{}
	if before, after, ok := strings.Cut(body, helpersMark); ok {
		fast := expand("--@include fastpath.lua\n"+before+"\n", seen)
		rest := expand("--@include common.lua\n"+after, seen)
		return protocolLocals(fast, declared) + fast + protocolLocals(rest, declared) + rest
	}
	all := expand("--@include common.lua\n"+body, seen)
	return protocolLocals(all, declared) + all
}

var (
	sessionOpen  = script("session_open.lua")
	heartbeat    = unprobed(script("heartbeat.lua"))
	sessionClose = script("session_close.lua")
	mutexAcquire = script("mutex_acquire.lua")
	mutexRelease = script("mutex_release.lua")
	mutexReset   = script("mutex_reset.lua")
	mutexInspect = readOnly("mutex_inspect.lua")
	epochInit    = script("epoch_init.lua")
	reclaim      = script("reclaim.lua")
	verify       = script("verify.lua")
)

// Errors the scripts report; the primitives re-export them under their names.
var (
	// ErrBusy reports that a resource could not be granted without waiting.
	ErrBusy = errors.New("resource busy")
	// ErrLimitMismatch: the semaphore's stored limit differs from the caller's.
	ErrLimitMismatch = errors.New("scripts: semaphore limit mismatch")
	// ErrNotMember: the pool member named is not in the pool.
	ErrNotMember = errors.New("scripts: not a pool member")
)

// errReply reports a reply whose shape no script produces.
var errReply = errors.New("leasehold: unexpected script reply")

// Resource names one thing a session can hold or wait for.
type Resource struct {
	Kind  Kind
	Name  string // the primitive's name
	N     int64  // semaphore: permits wanted
	Limit int64  // semaphore: the caller's limit
	Key   string // pool: the member wanted, "" for any
	Value string // election: the candidate's value
	// Shared is set for a read (shared) hold of a read-write mutex, unset
	// for a write (exclusive) one.
	Shared bool
}

// Value is an election leader's value as lease.Hold.SetValue takes it. A
// type of its own marks the method as leasehold's: users cannot name it (an
// untyped string constant still converts to it).
type Value string

// Env is what every script call needs: a client, the namespace's keys and the
// pub/sub flavour.
type Env struct {
	C          rueidis.Client
	K          Keys
	Sharded    bool          // SPUBLISH (Redis Cluster) rather than PUBLISH
	Grace      time.Duration // the session's restart grace (see InitEpoch)
	Acks       int           // replicas that must acknowledge grants and heartbeats (WAIT)
	AckTimeout time.Duration // WAIT timeout
	Log        *slog.Logger  // nil: no logs
	LockDelay  time.Duration // the session's Options.LockDelay
	TTL        time.Duration // the session's Options.TTL; 0 for the default, 10 s
	// Shards is the namespace's shard count, recorded in the epoch marker
	// of each shard (0 or 1: unsharded, K is the namespace's; above 1: K
	// is one shard's, see ShardKeys). Guard, when set, runs before a
	// shard's epoch marker is recreated (see InitEpoch and GuardShards).
	Shards int
	Guard  func(context.Context) error

	// graceSeen is the longest restart grace (ms) the session found
	// recorded for the namespace (set by Prepared; see InitEpoch).
	graceSeen *atomic.Int64
	mutexTail string   // formatMutexOpts, formatted once by Prepared; "" until then
	batch     *batches // set by Prepared: overlapping calls of a kind share one script call (batch.go)
}

// Prepared returns e with what every call would otherwise format again
// (the mutex acquire's options) formatted once: Env values built for a
// session's life go through it.
//
// Prepared also gives e the batchers that send a session's overlapping
// acquires (and releases) of a kind with batch scripts as one script call
// (see batch.go): one Env value and its copies are one session's.
func (e Env) Prepared() Env {
	e.mutexTail = e.formatMutexOpts()
	e.graceSeen = new(atomic.Int64)
	e.batch = newBatches(e)
	return e
}

// seeGrace records that the namespace's restart grace is d, as recorded in
// its epoch marker (see session_open.lua) and read by an open or a reclaim.
func (e Env) seeGrace(d time.Duration) {
	if e.graceSeen == nil {
		return
	}
	for {
		old := e.graceSeen.Load()
		if d.Milliseconds() <= old || e.graceSeen.CompareAndSwap(old, d.Milliseconds()) {
			return
		}
	}
}

// grace is the restart grace to impose after a data loss: the session's
// own, or the namespace's it found recorded when longer. The namespace's
// grace only grows (a session whose grace is shorter is refused at open),
// and every session alive at a loss either reclaimed through the previous
// one, which told it the grace then recorded, or opened after it: so the
// grace it sets covers every TTL the namespace accepted.
func (e Env) grace() time.Duration {
	g := e.Grace
	if e.graceSeen != nil {
		g = max(g, time.Duration(e.graceSeen.Load())*time.Millisecond)
	}
	return g
}

// mutexOpts is the tail of a mutex acquire's options: "<held ms>|<lock
// delay ms>|<idle ms>" (see mutex_acquire.lua), so that its fast path
// formats and parses no number: 2 x TTL + LockDelay, LockDelay, 2 x TTL.
func (e Env) mutexOpts() string {
	if e.mutexTail != "" {
		return e.mutexTail
	}
	return e.formatMutexOpts()
}

func (e Env) formatMutexOpts() string {
	ttl := e.TTL
	if ttl == 0 {
		ttl = 10 * time.Second
	}
	return ms(2*ttl+e.LockDelay) + "|" + ms(e.LockDelay) + "|" + ms(2*ttl)
}

func (e Env) sharded() string {
	if e.Sharded {
		return "1"
	}
	return "0"
}

// Status is the outcome of an acquire attempt.
type Status int8

// Acquire outcomes.
const (
	Withdrawn    Status = replyWithdrawn    // the hold id was withdrawn for good (a late or repeated attempt)
	epochMissing Status = replyEpochMissing // handled inside Env: the marker is recreated and the call retried
	LeaseGone    Status = replyLeaseGone    // the caller's own lease no longer exists
	Grace        Status = replyGrace        // not granted, during a restart grace; only when the caller did not ask to wait
	Busy         Status = replyBusy         // not granted; queued when the caller asked to wait
	Granted      Status = replyGranted
)

// Grant is the reply of an acquire attempt.
type Grant struct {
	Status   Status
	Token    int64         // when Granted
	Resource string        // when Granted: what Hold.Resource reports
	Wait     time.Duration // when Busy: a hint for the fallback re-check; when Grace: the grace left
	Position int64         // when Busy and queued: 0-based queue position, else -1
}

// Acquire tries to grant r to hold id hid. With wait, a busy resource queues
// hid FIFO; the grant may later arrive as a notification "g|hid|token|resource"
// on the session's channel. Without wait, a resource not granted during a
// restart grace is reported as Grace rather than Busy. Acquire is idempotent
// per hid.
func (e Env) Acquire(ctx context.Context, r Resource, hid string, wait bool) (Grant, error) {
	dl, _ := ctx.Deadline()
	return e.AcquireUntil(ctx, dl, r, hid, wait, false)
}

// AcquireUntil is Acquire with the call's deadline dl given apart from ctx,
// which need not carry it (zero: none): a mutex call that goes with a
// batch (see batch.go) then needs no timer of its own. ctx's end still
// returns the call at once. first tells that hid has never been sent
// before (no attempt of it, not even one whose reply was lost): a waiting
// attempt then need not look for hid in the queue. Pass false when in
// doubt: an attempt that said first and ran, sent again with first, would
// queue hid twice. (Env itself sends a call again only when Redis refused
// it before running it: NOSCRIPT, and the transient errors of retry.)
func (e Env) AcquireUntil(ctx context.Context, dl time.Time, r Resource, hid string, wait, first bool) (Grant, error) {
	a := kindCall{r: r, hid: hid, wait: wait, first: first}
	if b := e.batchers(r); b != nil {
		res, err := b.acquire.Do(ctx, dl, a)
		if err != nil {
			return Grant{}, err
		}
		if !res.slow {
			return res.g, res.err
		}
	}
	ctx, cancel := conn.Until(ctx, dl)
	defer cancel()
	return e.acquireCall(ctx, a)
}

// acquireCall is attempt a with the resource's own script. A reply
// R_EPOCH_MISSING, which retryEpoch answers by sending a again, comes
// before the script writes anything: a first attempt is still one the
// second time.
func (e Env) acquireCall(ctx context.Context, a kindCall) (Grant, error) {
	r, hid := a.r, a.hid
	k, ok := r.Kind.spec()
	if !ok {
		return Grant{}, fmt.Errorf("scripts: acquire of unknown kind %v", r.Kind)
	}
	x := k.acquire(e, r, hid, a.queue(k))
	return retryEpoch(ctx, e, func() (Grant, bool, error) {
		res, werr := e.execWait(ctx, x.s, x.keys, x.args)
		m, err := res.ToMessage()
		if err != nil {
			return Grant{}, false, err
		}
		g, err := parseAcquire(&m, r.Name)
		if err != nil {
			return g, false, err
		}
		if g.Status == Granted && werr != nil {
			return g, false, werr // not replicated: the caller rolls the grant back
		}
		return g, g.Status == epochMissing, nil
	})
}

// retryEpoch runs call, which reports whether its script found the epoch
// marker missing (R_EPOCH_MISSING: Redis lost its data, or the namespace
// is new); then it recreates the marker (see InitEpoch) and runs call once
// more. A marker missing again is an error: something deletes it.
func retryEpoch[T any](ctx context.Context, e Env, call func() (v T, missing bool, err error)) (T, error) {
	v, missing, err := call()
	if err != nil || !missing {
		return v, err
	}
	var zero T
	if err := e.InitEpoch(ctx); err != nil {
		return zero, err
	}
	if v, missing, err = call(); err == nil && missing {
		return zero, fmt.Errorf("%w: epoch marker missing again", errReply)
	}
	return v, err
}

// InitEpoch recreates the epoch marker after Redis lost its data: grants are
// refused for the restart grace from now (see epoch_init.lua), the
// session's own or the namespace's it knows of, whichever is longer.
//
// In a shard of a sharded namespace, Guard checks first that the namespace
// still has the session's shard count: a marker is recreated only where no
// session of another layout can have established itself. An unsharded
// session checks the markers of the first shards (probeShards) for the
// same reason: a sharded namespace whose guard was lost with its master's
// data (the guard is where an unsharded session's marker would be) still
// has holders in its shards, on other masters, and the guard's re-assert
// by a live sharded session may be a heartbeat interval away.
func (e Env) InitEpoch(ctx context.Context) error {
	switch {
	case e.Shards > 1 && e.Guard != nil:
		if err := e.Guard(ctx); err != nil {
			return err
		}
	case e.Shards <= 1:
		err := checkShardMarkers(ctx, e.C, e.K.Namespace(), 1, probeShards)
		if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "NOPERM") {
			// An ACL user limited to the namespace's own keys (~{ns}:*,
			// as scripts.ACLCommands documents) cannot read the shards'
			// and goes on as before the check (see docs/design.md).
			err = nil
		}
		if err != nil {
			return err
		}
	}
	left, err := epochInit.Exec(ctx, e.C, []string{e.K.Epoch()},
		[]string{ms(e.grace()), strconv.Itoa(e.shards())}).AsInt64()
	if err == nil && left > 0 && e.Log != nil {
		where := []any{"namespace", e.K.Namespace()}
		if ns, k, ok := e.K.Shard(); ok {
			where = []any{"namespace", ns, "shard", k}
		}
		e.Log.Warn("namespace data missing (Redis lost its data, or the namespace is new): "+
			"grants wait out the restart grace", append(where, "grace_left", time.Duration(left)*time.Millisecond)...)
	}
	return err
}

// parseAcquire reads one acquire reply: a grant of resource name on a fast
// path comes as its bare token, an integer or its decimal string (see
// new_token.lua), which spares Redis a table and its conversion
// (docs/protocol.md, "Reply codes"); every other reply is an array parseGrant
// reads.
func parseAcquire(m *rueidis.RedisMessage, name string) (Grant, error) {
	if !m.IsArray() {
		// A token is a positive integer: a bare status code, should a
		// script ever answer one, is no grant.
		tok, err := m.AsInt64()
		if err != nil || tok <= 0 {
			return Grant{}, fmt.Errorf("%w: not a token: %v, %v", errReply, m, err)
		}
		return Grant{Status: Granted, Token: tok, Resource: name}, nil
	}
	v, _ := m.ToArray()
	return parseGrant(v, name)
}

// parseGrant reads the array reply shared by every acquire script:
// integers (a token may come as its decimal string, see new_token.lua),
// but for a grant's resource (a pool member), a string third.
func parseGrant(v []rueidis.RedisMessage, name string) (Grant, error) {
	ints := make([]int64, 0, 3)
	resource := name
	for i, m := range v {
		if i == 2 && m.IsString() {
			resource, _ = m.ToString()
			continue
		}
		n, err := m.AsInt64()
		if err != nil {
			return Grant{}, fmt.Errorf("%w: %v", errReply, err)
		}
		ints = append(ints, n)
	}
	if len(ints) == 0 {
		return Grant{}, fmt.Errorf("%w: %v", errReply, v)
	}
	g, n, err := grantOf(ints, resource)
	if n != len(ints) {
		return Grant{}, fmt.Errorf("%w: %v", errReply, v)
	}
	return g, err
}

// grantOf reads an acquire reply of integers ints (resource: the grant's
// resource) by its code, ints[0], and returns how many integers a reply
// with that code has (-1: an unknown code).
func grantOf(ints []int64, resource string) (g Grant, n int, err error) {
	arg := func(i int) int64 {
		if i < len(ints) {
			return ints[i]
		}
		return 0
	}
	wait := time.Duration(max(arg(1), 0)) * time.Millisecond
	switch ints[0] {
	case replyLeaseGone:
		return Grant{Status: LeaseGone}, 1, nil
	case replyEpochMissing:
		return Grant{Status: epochMissing}, 1, nil
	case replyWithdrawn:
		return Grant{Status: Withdrawn}, 1, nil
	case replyNotMember:
		return Grant{}, 1, ErrNotMember
	case replyGrace:
		return Grant{Status: Grace, Wait: wait}, 2, nil
	case replyLimitMismatch:
		return Grant{}, 2, fmt.Errorf("%w: stored limit is %d", ErrLimitMismatch, arg(1))
	case replyGranted:
		return Grant{Status: Granted, Token: arg(1), Resource: resource}, 2, nil
	case replyBusy:
		return Grant{Status: Busy, Wait: wait, Position: arg(2)}, 3, nil
	}
	return Grant{}, -1, nil
}

// Released is the outcome of a release.
type Released int8

// Release outcomes.
const (
	NotFound Released = 0 // neither held nor queued: released before, or taken away
	Freed    Released = 1 // it was held and is released (handed to the next waiter)
	Dequeued Released = 2 // it was only queued and is withdrawn
)

// Release releases r held by hid, or withdraws hid from r's queue.
// It is idempotent and never touches a grant of another hold id. With
// withdraw, hid can never be granted or queued again: use it whenever an
// acquire attempt for hid may still arrive (one failed with an unknown
// outcome), so that a late attempt cannot grant a resource nobody waits for.
//
// With Acks, the release is followed by WAIT in the same round trip; too few
// acknowledgements return ErrNotReplicated: the release happened but a
// failover could undo it, so the caller should retry it (it is idempotent)
// until acknowledged.
func (e Env) Release(ctx context.Context, r Resource, hid string, withdraw bool) (Released, error) {
	dl, _ := ctx.Deadline()
	return e.ReleaseUntil(ctx, dl, r, hid, withdraw)
}

// ReleaseUntil is Release with the call's deadline dl given apart from ctx
// (see AcquireUntil).
func (e Env) ReleaseUntil(ctx context.Context, dl time.Time, r Resource, hid string, withdraw bool) (Released, error) {
	if b := e.batchers(r); b != nil && b.release != nil && !withdraw && !r.Kind.mustSpec().alone(r) {
		res, err := b.release.Do(ctx, dl, kindCall{r: r, hid: hid})
		if err != nil {
			return 0, err
		}
		if !res.slow {
			return res.r, res.err
		}
	}
	ctx, cancel := conn.Until(ctx, dl)
	defer cancel()
	return e.release(ctx, r, hid, withdraw)
}

// release is Release with the resource's own script.
func (e Env) release(ctx context.Context, r Resource, hid string, withdraw bool) (Released, error) {
	x := e.releaseCmd(r, hid, withdraw)
	res, werr := e.execWait(ctx, x.s, x.keys, x.args)
	v, err := res.AsInt64()
	if err != nil {
		return 0, err
	}
	return Released(v), werr
}

type execer struct {
	s    *Script
	keys []string
	args []string
}

func (x execer) Exec(ctx context.Context, c rueidis.Client) rueidis.RedisResult {
	return x.s.Exec(ctx, c, x.keys, x.args)
}

func (e Env) releaseCmd(r Resource, hid string, withdraw bool) execer {
	return r.Kind.mustSpec().release(e, r, hid, oneIf(withdraw))
}

// ReleaseMulti releases many holds in one round trip, withdrawing their hold
// ids for good (see Release): it serves the releases whose outcome, or whose
// acquire's outcome, is unknown. errs[i] is the error of holds[i], nil on
// success; with Acks, a WAIT closes the pipeline and too few
// acknowledgements make every release report ErrNotReplicated.
func (e Env) ReleaseMulti(ctx context.Context, rs []Resource, hids []string) []error {
	calls := make([]call, len(rs))
	for i := range rs {
		x := e.releaseCmd(rs[i], hids[i], true)
		calls[i] = call{x.s, x.s.keysFor(e.C, x.keys), x.args}
	}
	wait := e.Acks > 0
	res := e.pipeline(ctx, calls, wait)
	var werr error
	if wait {
		werr = e.acked(res[len(calls)])
	}
	errs := make([]error, len(rs))
	for i := range calls {
		if errs[i] = res[i].Error(); errs[i] == nil {
			errs[i] = werr
		}
	}
	return errs
}

// ErrGraceMismatch reports that a session does not fit the restart grace
// recorded for its namespace (see session_open.lua).
var ErrGraceMismatch = errors.New("the session does not fit the namespace's restart grace")

// OpenLease creates the lease of session sid and returns the server's
// replication id ("" when unknown, see epoch_lib.lua). It reports false when
// the id is taken, and an error matching ErrGraceMismatch, with the
// namespace's grace, when the session's TTL or restart grace does not fit
// it. A missing epoch marker is recreated first (see InitEpoch).
func (e Env) OpenLease(ctx context.Context, sid, owner string, ttl, lockDelay time.Duration) (bool, string, error) {
	type opened struct {
		ok     bool
		replID string
	}
	o, err := retryEpoch(ctx, e, func() (opened, bool, error) {
		v, err := sessionOpen.Exec(ctx, e.C, []string{e.K.Lease(sid)},
			[]string{owner, ms(ttl), ms(lockDelay), e.K.Prefix, ms(e.Grace), strconv.Itoa(e.shards())}).ToArray()
		if err != nil {
			return opened{}, false, err
		}
		var code, g int64
		if len(v) == 0 || num(v[0], &code) != nil {
			return opened{}, false, errReply
		}
		switch code {
		case replyIDTaken:
			return opened{}, false, nil
		case replyEpochMissing:
			return opened{}, true, nil
		case replyShardsMismatch:
			if len(v) != 2 || num(v[1], &g) != nil {
				return opened{}, false, errReply
			}
			if g == 0 {
				return opened{}, false, fmt.Errorf("%w: %s is sharded (see Options.Shards)", ErrShardsMismatch, e.K.Describe())
			}
			return opened{}, false, fmt.Errorf("%w: %s records %d shards, this session has %d",
				ErrShardsMismatch, e.K.Describe(), g, e.shards())
		case replyGraceMismatch:
			if len(v) != 2 || num(v[1], &g) != nil {
				return opened{}, false, errReply
			}
			return opened{}, false, fmt.Errorf("%w: %s records a restart grace of %v, and every session of it must have a TTL no longer than that and a RestartGrace no shorter (this one: TTL %v, RestartGrace %v)",
				ErrGraceMismatch, e.K.Describe(), time.Duration(g)*time.Millisecond, ttl, e.Grace)
		case replyOpened:
			var replID string
			if len(v) != 3 || firstErr(num(v[1], &g), str(v[2], &replID)) != nil {
				return opened{}, false, errReply
			}
			e.seeGrace(time.Duration(g) * time.Millisecond)
			return opened{true, replID}, false, nil
		}
		return opened{}, false, errReply
	})
	return o.ok, o.replID, err
}

// LeaseState is the state of a lease as Heartbeat reports it.
type LeaseState int8

// Lease states reported by Heartbeat.
const (
	Renewed     LeaseState = replyRenewed     // the lease was renewed
	Gone        LeaseState = replyGone        // the lease no longer exists: the session is lost
	Reclaimable LeaseState = replyReclaimable // the lease is gone because Redis lost its data, within the restart grace
)

// Beat is what a heartbeat reports.
type Beat struct {
	State LeaseState
	// When renewed: the hold ids taken away from the session that are not
	// acknowledged yet; for each key to keep whether it now lives at least
	// keepFor (KeyKept), is missing (KeyMissing) or was refused (KeyRefused,
	// as on a node the slot is migrating from); the server's replication id
	// ("" when unknown, see epoch_lib.lua) and its clock (Unix ms).
	Revoked  []string
	Keys     []KeyState
	ReplID   string
	ServerMs int64
}

// Heartbeat renews the lease of session sid for ttl, forgetting the revoked
// hold ids in acked, and keeps the keys in keep alive for at least keepFor
// (see heartbeat.lua).
func (e Env) Heartbeat(ctx context.Context, sid string, ttl time.Duration, acked, keep []string, keepFor time.Duration) (Beat, error) {
	args := make([]string, 0, 4+len(acked)+len(keep))
	args = append(args, ms(ttl), e.K.Prefix, ms(keepFor), strconv.Itoa(len(acked)))
	args = append(args, acked...)
	args = append(args, keep...)
	return retryEpoch(ctx, e, func() (Beat, bool, error) {
		res, err := e.execWait(ctx, heartbeat, []string{e.K.Lease(sid)}, args)
		if err != nil {
			return Beat{}, false, err
		}
		v, err := res.ToArray()
		if err != nil {
			return Beat{}, false, err
		}
		if len(v) == 0 {
			return Beat{}, false, errReply
		}
		status, err := v[0].AsInt64()
		if err != nil {
			return Beat{}, false, err
		}
		switch status {
		case replyEpochMissing:
			return Beat{}, true, nil
		case replyGone, replyReclaimable:
			return Beat{State: LeaseState(status)}, false, nil
		}
		b, err := parseBeat(v, len(keep))
		return b, false, err
	})
}

// parseBeat reads the reply of a heartbeat that renewed the lease, with
// nkeep keys to keep: {1, "k" .. key codes, replication id, server ms,
// revoked hold ids...}.
func parseBeat(v []rueidis.RedisMessage, nkeep int) (Beat, error) {
	if len(v) < 4 {
		return Beat{}, errReply
	}
	codes, err := v[1].ToString()
	codes, ok := strings.CutPrefix(codes, "k")
	if err != nil || !ok || len(codes) != nkeep {
		return Beat{}, fmt.Errorf("%w: %d key states for %d keys", errReply, len(codes), nkeep)
	}
	states := make([]KeyState, len(codes))
	for i := range len(codes) {
		states[i] = KeyState(codes[i])
	}
	out := Beat{State: Renewed, Keys: states}
	if err := firstErr(str(v[2], &out.ReplID), num(v[3], &out.ServerMs)); err != nil {
		return Beat{}, err
	}
	if out.Revoked, err = strs(v[4:]); err != nil {
		return Beat{}, err
	}
	return out, nil
}

// strs reads a list of strings.
func strs(v []rueidis.RedisMessage) ([]string, error) {
	out := make([]string, 0, len(v))
	for _, m := range v {
		s, err := m.ToString()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// KeyState is what a heartbeat did with a key it was asked to keep alive.
type KeyState byte

// Key states reported by Heartbeat.
const (
	KeyKept    KeyState = '1' // it lives at least as long as asked, or has no expiry
	KeyMissing KeyState = '0' // it does not exist
	KeyRefused KeyState = 'e' // Redis refused to touch it
)

// Held is a hold to reclaim.
type Held struct {
	R      Resource
	HoldID string
	Token  int64
	Member string // pool: the member held
}

// ErrNotReclaimable reports that the lease was lost outside a restart grace.
var ErrNotReclaimable = errors.New("the lease was lost outside a restart grace")

// extra is the per-kind argument of reclaim.lua and verify.lua for h.
func (h Held) extra() string {
	if x := h.R.Kind.mustSpec().extra; x != nil {
		return x(h)
	}
	return ""
}

// Verify returns the hold ids of holds that Redis no longer records for
// session sid (see verify.lua): a failover lost their grants.
func (e Env) Verify(ctx context.Context, sid string, holds []Held) ([]string, error) {
	args := make([]string, 0, 1+4*len(holds))
	args = append(args, e.K.Prefix)
	for _, h := range holds {
		args = append(args, h.R.Kind.short(), h.R.Name, h.HoldID, h.extra())
	}
	return verify.Exec(ctx, e.C, []string{e.K.Lease(sid)}, args).AsStrSlice()
}

// Reclaim recreates the lease of session sid and its holds after Redis lost
// its data, during the restart grace. It returns the hold ids that could not
// be reclaimed, or ErrNotReclaimable.
func (e Env) Reclaim(ctx context.Context, sid, owner string, ttl, lockDelay time.Duration, holds []Held) ([]string, error) {
	args := make([]string, 0, 5+6*len(holds))
	args = append(args, e.K.Prefix, owner, ms(ttl), ms(lockDelay), strconv.Itoa(e.shards()))
	for _, h := range holds {
		args = append(args, h.R.Kind.short(), h.R.Name, h.HoldID, strconv.FormatInt(h.Token, 10),
			strconv.FormatInt(h.R.N, 10), h.extra())
	}
	return retryEpoch(ctx, e, func() ([]string, bool, error) {
		res, err := e.execWait(ctx, reclaim, []string{e.K.Lease(sid), e.K.Epoch()}, args)
		if err != nil {
			return nil, false, err
		}
		v, err := res.ToArray()
		if err != nil {
			return nil, false, err
		}
		if len(v) == 0 {
			return nil, false, errReply
		}
		status, err := v[0].AsInt64()
		if err != nil {
			return nil, false, err
		}
		switch status {
		case replyReclaimed:
			return nil, false, nil
		case replyNotReclaimable:
			return nil, false, ErrNotReclaimable
		case replyEpochMissing:
			return nil, true, nil
		}
		var g int64
		if len(v) < 2 || num(v[1], &g) != nil {
			return nil, false, errReply
		}
		e.seeGrace(time.Duration(g) * time.Millisecond)
		lost, err := strs(v[2:])
		return lost, false, err
	})
}

// CloseLease deletes the lease of session sid.
func (e Env) CloseLease(ctx context.Context, sid string) error {
	return sessionClose.Exec(ctx, e.C, []string{e.K.Lease(sid)}, nil).Error()
}

// MutexReset force-releases mutex name and returns the hold id it took away
// ("" when the mutex was free).
func (e Env) MutexReset(ctx context.Context, name string) (string, error) {
	return mutexReset.Exec(ctx, e.C, e.mutexKeys(name),
		[]string{e.K.Prefix, e.sharded(), name}).ToString()
}

// MutexInfo describes a mutex.
type MutexInfo struct {
	HoldID  string // "" when free
	Token   int64  // the last token granted
	TTL     time.Duration
	Owner   string
	Waiters int
}

// MutexInspect describes mutex name.
func (e Env) MutexInspect(ctx context.Context, name string) (MutexInfo, error) {
	v, err := mutexInspect.Exec(ctx, e.C, e.mutexKeys(name),
		[]string{e.K.Prefix}).ToArray()
	if err != nil {
		return MutexInfo{}, err
	}
	if len(v) != 5 {
		return MutexInfo{}, errReply
	}
	var in MutexInfo
	var pttl, waiters int64
	for i, err := range []error{
		str(v[0], &in.HoldID), num(v[1], &in.Token), num(v[2], &pttl), str(v[3], &in.Owner), num(v[4], &waiters),
	} {
		if err != nil {
			return MutexInfo{}, fmt.Errorf("%w: field %d: %v", errReply, i, err)
		}
	}
	if pttl > 0 {
		in.TTL = time.Duration(pttl) * time.Millisecond
	}
	in.Waiters = int(waiters)
	return in, nil
}

func (e Env) mutexKeys(name string) []string {
	return []string{e.K.Mutex(name), e.K.Queue(Mutex, name)}
}

func str(m rueidis.RedisMessage, dst *string) (err error) {
	*dst, err = m.ToString()
	return err
}

func num(m rueidis.RedisMessage, dst *int64) (err error) {
	*dst, err = m.AsInt64()
	return err
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// MarkIntact marks the namespace of keys k as holding all its data, with no
// restart grace, unless its epoch marker exists: for tests and in-process
// examples on a brand-new server, which no holder from before can have
// used. The first session then records its restart grace in the marker
// (see session_open.lua).
//
// Given the keys of several namespaces (the shards of a sharded one), it
// marks them all in one pipeline.
func MarkIntact(ctx context.Context, c rueidis.Client, ks ...Keys) error {
	cmds := make(rueidis.Commands, len(ks))
	for i, k := range ks {
		cmds[i] = c.B().Set().Key(k.Epoch()).Value("0").Nx().Build()
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
	}
	return nil
}
