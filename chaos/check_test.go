package chaos

import (
	"testing"
	"time"
)

// The checker on hand-made histories: it must catch what it is for.
func TestCheckerCatches(t *testing.T) {
	ms := int64(time.Millisecond)
	grant := func(proc int, hold string, tok, at, call int64) Event {
		return Event{Type: EvGrant, Proc: proc, Kind: Mutex, Res: "m", Hold: hold, Token: tok, T: at * ms, Call: call * ms, N: 1, Deadline: (at + 900) * ms}
	}
	end := func(proc int, hold, how string, at, dl int64) Event {
		return Event{Type: EvEnd, Proc: proc, Kind: Mutex, Res: "m", Hold: hold, How: how, T: at * ms, Deadline: dl * ms}
	}
	// rw is a grant of read-write mutex "m": a read with shared, else a write.
	rw := func(proc int, hold string, tok, at int64, shared bool) Event {
		e := grant(proc, hold, tok, at, at-10)
		e.Kind = RWMutex
		if shared {
			e.Detail = readDetail
		}
		return e
	}
	op := func(hold, kind string, tok, value, sent, recv, writer int64) Op {
		return Op{Key: "mutex/m", Op: kind, Token: tok, Hold: hold, Sent: sent * ms, Recv: recv * ms, Accepted: true, Value: value, Writer: writer}
	}
	p := CheckParams{TTL: time.Second, SemLimit: 3, Kinds: []string{Mutex}, Liveness: time.Second, End: 10_000 * ms,
		ObsSlack: 10 * time.Millisecond, ResumeSlack: 250 * time.Millisecond}
	for _, tc := range []struct {
		name string
		evs  []Event
		ops  []Op
		want string
	}{
		// The store's order comes back from the values (see checker.store).
		{"store clean", []Event{grant(0, "a.1", 10, 100, 90), end(0, "a.1", "release", 200, 1000), grant(1, "b.1", 11, 210, 150), end(1, "b.1", "release", 300, 1000)},
			[]Op{op("a.1", "r", 10, 0, 110, 111, 0), op("a.1", "w", 10, 1, 112, 113, 0), op("b.1", "r", 11, 1, 220, 221, 10), op("b.1", "w", 11, 2, 222, 223, 0)}, ""},
		{"two writes from one read", []Event{grant(0, "a.1", 10, 100, 90), end(0, "a.1", "release", 200, 1000)},
			[]Op{op("a.1", "w", 10, 1, 110, 111, 0), op("a.1", "w", 10, 1, 130, 131, 0)}, "lost-update"},
		{"stale write after a fenced read", []Event{grant(0, "a.1", 10, 100, 90), end(0, "a.1", "release", 200, 1000)},
			[]Op{op("b.1", "r", 11, 0, 110, 111, 0), op("a.1", "w", 10, 1, 105, 120, 0)}, "store"},
		{"stale op after an answer", []Event{grant(0, "a.1", 10, 100, 90), end(0, "a.1", "release", 200, 1000)},
			[]Op{op("b.1", "r", 11, 0, 110, 111, 0), op("a.1", "r", 10, 0, 112, 113, 0)}, "store"},
		{"read of another writer", []Event{grant(0, "a.1", 10, 100, 90), end(0, "a.1", "release", 200, 1000)},
			[]Op{op("a.1", "w", 10, 1, 110, 111, 0), op("a.1", "r", 10, 1, 120, 121, 9)}, "store"},
		{"failed op", []Event{grant(0, "a.1", 10, 100, 90), end(0, "a.1", "release", 200, 1000)},
			[]Op{{Key: "mutex/m", Op: "w", Token: 10, Hold: "a.1", Sent: 110 * ms, Value: 1, Err: "timeout"}}, "store"},
		{"clean", []Event{grant(0, "a.1", 10, 100, 90), end(0, "a.1", "release", 200, 1000), grant(1, "b.1", 11, 210, 150), end(1, "b.1", "release", 300, 1000)}, nil, ""},
		{"overlap", []Event{grant(0, "a.1", 10, 100, 90), grant(1, "b.1", 11, 150, 140), end(0, "a.1", "release", 200, 1000), end(1, "b.1", "release", 300, 1000)}, nil, "overlap"},
		{"token order", []Event{grant(0, "a.1", 10, 100, 90), end(0, "a.1", "release", 200, 1000), grant(1, "b.1", 9, 210, 150), end(1, "b.1", "release", 300, 1000)}, nil, "token"},
		{"late cancel", []Event{grant(0, "a.1", 10, 100, 90), end(0, "a.1", "lost", 1100, 1000)}, nil, "deadline"},
		{"pause excused", []Event{grant(0, "a.1", 10, 100, 90), {Type: EvPause, Proc: 0, T: 150 * ms}, grant(1, "b.1", 11, 1200, 1100),
			{Type: EvResume, Proc: 0, T: 2000 * ms}, end(0, "a.1", "lost", 2010, 1000), end(1, "b.1", "release", 2100, 3000)}, nil, ""},
		{"lost update", []Event{grant(0, "a.1", 10, 100, 90), end(0, "a.1", "release", 200, 1000)},
			[]Op{{Key: "mutex/m", Op: "r", Token: 10, Hold: "a.1", Sent: 110 * ms, Accepted: true}, {Key: "mutex/m", Op: "w", Token: 10, Hold: "a.1", Sent: 120 * ms, Accepted: true, Value: 2}}, "lost-update"},
		{"stale accepted", []Event{grant(0, "a.1", 10, 100, 90), end(0, "a.1", "release", 200, 1000)},
			[]Op{{Key: "mutex/m", Op: "w", Token: 12, Hold: "x", Sent: 110 * ms, Accepted: true, Value: 1}, {Key: "mutex/m", Op: "w", Token: 10, Hold: "a.1", Sent: 120 * ms, Accepted: true, Value: 2}}, "store"},
		{"reads share", []Event{rw(0, "a.1", 10, 100, true), rw(1, "b.1", 11, 150, true), end(0, "a.1", "release", 200, 1000), end(1, "b.1", "release", 300, 1000)}, nil, ""},
		{"write beside read", []Event{rw(0, "a.1", 10, 100, true), rw(1, "b.1", 11, 150, false), end(0, "a.1", "release", 200, 1000), end(1, "b.1", "release", 300, 1000)}, nil, "overlap"},
		{"read beside write", []Event{rw(0, "a.1", 10, 100, false), rw(1, "b.1", 11, 150, true), end(0, "a.1", "release", 200, 1000), end(1, "b.1", "release", 300, 1000)}, nil, "overlap"},
		{"liveness", []Event{{Type: EvHeal, Proc: -1, T: 100 * ms}, grant(0, "a.1", 10, 1500, 90), end(0, "a.1", "release", 1600, 2000)}, nil, "liveness"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Summary{}
			p := p
			if tc.ops != nil { // the store then holds what the accepted writes left
				p.StoreFinal = map[string]int64{"mutex/m": 0}
				for _, o := range tc.ops {
					if o.Accepted && o.Op == "w" {
						p.StoreFinal["mutex/m"]++
					}
				}
			}
			Check(p, 0, tc.evs, tc.ops, s)
			got := ""
			if len(s.Violations) > 0 {
				got = s.Violations[0].What
			}
			if got != tc.want {
				t.Fatalf("violation %q, want %q (%+v)", got, tc.want, s.Violations)
			}
		})
	}
}

