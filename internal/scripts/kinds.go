package scripts

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

var (
	// The fast paths go before the helpers, as the batch scripts run them
	// (each file includes what it uses).
	semAcquire      = script("semaphore_acquire.lua")
	semRelease      = script("semaphore_release.lua")
	semAcquireBatch = newScript(fastOnly("semaphore_acquire_batch.lua"), false)
	semReleaseBatch = newScript(fastOnly("semaphore_release_batch.lua"), false)
	semSetLimit     = script("semaphore_setlimit.lua")
	semReset        = script("semaphore_reset.lua")
	semStats        = readOnly("semaphore_stats.lua")

	// pool_acquire_fast.lua and pool_release_fast.lua go before the
	// helpers, pool_core.lua with them (see its header).
	poolAcquire      = script("pool_acquire.lua")
	poolRelease      = script("pool_release.lua")
	poolMembers      = script("pool_members.lua")
	poolReset        = script("pool_reset.lua")
	poolStats        = readOnly("pool_stats.lua")
	poolAcquireBatch = newScript(fastOnly("pool_acquire_batch.lua"), false)
	poolReleaseBatch = newScript(fastOnly("pool_release_batch.lua"), false)

	elCampaign = script("election_campaign.lua")
	elResign   = script("election_resign.lua")
	elProclaim = script("election_proclaim.lua")
	elLeader   = readOnly("election_leader.lua")
	elReset    = script("election_reset.lua")
)

func (e Env) semKeys(name string) []string {
	return []string{e.K.Semaphore(name), e.K.SemaphoreHolders(name), e.K.Queue(Semaphore, name)}
}

// poolKeys is what the pool scripts declare: the queue only. They build the
// pool's other keys from its base (ARGV), in the same slot; each key
// declared costs Redis a Lua string on every call.
func (e Env) poolKeys(name string) []string { return []string{e.K.Queue(Pool, name)} }

func (e Env) elKeys(name string) []string {
	return []string{e.K.Election(name), e.K.Queue(Election, name), e.K.ElectionCandidates(name)}
}

// SemaphoreSetLimit stores limit as set by an operator, or clears that mark
// when limit is 0, and returns the previous limit (0 if none). idle is how
// long the semaphore is kept once idle when no grant recorded it yet.
func (e Env) SemaphoreSetLimit(ctx context.Context, name string, limit int64, idle time.Duration) (int64, error) {
	return semSetLimit.Exec(ctx, e.C, e.semKeys(name),
		[]string{e.K.Prefix, e.sharded(), name, strconv.FormatInt(limit, 10),
			strconv.FormatInt(idle.Milliseconds(), 10)}).AsInt64()
}

// SemaphoreReset force-releases every permit of semaphore name, serves its
// queue, and returns how many live holds it took away.
func (e Env) SemaphoreReset(ctx context.Context, name string) (int, error) {
	n, err := semReset.Exec(ctx, e.C, e.semKeys(name), []string{e.K.Prefix, e.sharded(), name}).AsInt64()
	return int(n), err
}

// SemaphoreHolder is one live holder of a semaphore.
type SemaphoreHolder struct {
	HoldID string
	N      int64
	Token  int64
	Owner  string
	TTL    time.Duration
}

// SemaphoreStats describes a semaphore.
type SemaphoreStats struct {
	Limit   int64
	Set     bool // an operator set the limit (SemaphoreSetLimit)
	Waiters int
	Holders []SemaphoreHolder
}

// SemaphoreStats reads the limit, the live holders and the live waiters.
func (e Env) SemaphoreStats(ctx context.Context, name string) (SemaphoreStats, error) {
	v, err := semStats.Exec(ctx, e.C, e.semKeys(name), []string{e.K.Prefix}).ToArray()
	if err != nil {
		return SemaphoreStats{}, err
	}
	if len(v) < 3 || (len(v)-3)%5 != 0 {
		return SemaphoreStats{}, errReply
	}
	var st SemaphoreStats
	var waiters, set int64
	if err := firstErr(num(v[0], &st.Limit), num(v[1], &waiters), num(v[2], &set)); err != nil {
		return SemaphoreStats{}, err
	}
	st.Waiters = int(waiters)
	st.Set = set == 1
	for i := 3; i < len(v); i += 5 {
		var h SemaphoreHolder
		var pttl int64
		if err := firstErr(str(v[i], &h.HoldID), num(v[i+1], &h.N), num(v[i+2], &h.Token),
			str(v[i+3], &h.Owner), num(v[i+4], &pttl)); err != nil {
			return SemaphoreStats{}, err
		}
		h.TTL = time.Duration(max(pttl, 0)) * time.Millisecond
		st.Holders = append(st.Holders, h)
	}
	return st, nil
}

