package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Event types.
const (
	EvSession = "session" // a holder process opened a session (Detail: its id)
	EvGrant   = "grant"   // a hold was granted and observed (T), asked for at Call
	EvEnd     = "end"     // a hold's critical section ended (How: release or lost)
	EvLate    = "late"    // a holder saw its hold alive past sendTime(last beat)+TTL
	EvFail    = "fail"    // an acquire attempt failed (Cause)
	EvReclaim = "reclaim" // a session reclaimed holds after Redis lost its data
	EvLost    = "lost"    // a session lost its lease (Cause)
	EvMetrics = "metrics" // a holder process's leasehold metrics at exit
	EvFault   = "fault"   // the nemesis injected a fault (Detail)
	EvHeal    = "heal"    // the nemesis healed every fault injected before
	EvPause   = "pause"   // a holder process was stopped (SIGSTOP)
	EvResume  = "resume"  // a holder process was continued (SIGCONT)
	EvExit    = "exit"    // a holder process exited
	EvNote    = "note"    // anything else worth reading in the history
	EvStore   = "store"   // a holder's fenced-store operation returned (Store)
)

// Event is one entry of a history. T is always on the Mono time line.
type Event struct {
	Type     string             `json:"type"`
	T        int64              `json:"t"`
	Proc     int                `json:"proc"`               // holder process index; -1 for the test itself
	Kind     string             `json:"kind,omitempty"`     // mutex, semaphore, pool, election
	Res      string             `json:"res,omitempty"`      // mutex or election name, pool member, semaphore name
	Hold     string             `json:"hold,omitempty"`     // hold id
	Token    int64              `json:"token,omitempty"`    // fencing token
	N        int64              `json:"n,omitempty"`        // semaphore permits; reclaim: holds reclaimed
	Lost     int64              `json:"lost,omitempty"`     // reclaim: holds not reclaimed
	Call     int64              `json:"call,omitempty"`     // grant: when the acquire call began
	Deadline int64              `json:"deadline,omitempty"` // Session.Deadline() on the Mono time line
	How      string             `json:"how,omitempty"`      // end: release or lost
	Cause    string             `json:"cause,omitempty"`
	Detail   string             `json:"detail,omitempty"`
	Values   map[string]float64 `json:"values,omitempty"` // metrics
	Store    *Op                `json:"store,omitempty"`  // store: the operation
}

// Op is one operation on the fenced store, as the holder that made it
// logged it once it had returned.
type Op struct {
	Key      string `json:"key"` // kind/resource
	Op       string `json:"op"`  // r or w
	Token    int64  `json:"token"`
	Hold     string `json:"hold"`
	Sent     int64  `json:"sent"`             // Mono time the holder sent it
	Recv     int64  `json:"recv,omitempty"`   // Mono time its answer came (0: Sent)
	Accepted bool   `json:"accepted"`         // false: refused as stale, or Err
	Value    int64  `json:"value"`            // r: value read; w: value written (or refused)
	Writer   int64  `json:"writer,omitempty"` // r: the token that wrote the value read
	Err      string `json:"err,omitempty"`    // the call failed: outcome unknown
}

// History collects the events of one scenario. It is safe for concurrent use.
type History struct {
	mu     sync.Mutex
	events []Event
}

// Add appends e.
func (h *History) Add(e Event) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

// Note records an event of the test itself (Proc -1) at the current time.
func (h *History) Note(typ, detail string) Event {
	e := Event{Type: typ, T: Mono(), Proc: -1, Detail: detail}
	h.Add(e)
	return e
}

// Events returns a copy of the events sorted by time.
func (h *History) Events() []Event {
	h.mu.Lock()
	out := slices.Clone(h.events)
	h.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Event) int {
		switch {
		case a.T < b.T:
			return -1
		case a.T > b.T:
			return 1
		}
		return 0
	})
	return out
}

// Dump is what a history file holds.
type Dump struct {
	Scenario string   `json:"scenario"`
	Seed     int64    `json:"seed"`
	Origin   int64    `json:"origin"` // Mono time of the scenario start
	Params   any      `json:"params"`
	Summary  *Summary `json:"summary"`
	Events   []Event  `json:"events"`
	Store    []Op     `json:"store"`
	State    State    `json:"state"` // the namespace in Redis when the workload stopped
}

// writeDump writes d as JSON to dir/<scenario>-<seed>.json and returns the path.
func writeDump(dir string, d Dump) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.json", d.Scenario, d.Seed))
	b, err := json.MarshalIndent(d, "", " ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, b, 0o644)
}
