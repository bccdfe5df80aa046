package scripts

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// The scripts of package flight (distributed singleflight). They use none of
// common.lua's helpers, so they are built without them (alone: only their
// own includes).
var (
	// flight_get only reads, but calls TIME, which miniredis (the
	// leaseholdtest server) refuses in EVAL_RO: it runs as a plain script.
	flightGet    = newScript(alone("flight_get.lua"), false)
	flightStore  = newScript(alone("flight_store.lua"), false)
	flightForget = newScript(alone("flight_forget.lua"), false)
)

// alone returns the script of Lua file name with its includes and the
// protocol constants it names, without common.lua.
func alone(name string) string { return bare(luaFile(name)) }

// Flight is the hash {ns}:f:<name> caching the outcome of one flight key
// (name is "<group>:<key>"): value v, its token vt and fresh-until instant vx
// (server ms); error message e, et, ex; f, the last token of a computation
// that Forget made unable to store.
func (k Keys) Flight(name string) string { return k.Prefix + "f:" + name }

// FlightMutex is the name of the mutex that one flight key's computing
// caller holds ("flight:<group>:<key>"; its hash is Keys.Mutex of it).
func FlightMutex(name string) string { return "flight:" + name }

// FlightEntry is the cached outcome of a flight key, as FlightGet read it.
// A token of 0 means none.
type FlightEntry struct {
	Value      []byte
	ValueToken int64
	ValueFresh bool
	Err        string
	ErrToken   int64
	ErrFresh   bool
}

// HasValue reports whether the entry holds a value (fresh or not).
func (f FlightEntry) HasValue() bool { return f.ValueToken != 0 }

// Latest returns the token of the newest outcome stored, 0 when none.
func (f FlightEntry) Latest() int64 { return max(f.ValueToken, f.ErrToken) }

// FlightGet reads the cached outcome of flight key name in one round trip.
func (e Env) FlightGet(ctx context.Context, name string) (FlightEntry, error) {
	v, err := flightGet.Exec(ctx, e.C, []string{e.K.Flight(name)}, nil).ToArray()
	if err != nil {
		return FlightEntry{}, err
	}
	if len(v) != 6 {
		return FlightEntry{}, fmt.Errorf("%w: flight_get: %d elements", errReply, len(v))
	}
	var f FlightEntry
	var vf, ef int64
	if !v[0].IsNil() {
		if f.Value, err = v[0].AsBytes(); err != nil {
			return FlightEntry{}, fmt.Errorf("%w: flight_get value: %v", errReply, err)
		}
	}
	if !v[3].IsNil() {
		if f.Err, err = v[3].ToString(); err != nil {
			return FlightEntry{}, fmt.Errorf("%w: flight_get error: %v", errReply, err)
		}
	}
	for i, err := range []error{num(v[1], &f.ValueToken), num(v[2], &vf), num(v[4], &f.ErrToken), num(v[5], &ef)} {
		if err != nil {
			return FlightEntry{}, fmt.Errorf("%w: flight_get field %d: %v", errReply, i, err)
		}
	}
	f.ValueFresh, f.ErrFresh = vf == 1, ef == 1
	return f, nil
}

// FlightStored is the outcome of FlightStore.
type FlightStored int8

// FlightStore outcomes (flight_store.lua's replies).
const (
	FlightSaved     FlightStored = 1  // stored
	FlightNotHolder FlightStored = 0  // the hold no longer holds the key's mutex
	FlightStale     FlightStored = -1 // a newer outcome is stored already
	FlightForgotten FlightStored = -2 // Forget ran after the hold was granted
)

// FlightStore stores the outcome of the computation of flight key name by
// hold hid with token tok: value data, or, with isErr, the error message
// data. fresh is how long it is served from the cache, keep how long the
// entry is kept at least. The store is fenced: see flight_store.lua.
func (e Env) FlightStore(ctx context.Context, name, hid string, tok int64, isErr bool, data []byte,
	fresh, keep time.Duration) (FlightStored, error) {
	kind := "v"
	if isErr {
		kind = "e"
	}
	keys := []string{e.K.Flight(name), e.K.Mutex(FlightMutex(name)), e.K.Lease(SessionOf(hid))}
	args := []string{hid, strconv.FormatInt(tok, 10), kind, rueidis.BinaryString(data), ms(fresh), ms(keep)}
	n, err := flightStore.Exec(ctx, e.C, keys, args).AsInt64()
	if err != nil {
		return 0, err
	}
	if n < -2 || n > 1 {
		return 0, fmt.Errorf("%w: flight_store: %d", errReply, n)
	}
	return FlightStored(n), nil
}

// FlightForget drops the cached outcome of flight key name; a computation
// running now cannot store its outcome for keep afterwards. It reports
// whether an outcome was dropped.
func (e Env) FlightForget(ctx context.Context, name string, keep time.Duration) (bool, error) {
	n, err := flightForget.Exec(ctx, e.C, []string{e.K.Flight(name), e.K.Mutex(FlightMutex(name))},
		[]string{ms(keep)}).AsInt64()
	return n == 1, err
}
