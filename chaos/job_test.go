package chaos

import (
	"testing"
	"time"
)

// TestCheckerJobSlots: the checker reports a slot of the scheduled job run
// twice as a violation, and counts the slots no run covered.
func TestCheckerJobSlots(t *testing.T) {
	ms := int64(time.Millisecond)
	run := func(proc int, hold string, tok, at int64, slot string) []Event {
		return []Event{
			{Type: EvGrant, Proc: proc, Kind: Job, Res: jobName, Hold: hold, Token: tok, T: at * ms, Call: at * ms, N: 1,
				Deadline: (at + 900) * ms, Detail: slot},
			{Type: EvEnd, Proc: proc, Kind: Job, Res: jobName, Hold: hold, How: "release", T: (at + 50) * ms, Deadline: (at + 900) * ms},
		}
	}
	p := CheckParams{TTL: time.Second, Kinds: []string{Job}, Liveness: time.Second, End: 10_000 * ms,
		ObsSlack: 10 * time.Millisecond, ResumeSlack: 250 * time.Millisecond}
	for _, tc := range []struct {
		name               string
		evs                []Event
		runs, dups, missed int
		violation          string
	}{
		{"clean", append(run(0, "a.1", 10, 100, "2026-01-01T00:00:01Z"), run(1, "b.1", 11, 1100, "2026-01-01T00:00:02Z")...), 2, 0, 0, ""},
		{"missed", append(run(0, "a.1", 10, 100, "2026-01-01T00:00:01Z"), run(1, "b.1", 11, 3100, "2026-01-01T00:00:04Z")...), 2, 0, 2, ""},
		{"twice", append(run(0, "a.1", 10, 100, "2026-01-01T00:00:01Z"), run(1, "b.1", 11, 1100, "2026-01-01T00:00:01Z")...), 1, 1, 0, "slot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Summary
			Check(p, 0, tc.evs, nil, &s)
			if s.JobRuns != tc.runs || s.JobDuplicates != tc.dups || s.JobMissed != tc.missed {
				t.Errorf("runs/duplicates/missed = %d/%d/%d, want %d/%d/%d", s.JobRuns, s.JobDuplicates, s.JobMissed, tc.runs, tc.dups, tc.missed)
			}
			var got string
			for _, v := range s.Violations {
				if v.What == "slot" {
					got = v.What
				}
			}
			if got != tc.violation {
				t.Errorf("violations %+v, want one of %q", s.Violations, tc.violation)
			}
		})
	}
}
