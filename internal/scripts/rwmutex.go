package scripts

import (
	"context"
	"fmt"
	"time"
)

var (
	rwAcquire      = script("rwmutex_acquire.lua")
	rwAcquireBatch = newScript(fastOnly("rwmutex_acquire_batch.lua"), false)
	rwRelease      = script("rwmutex_release.lua")
	rwReleaseBatch = newScript(fastOnly("rwmutex_release_batch.lua"), false)
	rwReset        = script("rwmutex_reset.lua")
	rwInspect      = readOnly("rwmutex_inspect.lua")
)

func (e Env) rwKeys(name string) []string {
	return []string{e.K.RWMutex(name), e.K.RWMutexReaders(name), e.K.Queue(RWMutex, name)}
}

func oneIf(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// RWMutexReset force-releases read-write mutex name, its writer or all its
// readers, serves its queue, and returns how many live holds it took away.
func (e Env) RWMutexReset(ctx context.Context, name string) (int, error) {
	n, err := rwReset.Exec(ctx, e.C, e.rwKeys(name), []string{e.sharded()}).AsInt64()
	return int(n), err
}

// RWHolder is a live holder of, or waiter for, a read-write mutex.
type RWHolder struct {
	HoldID string
	Shared bool
	Token  int64         // holders only
	TTL    time.Duration // holders only: the lease's remaining TTL
	Owner  string
}

// RWMutexInfo describes a read-write mutex.
type RWMutexInfo struct {
	Token   int64      // the last token granted
	Holders []RWHolder // the writer, or the readers
	Queue   []RWHolder // waiters, in queue order
}

// RWMutexInspect describes read-write mutex name, leaving out the holds and
// waiters of sessions whose lease is gone.
func (e Env) RWMutexInspect(ctx context.Context, name string) (RWMutexInfo, error) {
	v, err := rwInspect.Exec(ctx, e.C, e.rwKeys(name), nil).ToArray()
	if err != nil {
		return RWMutexInfo{}, err
	}
	if len(v) < 3 {
		return RWMutexInfo{}, errReply
	}
	var in RWMutexInfo
	var nh, nw int64
	if err := firstErr(num(v[0], &in.Token), num(v[1], &nh), num(v[2], &nw)); err != nil {
		return RWMutexInfo{}, err
	}
	if int64(len(v)) != 3+5*nh+3*nw {
		return RWMutexInfo{}, fmt.Errorf("%w: %d elements for %d holders and %d waiters", errReply, len(v), nh, nw)
	}
	i := 3
	for range nh {
		var h RWHolder
		var mode string
		var pttl int64
		if err := firstErr(str(v[i], &h.HoldID), str(v[i+1], &mode), num(v[i+2], &h.Token),
			num(v[i+3], &pttl), str(v[i+4], &h.Owner)); err != nil {
			return RWMutexInfo{}, err
		}
		h.Shared = mode == "r"
		h.TTL = time.Duration(max(pttl, 0)) * time.Millisecond
		in.Holders = append(in.Holders, h)
		i += 5
	}
	for range nw {
		var h RWHolder
		var mode string
		if err := firstErr(str(v[i], &h.HoldID), str(v[i+1], &mode), str(v[i+2], &h.Owner)); err != nil {
			return RWMutexInfo{}, err
		}
		h.Shared = mode == "r"
		in.Queue = append(in.Queue, h)
		i += 3
	}
	return in, nil
}
