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
	p := CheckParams{TTL: time.Second, SemLimit: 3, Kinds: []string{Mutex}, Liveness: time.Second, End: 10_000 * ms,
		ObsSlack: 10 * time.Millisecond, ResumeSlack: 250 * time.Millisecond}
	for _, tc := range []struct {
		name string
		evs  []Event
		ops  []Op
		want string
	}{
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