// PoolChange changes the members of pool name: op is "add", "remove" or
// "replace". It returns how many members were added and removed. A remove
// naming a non-member changes nothing and returns an error matching
// ErrNotMember.
func (e Env) PoolChange(ctx context.Context, name, op string, keys []string) (added, removed int64, err error) {
	args := append([]string{e.K.Prefix, e.sharded(), name, e.K.PoolBase(name), op}, keys...)
	v, err := poolMembers.Exec(ctx, e.C, e.poolKeys(name), args).ToArray()
	if err != nil {
		return 0, 0, err
	}
	if len(v) != 2 {
		return 0, 0, errReply
	}
	if code, _ := v[0].AsInt64(); code == replyNotMember {
		k, _ := v[1].ToString()
		return 0, 0, fmt.Errorf("%w: %q", ErrNotMember, k)
	}
	return added, removed, firstErr(num(v[0], &added), num(v[1], &removed))
}

// PoolReset force-releases every held member of pool name, serves its
// queue, and returns how many live holds it took away.
func (e Env) PoolReset(ctx context.Context, name string) (int, error) {
	n, err := poolReset.Exec(ctx, e.C, e.poolKeys(name),
		[]string{e.K.Prefix, e.sharded(), name, e.K.PoolBase(name)}).AsInt64()
	return int(n), err
}

// PoolHolder is one held member of a pool.
type PoolHolder struct {
	Key    string
	HoldID string
	Token  int64
	Owner  string
}

// PoolStats describes a pool.
type PoolStats struct {
	Free    []string // members free now (least recently released first); includes members of dead sessions with no lock delay running
	Held    []PoolHolder
	Waiters int
}

// PoolStats reads the free and held members and the live waiters.
func (e Env) PoolStats(ctx context.Context, name string) (PoolStats, error) {
	v, err := poolStats.Exec(ctx, e.C, e.poolKeys(name), []string{e.K.Prefix, e.K.PoolBase(name)}).ToArray()
	if err != nil {
		return PoolStats{}, err
	}
	if len(v) < 2 {
		return PoolStats{}, errReply
	}
	var st PoolStats
	var waiters int64
	if err := num(v[0], &waiters); err != nil {
		return PoolStats{}, err
	}
	st.Waiters = int(waiters)
	i := 1
	for ; i < len(v); i++ {
		var k string
		if err := str(v[i], &k); err != nil {
			return PoolStats{}, err
		}
		if k == "" {
			break
		}
		st.Free = append(st.Free, k)
	}
	rest := v[i+1:]
	if len(rest)%4 != 0 {
		return PoolStats{}, errReply
	}
	for j := 0; j < len(rest); j += 4 {
		var h PoolHolder
		if err := firstErr(str(rest[j], &h.Key), str(rest[j+1], &h.HoldID), num(rest[j+2], &h.Token),
			str(rest[j+3], &h.Owner)); err != nil {
			return PoolStats{}, err
		}
		st.Held = append(st.Held, h)
	}
	return st, nil
}

// ElectionProclaim sets the leader's value if hid leads. It reports whether it did.
func (e Env) ElectionProclaim(ctx context.Context, name, hid, value string) (bool, error) {
	v, err := elProclaim.Exec(ctx, e.C, []string{e.K.Election(name)},
		[]string{e.K.Prefix, hid, e.sharded(), value, e.K.ElectionChannel(name)}).AsInt64()
	return v == 1, err
}

// ElectionReset forces the leader of election name out and returns the hold
// id it took away ("" when nobody led); the next live candidate is elected.
func (e Env) ElectionReset(ctx context.Context, name string) (string, error) {
	return elReset.Exec(ctx, e.C, e.elKeys(name),
		[]string{e.K.Prefix, e.sharded(), name, e.K.ElectionChannel(name)}).ToString()
}

// ElectionLeader is the current leader of an election.
type ElectionLeader struct {
	Term   int64 // 0 when nobody leads
	HoldID string
	Value  string
	TTL    time.Duration // the leader lease's remaining TTL
}

// ElectionLeader reads the current leader.
func (e Env) ElectionLeader(ctx context.Context, name string) (ElectionLeader, error) {
	v, err := elLeader.Exec(ctx, e.C, []string{e.K.Election(name)}, []string{e.K.Prefix}).ToArray()
	if err != nil {
		return ElectionLeader{}, err
	}
	if len(v) != 4 {
		return ElectionLeader{}, errReply
	}
	var l ElectionLeader
	var pttl int64
	if err := firstErr(num(v[0], &l.Term), str(v[1], &l.HoldID), str(v[2], &l.Value), num(v[3], &pttl)); err != nil {
		return ElectionLeader{}, err
	}
	l.TTL = time.Duration(max(pttl, 0)) * time.Millisecond
	return l, nil
}

// ParseAnnouncement reads an election channel message "<term>|<hold id>|<value>".
func ParseAnnouncement(msg string) (ElectionLeader, bool) {
	term, rest, ok1 := strings.Cut(msg, "|")
	hid, val, ok2 := strings.Cut(rest, "|")
	t, err := strconv.ParseInt(term, 10, 64)
	if !ok1 || !ok2 || err != nil {
		return ElectionLeader{}, false
	}
	return ElectionLeader{Term: t, HoldID: hid, Value: val}, true
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("%w: %v", errReply, err)
		}
	}
	return nil
}