// The store's final value catches what the log cannot show: below the
// accepted writes, an update was lost; above, an accepted write is missing
// from the log.
func TestCheckerStoreFinal(t *testing.T) {
	ms := int64(time.Millisecond)
	ops := []Op{{Key: "mutex/m", Op: "w", Token: 10, Hold: "a.1", Sent: 110 * ms, Recv: 111 * ms, Accepted: true, Value: 1}}
	for final, want := range map[int64]string{0: "lost-update", 1: "", 2: "store"} {
		s := &Summary{}
		Check(CheckParams{TTL: time.Second, SemLimit: 3, Liveness: time.Second, End: 10_000 * ms,
			StoreFinal: map[string]int64{"mutex/m": final}}, 0, nil, ops, s)
		got := ""
		if len(s.Violations) > 0 {
			got = s.Violations[0].What
		}
		if got != want {
			t.Errorf("store ends with %d after 1 accepted write: violation %q, want %q (%+v)", final, got, want, s.Violations)
		}
	}
}

// The lock-delay check on hand-made histories (LockDelay 500ms): a lost
// holder's resource, or its semaphore permits, must not be granted to
// anyone within LockDelay of its deadline (1000ms here), also when its
// process was stopped meanwhile; a released one may be.
func TestCheckerLockDelay(t *testing.T) {
	ms := int64(time.Millisecond)
	grant := func(proc int, kind, res, hold string, tok, n, at int64) Event {
		return Event{Type: EvGrant, Proc: proc, Kind: kind, Res: res, Hold: hold, Token: tok, T: at * ms, Call: (at - 10) * ms, N: n, Deadline: (at + 900) * ms}
	}
	end := func(proc int, kind, res, hold, how string, at, dl int64) Event {
		return Event{Type: EvEnd, Proc: proc, Kind: kind, Res: res, Hold: hold, How: how, T: at * ms, Deadline: dl * ms}
	}
	sem := func(proc int, hold string, tok, n, at int64) Event {
		return grant(proc, Semaphore, "sem", hold, tok, n, at)
	}
	semEnd := func(proc int, hold, how string, at, dl int64) Event {
		return end(proc, Semaphore, "sem", hold, how, at, dl)
	}
	for _, tc := range []struct {
		name string
		evs  []Event
		want string
	}{
		{"mutex after the delay", []Event{grant(0, Mutex, "m", "a.1", 10, 1, 100), end(0, Mutex, "m", "a.1", "lost", 1001, 1000),
			grant(1, Mutex, "m", "b.1", 11, 1, 1600), end(1, Mutex, "m", "b.1", "release", 1700, 2500)}, ""},
		{"mutex inside the delay", []Event{grant(0, Mutex, "m", "a.1", 10, 1, 100), end(0, Mutex, "m", "a.1", "lost", 1001, 1000),
			grant(1, Mutex, "m", "b.1", 11, 1, 1200), end(1, Mutex, "m", "b.1", "release", 1300, 2100)}, "lockdelay"},
		{"mutex after a release", []Event{grant(0, Mutex, "m", "a.1", 10, 1, 100), end(0, Mutex, "m", "a.1", "release", 500, 1000),
			grant(1, Mutex, "m", "b.1", 11, 1, 510), end(1, Mutex, "m", "b.1", "release", 600, 1400)}, ""},
		{"pool member of a stopped holder", []Event{grant(0, Pool, "k0", "a.1", 10, 1, 100), {Type: EvPause, Proc: 0, T: 150 * ms},
			grant(1, Pool, "k0", "b.1", 11, 1, 1200), {Type: EvResume, Proc: 0, T: 1300 * ms}, end(0, Pool, "k0", "a.1", "lost", 1310, 1000),
			end(1, Pool, "k0", "b.1", "release", 1400, 2100)}, "lockdelay"},
		{"another pool member", []Event{grant(0, Pool, "k0", "a.1", 10, 1, 100), end(0, Pool, "k0", "a.1", "lost", 1001, 1000),
			grant(1, Pool, "k1", "b.1", 11, 1, 1200), end(1, Pool, "k1", "b.1", "release", 1300, 2100)}, ""},
		{"a lost reader lets readers in", []Event{grant(0, RWMutex, "rw", "a.1", 10, 1, 100), end(0, RWMutex, "rw", "a.1", "lost", 1001, 1000),
			grant(1, RWMutex, "rw", "b.1", 11, 1, 1200), end(1, RWMutex, "rw", "b.1", "release", 1300, 2100)}, ""},
		{"semaphore permits of a lost holder", []Event{sem(0, "a.1", 10, 2, 100), semEnd(0, "a.1", "lost", 1001, 1000),
			sem(1, "b.1", 11, 2, 1200), semEnd(1, "b.1", "release", 1300, 2100)}, "lockdelay"},
		{"semaphore permits left over", []Event{sem(0, "a.1", 10, 1, 100), semEnd(0, "a.1", "lost", 1001, 1000),
			sem(1, "b.1", 11, 2, 1200), semEnd(1, "b.1", "release", 1300, 2100)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.evs {
				if tc.evs[i].Kind == RWMutex && tc.evs[i].Type == EvGrant {
					tc.evs[i].Detail = readDetail
				}
			}
			s := &Summary{}
			Check(CheckParams{TTL: time.Second, SemLimit: 3, LockDelay: 500 * time.Millisecond, Liveness: time.Second, End: 10_000 * ms,
				ObsSlack: 10 * time.Millisecond, ResumeSlack: 250 * time.Millisecond}, 0, tc.evs, nil, s)
			got := ""
			if len(s.Violations) > 0 {
				got = s.Violations[0].What
			}
			if got != tc.want {
				t.Fatalf("violation %q, want %q (%+v)", got, tc.want, s.Violations)
			}
		})
	}
}

// The longest overlap (or permit excess) window: from the later grant to
// the first end of the two.
func TestCheckerOverlapWindow(t *testing.T) {
	ms := int64(time.Millisecond)
	evs := []Event{
		{Type: EvGrant, Proc: 0, Kind: Mutex, Res: "m", Hold: "a.1", Token: 10, T: 100 * ms, Call: 90 * ms, N: 1, Deadline: 1000 * ms},
		{Type: EvGrant, Proc: 1, Kind: Mutex, Res: "m", Hold: "b.1", Token: 11, T: 150 * ms, Call: 140 * ms, N: 1, Deadline: 1050 * ms},
		{Type: EvEnd, Proc: 0, Kind: Mutex, Res: "m", Hold: "a.1", How: "release", T: 190 * ms, Deadline: 1000 * ms},
		{Type: EvEnd, Proc: 1, Kind: Mutex, Res: "m", Hold: "b.1", How: "release", T: 300 * ms, Deadline: 1050 * ms},
		{Type: EvGrant, Proc: 0, Kind: Semaphore, Res: "sem", Hold: "a.2", Token: 20, T: 400 * ms, Call: 390 * ms, N: 2, Deadline: 1300 * ms},
		{Type: EvGrant, Proc: 1, Kind: Semaphore, Res: "sem", Hold: "b.2", Token: 21, T: 410 * ms, Call: 400 * ms, N: 2, Deadline: 1310 * ms},
		{Type: EvEnd, Proc: 1, Kind: Semaphore, Res: "sem", Hold: "b.2", How: "release", T: 480 * ms, Deadline: 1310 * ms},
		{Type: EvEnd, Proc: 0, Kind: Semaphore, Res: "sem", Hold: "a.2", How: "release", T: 500 * ms, Deadline: 1300 * ms},
	}
	s := &Summary{Unprotected: true}
	Check(CheckParams{TTL: time.Second, SemLimit: 3, Liveness: time.Second, End: 10_000 * ms,
		ObsSlack: 10 * time.Millisecond, ResumeSlack: 250 * time.Millisecond}, 0, evs, nil, s)
	if s.Overlaps != 2 || s.MaxOverlapMs != 70 || len(s.Anomalies) != 2 {
		t.Fatalf("%d overlaps, longest %.1fms, %d anomalies; want 2, 70ms (the permits' 410-480ms), 2", s.Overlaps, s.MaxOverlapMs, len(s.Anomalies))
	}
}
