package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// CheckParams are what the checker needs to know about a scenario.
type CheckParams struct {
	TTL time.Duration // the longest of the holders' TTLs
	// ProcTTL is each holder process's TTL, by process index, when they
	// differ; nil: TTL for all.
	ProcTTL []time.Duration
	Grace   time.Duration // restart grace
	// LockDelay is the holders' lock delay: a resource whose holder's
	// session was lost is granted to no one for LockDelay after the lease
	// was gone. 0 skips the check.
	LockDelay time.Duration
	SemLimit  int64
	Kinds     []string
	Liveness  time.Duration // bound from a heal to a grant of every kind
	End       int64         // Mono time the workload was told to stop
	// ObsSlack is the scheduling allowance for a holder to observe its
	// context's cancellation (the checks use observation times).
	ObsSlack time.Duration
	// ResumeSlack: a holder process continued after SIGSTOP must notice its
	// lost holds within this long; overlaps it caused while stopped are
	// counted as PauseOverlaps (no lock service can prevent them), not as
	// violations, and only fencing protects against them.
	ResumeSlack time.Duration
	// StoreFinal is the value the fenced store holds for each key at the
	// end, read once the holders have exited; nil skips that comparison.
	StoreFinal map[string]int64
}

// Violation is one broken property.
type Violation struct {
	What   string `json:"what"`
	T      int64  `json:"t"`
	Detail string `json:"detail"`
}

// Summary is the outcome of a scenario.
type Summary struct {
	Scenario      string      `json:"scenario"`
	Seed          int64       `json:"seed"`
	Seconds       float64     `json:"seconds"`
	Procs         int         `json:"procs"`
	Grants        int         `json:"grants"`
	StoreOps      int         `json:"store_ops"`
	Faults        int         `json:"faults"`
	Losses        int         `json:"losses"`        // holds that ended lost
	SessionsLost  int         `json:"sessions_lost"` // leases lost
	Reclaimed     int64       `json:"reclaimed"`     // holds reclaimed (session log records)
	ReclaimLost   int64       `json:"reclaim_lost"`  // holds a reclaim could not recreate
	MetReclaimed  float64     `json:"metric_reclaimed"`
	MetReclaimLst float64     `json:"metric_reclaim_lost"`
	HeldAcross    int         `json:"held_across"` // restart-empty: holds alive when Redis was killed
	KeptAcross    int         `json:"kept_across"` // ... still held after Redis came back
	LostAcross    int         `json:"lost_across"` // ... lost in the restart
	StaleRejected int         `json:"stale_rejected"`
	LateAccepted  int         `json:"late_accepted"`
	PauseOverlaps int         `json:"pause_overlaps"`
	ReadOverlaps  int         `json:"read_overlaps"`  // a read-write mutex's reads granted while another read was held: allowed
	MaxCancelMs   float64     `json:"max_cancel_ms"`  // latest cancel observed, relative to sendTime(last beat)+TTL
	CancelSeen    bool        `json:"cancel_seen"`    // MaxCancelMs is set: some hold was lost outside a process pause
	MaxStallMs    float64     `json:"max_stall_ms"`   // longest scheduling stall of a holder process
	Overlaps      int         `json:"overlaps"`       // overlaps and permit excesses reported (violations or anomalies)
	MaxOverlapMs  float64     `json:"max_overlap_ms"` // the longest of their windows
	StallExcused  int         `json:"stall_excused"`  // late cancels a stall of the process explains
	RecoveryMs    float64     `json:"recovery_ms"`    // longest heal -> grant of every kind
	Stuck         bool        `json:"stuck"`          // some kind was not granted within the bound after a heal
	GapBeforeMs   float64     `json:"gap_before_ms"`  // mutex hand-off gap p50 before the first fault (handoff)
	GapAfterMs    float64     `json:"gap_after_ms"`   // ... after the last heal
	GapBeforeN    int         `json:"gap_before_n"`   // samples of each
	GapAfterN     int         `json:"gap_after_n"`
	GapFew        bool        `json:"gap_few"`        // too few samples to compare the two
	JobRuns       int         `json:"job_runs"`       // slots of the scheduled job run
	JobDuplicates int         `json:"job_duplicates"` // slots of it run more than once (violations)
	JobMissed     int         `json:"job_missed"`     // slots between its first and last run that no run covered
	Violations    []Violation `json:"violations"`
	Anomalies     []Violation `json:"anomalies"` // measured in scenarios without a guarantee
	Unprotected   bool        `json:"unprotected"`
}

type hold struct {
	grant Event
	end   *Event
	stop  int64 // end of the critical section: end event, process exit, or +inf
}

type interval struct{ from, to int64 }

type checker struct {
	p       CheckParams
	s       *Summary
	origin  int64
	holds   map[string]*hold
	byRes   map[string][]*hold // kind/res -> holds by grant time
	pauses  map[int][]interval
	faults  []Event
	heals   []Event
	grants  map[string][]Event // kind -> grants by time
	stalls  map[int][]interval // proc -> scheduling stalls the canary saw
	unprot  bool
	slack   int64
	resumeS int64
}

// Check checks a scenario's history and store log and fills in s.
func Check(p CheckParams, origin int64, evs []Event, ops []Op, s *Summary) {
	c := &checker{p: p, s: s, origin: origin, holds: map[string]*hold{}, byRes: map[string][]*hold{},
		pauses: map[int][]interval{}, stalls: map[int][]interval{}, grants: map[string][]Event{}, unprot: s.Unprotected,
		slack: int64(p.ObsSlack), resumeS: int64(p.ResumeSlack)}
	c.index(evs)
	c.exclusive()
	c.permits()
	c.lockDelays()
	c.tokens()
	c.deadlines(evs)
	c.store(ops)
	c.liveness()
	c.reclaims()
	c.jobSlots()
	slices.SortFunc(s.Violations, func(a, b Violation) int { return cmp.Compare(a.T, b.T) })
	slices.SortFunc(s.Anomalies, func(a, b Violation) int { return cmp.Compare(a.T, b.T) })
}

func (c *checker) at(t int64) string { return fmt.Sprintf("%.3fs", float64(t-c.origin)/1e9) }

func (c *checker) violate(what string, t int64, format string, args ...any) {
	v := Violation{What: what, T: t, Detail: c.at(t) + ": " + fmt.Sprintf(format, args...)}
	if c.unprot {
		c.s.Anomalies = append(c.s.Anomalies, v)
		return
	}
	c.s.Violations = append(c.s.Violations, v)
}

// index reads evs into c: the holds and their ends, the grants of each
// kind, faults and heals, process pauses and stalls, and the summary's
// counts.
func (c *checker) index(evs []Event) {
	exits := map[int]int64{}
	open := map[int][]int64{}
	for _, e := range evs {
		switch e.Type {
		case EvGrant, EvEnd:
			c.indexHold(e)
		case EvPause:
			open[e.Proc] = append(open[e.Proc], e.T)
		case EvResume:
			if ps := open[e.Proc]; len(ps) > 0 {
				c.pauses[e.Proc] = append(c.pauses[e.Proc], interval{ps[0], e.T})
				open[e.Proc] = ps[1:]
			}
		case EvExit:
			exits[e.Proc] = e.T
		default:
			c.count(e)
		}
	}
	for proc, ps := range open { // never resumed: paused until it exited
		for _, p := range ps {
			c.pauses[proc] = append(c.pauses[proc], interval{p, math.MaxInt64})
		}
	}
	for _, h := range c.holds {
		if h.end == nil {
			if t, ok := exits[h.grant.Proc]; ok {
				h.stop = t
			}
		}
	}
}

// indexHold records a grant (a new hold) or the first end of a hold.
func (c *checker) indexHold(e Event) {
	if e.Type == EvGrant {
		h := &hold{grant: e, stop: math.MaxInt64}
		c.holds[e.Hold] = h
		k := e.Kind + "/" + e.Res
		c.byRes[k] = append(c.byRes[k], h)
		c.grants[e.Kind] = append(c.grants[e.Kind], e)
		c.s.Grants++
		return
	}
	if h := c.holds[e.Hold]; h != nil && h.end == nil {
		ev := e
		h.end = &ev
		h.stop = e.T
		if e.How == "lost" {
			c.s.Losses++
		}
	}
}

// count records the events that the summary counts and the checks look
// up: sessions lost, reclaims, metrics, faults, heals and stalls.
func (c *checker) count(e Event) {
	switch e.Type {
	case EvLost:
		c.s.SessionsLost++
	case EvReclaim:
		c.s.Reclaimed += e.N
		c.s.ReclaimLost += e.Lost
	case EvMetrics:
		c.s.MetReclaimed += e.Values["leasehold_reclaimed_holds_total{result=reclaimed}"]
		c.s.MetReclaimLst += e.Values["leasehold_reclaimed_holds_total{result=lost}"]
	case EvFault:
		c.faults = append(c.faults, e)
		c.s.Faults++
	case EvHeal:
		c.heals = append(c.heals, e)
	case EvNote:
		if e.Kind == "stall" {
			c.stalls[e.Proc] = append(c.stalls[e.Proc], interval{e.T, e.T + e.N + int64(2*time.Millisecond)})
			c.s.MaxStallMs = max(c.s.MaxStallMs, ms(e.N))
		}
	}
}

// pausedExcuse reports whether a holder of process proc may be excused for
// acting (or noticing a loss) only at t although it should have by ref: its
// process was stopped at ref (or resumed less than ResumeSlack before), and
// t is within ResumeSlack of its resume. This is the process pause no lock
// service can rule out; fencing must cover it.
func (c *checker) pausedExcuse(proc int, ref, t int64) bool {
	for _, iv := range c.pauses[proc] {
		if iv.from <= ref && ref <= satAdd(iv.to, c.resumeS) && t <= satAdd(iv.to, c.resumeS) {
			return true
		}
	}
	return false
}

// pauseOverlap reports whether the overlap of holds a and b at t is the
// doing of a process pause: either holder's process was stopped at t (or
// had just resumed) and that holder ended within ResumeSlack of its resume.
// A grant observed just after a resume was made before the pause: its
// holder learns only then that the grant is stale.
func (c *checker) pauseOverlap(a, b *hold, t int64) bool {
	return c.pausedExcuse(a.grant.Proc, t, a.stop) || c.pausedExcuse(b.grant.Proc, t, b.stop)
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func (c *checker) describe(h *hold) string {
	end := "never ended"
	if h.end != nil {
		end = fmt.Sprintf("%s at %s", h.end.How, c.at(h.end.T))
	} else if h.stop != math.MaxInt64 {
		end = "process exited at " + c.at(h.stop)
	}
	return fmt.Sprintf("p%d hold %s token %d granted %s, %s", h.grant.Proc, h.grant.Hold, h.grant.Token, c.at(h.grant.T), end)
}

func (c *checker) keys() []string {
	var ks []string
	for k := range c.byRes {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// exclusive: critical sections of one mutex, election or pool member never
// overlap, nor those of a read-write mutex unless both are reads; a grant
// is observed after every earlier holder's end.
func (c *checker) exclusive() {
	for _, k := range c.keys() {
		hs := c.byRes[k]
		if strings.HasPrefix(k, Semaphore+"/") {
			continue
		}
		var active []*hold
		for _, g := range hs {
			kept := active[:0]
			for _, p := range active {
				if p.stop >= g.grant.T {
					kept = append(kept, p)
				}
			}
			active = kept
			for _, p := range active {
				if p.grant.Detail == readDetail && g.grant.Detail == readDetail {
					c.s.ReadOverlaps++
					continue
				}
				if c.pauseOverlap(p, g, g.grant.T) {
					c.s.PauseOverlaps++
					continue
				}
				w := c.window(g.grant.T, min(p.stop, g.stop))
				c.violate("overlap", g.grant.T, "%s granted to p%d (hold %s token %d) while %s; overlap %.1fms",
					k, g.grant.Proc, g.grant.Hold, g.grant.Token, c.describe(p), w)
			}
			active = append(active, g)
		}
	}
}

// permits: permits of a semaphore in use never exceed its limit.
func (c *checker) permits() {
	for _, k := range c.keys() {
		if !strings.HasPrefix(k, Semaphore+"/") {
			continue
		}
		var active []*hold
		for _, g := range c.byRes[k] {
			kept := active[:0]
			for _, p := range active {
				if p.stop >= g.grant.T {
					kept = append(kept, p)
				}
			}
			active = kept
			used, excused := g.grant.N, int64(0)
			if c.pausedExcuse(g.grant.Proc, g.grant.T, g.stop) {
				excused += g.grant.N
			}
			for _, p := range active {
				used += p.grant.N
				if c.pausedExcuse(p.grant.Proc, g.grant.T, p.stop) {
					excused += p.grant.N
				}
			}
			if used > c.p.SemLimit {
				if used-excused <= c.p.SemLimit {
					c.s.PauseOverlaps++
				} else {
					var who []string
					for _, p := range active {
						who = append(who, c.describe(p))
					}
					w := c.window(g.grant.T, excessEnd(append([]*hold{g}, active...), used, c.p.SemLimit))
					c.violate("permits", g.grant.T, "%s: %d permits in use (limit %d) when p%d was granted %d (token %d) for %.1fms; holding: %s",
						k, used, c.p.SemLimit, g.grant.Proc, g.grant.N, g.grant.Token, w, strings.Join(who, "; "))
				}
			}
			active = append(active, g)
		}
	}
}

// window records an overlap (or a permit excess) that lasted from from to
// to (Mono; math.MaxInt64: until the end of the run) and returns its length
// in ms: the measured scenarios report the longest (Summary.MaxOverlapMs).
func (c *checker) window(from, to int64) float64 {
	to = min(to, c.p.End)
	w := max(ms(to-from), 0)
	c.s.Overlaps++
	c.s.MaxOverlapMs = max(c.s.MaxOverlapMs, w)
	return w
}

// excessEnd returns when the semaphore holds hs, using used permits in all,
// stop using more than limit: holds end in the order of their stops.
func excessEnd(hs []*hold, used, limit int64) int64 {
	byStop := slices.SortedFunc(slices.Values(hs), func(a, b *hold) int { return cmp.Compare(a.stop, b.stop) })
	for _, h := range byStop {
		used -= h.grant.N
		if used <= limit {
			return h.stop
		}
	}
	return math.MaxInt64
}

// lockDelays: a resource whose holder's session was lost is granted to no
// one else for LockDelay once the lease is gone (mutex, election, pool
// member, read-write mutex: a lost reader keeps writers out; semaphore: the
// lost holder's permits stay in use). The lease is gone no earlier than
// the local deadline of the holder's session (Session.Deadline() when the
// loss was observed: the server expires the lease a little later, at send
// time of the last confirmed heartbeat + TTL, and a lease deleted by a
// Close of the lost session is deleted after that deadline): a grant
// observed before that deadline + LockDelay - ObsSlack breaks it. It applies
// to holds observed lost at or after their deadline (lost with their
// session's lease; a hold taken away alone from a live session ends before
// its session's deadline and starts no lock delay), also to a holder whose
// process was stopped: the lock delay is what protects it. A grant that the
// overlap or permits checks already report is not reported again.
func (c *checker) lockDelays() {
	if c.p.LockDelay <= 0 {
		return
	}
	for _, k := range c.keys() {
		hs := c.byRes[k]
		sem := strings.HasPrefix(k, Semaphore+"/")
		for i, g := range hs {
			if sem {
				c.semLockDelay(k, g, hs[:i])
			} else {
				c.exclusiveLockDelay(k, g, hs[:i])
			}
		}
	}
}

// delayed reports whether the lock delay of p (a hold lost with its
// session's lease) keeps a grant at t out.
func (c *checker) delayed(p *hold, t int64) bool {
	return p.end != nil && p.end.How == "lost" && p.end.T >= p.end.Deadline && t < p.end.Deadline+int64(c.p.LockDelay)-c.slack
}

// semLockDelay checks grant g of semaphore k against the earlier grants
// before: the permits in use (but for stopped holders) and in a lost
// holder's lock delay stay within the limit. Excess that permits reports
// is not reported again.
func (c *checker) semLockDelay(k string, g *hold, before []*hold) {
	t := g.grant.T
	inUse, excused, withLD := g.grant.N, int64(0), g.grant.N
	var who []string
	for _, p := range before {
		open := p.stop >= t
		paused := open && c.pausedExcuse(p.grant.Proc, t, p.stop)
		if open {
			inUse += p.grant.N
			if paused {
				excused += p.grant.N
			}
		}
		if (open && !paused) || c.delayed(p, t) {
			withLD += p.grant.N
			if c.delayed(p, t) {
				who = append(who, c.describe(p))
			}
		}
	}
	if inUse-excused > c.p.SemLimit || withLD <= c.p.SemLimit {
		return // fine, or reported by permits
	}
	c.violate("lockdelay", t, "%s: p%d granted %d (token %d) with %d permits in use or in a lost holder's lock delay (limit %d, LockDelay %v): %s",
		k, g.grant.Proc, g.grant.N, g.grant.Token, withLD, c.p.SemLimit, c.p.LockDelay, strings.Join(who, "; "))
}

// exclusiveLockDelay checks grant g of resource k (not a semaphore)
// against the earlier grants before: none is in a lost holder's lock
// delay (two reads never conflict). An overlap that exclusive reports is
// not reported again.
func (c *checker) exclusiveLockDelay(k string, g *hold, before []*hold) {
	t := g.grant.T
	for _, p := range before {
		if p.grant.Detail == readDetail && g.grant.Detail == readDetail {
			continue
		}
		if !c.delayed(p, t) || (p.stop >= t && !c.pauseOverlap(p, g, t)) {
			continue // fine, or reported by exclusive
		}
		c.violate("lockdelay", t, "%s granted to p%d (hold %s token %d) %.0fms after the deadline of lost %s (LockDelay %v)",
			k, g.grant.Proc, g.grant.Hold, g.grant.Token, ms(t-p.end.Deadline), c.describe(p), c.p.LockDelay)
	}
}

// tokens: fencing tokens strictly increase per resource: no token is granted
// twice, and a grant asked for after another grant was observed has a larger
// token.
func (c *checker) tokens() {
	for _, k := range c.keys() {
		hs := c.byRes[k]
		seen := map[int64]*hold{}
		for _, h := range hs {
			if o := seen[h.grant.Token]; o != nil {
				c.violate("token", h.grant.T, "%s: token %d granted twice: %s and %s", k, h.grant.Token, c.describe(o), c.describe(h))
			}
			seen[h.grant.Token] = h
		}
		// hs is sorted by grant time; prefix maxima of tokens.
		pre := make([]*hold, len(hs))
		for i, h := range hs {
			pre[i] = h
			if i > 0 && pre[i-1].grant.Token > h.grant.Token {
				pre[i] = pre[i-1]
			}
		}
		for _, h := range hs {
			i := sort.Search(len(hs), func(i int) bool { return hs[i].grant.T >= h.grant.Call })
			if i > 0 && pre[i-1].grant.Token >= h.grant.Token && pre[i-1] != h {
				c.violate("token", h.grant.T, "%s: token %d granted to p%d (asked at %s) is not above token %d observed earlier (%s)",
					k, h.grant.Token, h.grant.Proc, c.at(h.grant.Call), pre[i-1].grant.Token, c.describe(pre[i-1]))
			}
		}
	}
}

// ttl returns the TTL of process proc's sessions.
func (c *checker) ttl(proc int) time.Duration {
	if proc >= 0 && proc < len(c.p.ProcTTL) && c.p.ProcTTL[proc] > 0 {
		return c.p.ProcTTL[proc]
	}
	return c.p.TTL
}

// boundOf is TTL/100 + 5ms for process proc: Session.Deadline() + boundOf =
// sendTime(last confirmed heartbeat) + TTL.
func (c *checker) boundOf(proc int) int64 { return int64(c.ttl(proc)/100 + 5*time.Millisecond) }

// stall returns how much of [from, to] process proc spent stalled (not
// scheduled), per its canary.
func (c *checker) stall(proc int, from, to int64) int64 {
	var d int64
	for _, iv := range c.stalls[proc] {
		lo, hi := max(iv.from, from), min(iv.to, to)
		if hi > lo {
			d += hi - lo
		}
	}
	return d
}

// late reports whether a cancel observed at t for a deadline dl is late
// beyond the observation slack, once a pause (SIGSTOP) or a scheduling stall
// of the process is accounted for.
func (c *checker) late(proc int, dl, t int64) bool {
	late := t - (dl + c.boundOf(proc))
	if late <= c.slack || c.pausedExcuse(proc, dl, t) {
		return false
	}
	// The deadline timer is armed when a heartbeat is confirmed, about a TTL
	// before it fires: a process not scheduled for part of that time cannot
	// fire it on time, whatever the library does.
	if late-c.stall(proc, dl-int64(c.ttl(proc)), t) <= c.slack {
		c.s.StallExcused++
		return false
	}
	return true
}

// deadlines: a hold's context is canceled no later than sendTime(last
// confirmed heartbeat) + TTL = Session.Deadline() + TTL/100 + 5ms.
func (c *checker) deadlines(evs []Event) {
	c.s.MaxCancelMs = math.Inf(-1)
	for _, e := range evs {
		switch {
		case e.Type == EvEnd && e.How == "lost":
			late := e.T - (e.Deadline + c.boundOf(e.Proc))
			if !c.pausedExcuse(e.Proc, e.Deadline, e.T) {
				c.s.MaxCancelMs = max(c.s.MaxCancelMs, ms(late))
				c.s.CancelSeen = true
			}
			if c.late(e.Proc, e.Deadline, e.T) {
				c.violate("deadline", e.T, "p%d %s %s hold %s: loss observed %.1fms after sendTime(last confirmed heartbeat)+TTL (cause: %s)",
					e.Proc, e.Kind, e.Res, e.Hold, ms(late), e.Cause)
			}
		case e.Type == EvEnd && e.How == "release":
			if late := e.T - (e.Deadline + c.boundOf(e.Proc)); c.late(e.Proc, e.Deadline, e.T) {
				c.violate("deadline", e.T, "p%d %s %s hold %s: still held %.1fms after sendTime(last confirmed heartbeat)+TTL",
					e.Proc, e.Kind, e.Res, e.Hold, ms(late))
			}
		case e.Type == EvLate:
			if late := e.T - (e.Deadline + c.boundOf(e.Proc)); c.late(e.Proc, e.Deadline, e.T) {
				c.violate("deadline", e.T, "p%d %s hold %s: context not canceled %.1fms after sendTime(last confirmed heartbeat)+TTL",
					e.Proc, e.Kind, e.Hold, ms(late))
			}
		}
	}
	if math.IsInf(c.s.MaxCancelMs, -1) {
		c.s.MaxCancelMs = 0
	}
}

// store: the fenced store accepted no operation from a holder superseded
// there (a larger token seen before), and lost no update.
//
// The holders log their operations once each has returned, so the store's
// own order is not in the log; the values give it back. A write stores the
// value its holder read + 1, so without a lost update the accepted writes
// of a key stored 1, 2, ..., N in the store's order, and a read that
// returned k ran between the writes of k and k+1. Per key:
//   - no operation failed: its outcome would be unknown (the store is never
//     faulted, and holders wait storeTimeout for it);
//   - lost-update: the accepted writes stored each of 1..N once (the same
//     value twice: two writes computed from one read; a value above N: a
//     write computed from a value never stored), and the store ends with N.
//     A Set accepted but missing from the log shows there too: the store
//     then ends above N;
//   - store: tokens never decrease along the writes 1..N; a read of k has a
//     token at least that of the write of k, whose token it returned, and
//     at most that of the write of k+1 (it raised the mark before); and an
//     operation sent after another's answer came has a token at least as
//     high. The one order the values do not give, between reads of the same
//     value that overlap in time, is the one case a fence that wrongly
//     accepted a stale read could go unnoticed here, and only if that
//     holder's next write was refused: its read then changed nothing.
//
// Accepted operations sent after a newer grant was observed are counted
// (LateAccepted): harmless for the store, since the newer holder had not
// used it yet, but a sign of overlap.
func (c *checker) store(ops []Op) {
	c.s.StoreOps = len(ops)
	byKey := map[string][]Op{}
	for _, o := range ops {
		if o.Recv == 0 {
			o.Recv = o.Sent
		}
		switch {
		case o.Err != "":
			c.violate("store", o.Sent, "%s: %v failed, outcome unknown: %s", o.Key, o, o.Err)
		case !o.Accepted:
			c.s.StaleRejected++
		default:
			byKey[o.Key] = append(byKey[o.Key], o)
			c.lateOp(o)
		}
	}
	keys := slices.Collect(maps.Keys(byKey))
	for k := range c.p.StoreFinal {
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		c.storeKey(k, byKey[k])
	}
}

// storeKey checks the accepted operations on one key (see store).
func (c *checker) storeKey(key string, acc []Op) {
	writes, n := c.storeWrites(key, acc)
	var hi int64
	for k := int64(1); k <= n; k++ {
		if w, ok := writes[k]; ok {
			if w.Token < hi {
				c.violate("store", w.Sent, "%s: %v accepted after a write with token %d", key, w, hi)
			}
			hi = max(hi, w.Token)
		}
	}
	c.storeReads(key, acc, writes)
	c.storeRealTime(key, acc)
	c.storeFinal(key, n)
}

// storeWrites returns the accepted writes on key by the value each
// stored, and how many there are; a value stored twice, or beyond the
// count, is a lost update.
func (c *checker) storeWrites(key string, acc []Op) (map[int64]Op, int64) {
	writes := map[int64]Op{}
	var n int64
	for _, o := range acc {
		if o.Op == "w" {
			n++
		}
	}
	for _, o := range acc {
		if o.Op != "w" {
			continue
		}
		if prev, dup := writes[o.Value]; dup {
			c.violate("lost-update", o.Sent, "%s: %v and %v both stored %d: an update was lost", key, prev, o, o.Value)
			continue
		}
		if o.Value < 1 || o.Value > n {
			c.violate("lost-update", o.Sent, "%s: %v stored %d, but %d writes were accepted: an update was lost", key, o, o.Value, n)
		}
		writes[o.Value] = o
	}
	return writes, n
}

// storeReads checks each accepted read on key against writes: it returns
// the token of the value's write, and the next write has a token at least
// the read's (a read raises the mark).
func (c *checker) storeReads(key string, acc []Op, writes map[int64]Op) {
	for _, r := range acc {
		if r.Op != "r" {
			continue
		}
		if w, ok := writes[r.Value]; ok && (r.Writer != w.Token || r.Token < w.Token) {
			c.violate("store", r.Sent, "%s: %v returned writer token %d, the value's write was %v", key, r, r.Writer, w)
		}
		if w, ok := writes[r.Value+1]; ok && w.Token < r.Token {
			c.violate("store", w.Sent, "%s: %v accepted after %v had raised the mark", key, w, r)
		}
	}
}

// storeRealTime checks real time on key: an operation sent after
// another's answer came is after it in the store.
func (c *checker) storeRealTime(key string, acc []Op) {
	byRecv := slices.SortedFunc(slices.Values(acc), func(a, b Op) int { return cmp.Compare(a.Recv, b.Recv) })
	bySent := slices.SortedFunc(slices.Values(acc), func(a, b Op) int { return cmp.Compare(a.Sent, b.Sent) })
	var done int64
	j := 0
	for _, o := range bySent {
		for ; j < len(byRecv) && byRecv[j].Recv < o.Sent; j++ {
			done = max(done, byRecv[j].Token)
		}
		if o.Token < done {
			c.violate("store", o.Sent, "%s: %v accepted, sent after an operation with token %d had been answered", key, o, done)
		}
	}
}

// storeFinal checks the store's final value of key, when it was read,
// against the n accepted writes.
func (c *checker) storeFinal(key string, n int64) {
	if c.p.StoreFinal == nil {
		return
	}
	switch f := c.p.StoreFinal[key]; {
	case f < n:
		c.violate("lost-update", c.p.End, "%s: the store ends with %d after %d accepted writes: an update was lost", key, f, n)
	case f > n:
		c.violate("store", c.p.End, "%s: the store ends with %d, but the holders logged %d accepted writes", key, f, n)
	}
}

// lateOp counts (and, unless a pause explains it, reports) an accepted
// operation sent after a grant of the resource with a larger token was
// observed.
func (c *checker) lateOp(o Op) {
	hs := c.byRes[o.Key]
	i := sort.Search(len(hs), func(i int) bool { return hs[i].grant.T >= o.Sent })
	for _, g := range hs[:i] {
		if g.grant.Token > o.Token {
			c.s.LateAccepted++
			proc := -1
			if h := c.holds[o.Hold]; h != nil {
				proc = h.grant.Proc
			}
			if !c.pausedExcuse(proc, g.grant.T, o.Sent) {
				c.violate("late-op", o.Sent, "%s: hold %s (token %d) used the resource after p%d was granted token %d at %s",
					o.Key, o.Hold, o.Token, g.grant.Proc, g.grant.Token, c.at(g.grant.T))
			}
			return
		}
	}
}

// liveness: after a heal, every kind is granted again within the bound,
// unless another fault came first.
func (c *checker) liveness() {
	bound := int64(c.p.Liveness)
	for _, h := range c.heals {
		next := int64(math.MaxInt64)
		for _, f := range c.faults {
			if f.T > h.T {
				next = min(next, f.T)
			}
		}
		worst := int64(0)
		conclusive := true
		for _, kind := range c.p.Kinds {
			gs := c.grants[kind]
			i := sort.Search(len(gs), func(i int) bool { return gs[i].T > h.T })
			if i == len(gs) || gs[i].T-h.T > bound {
				if next < satAdd(h.T, bound) || c.p.End < satAdd(h.T, bound) {
					conclusive = false
					continue
				}
				got := "none"
				if i < len(gs) {
					got = fmt.Sprintf("%.0fms", ms(gs[i].T-h.T))
				}
				c.violate("liveness", h.T, "no %s granted within %v after the heal (%s); first grant: %s", kind, c.p.Liveness, h.Detail, got)
				c.s.Stuck = true
				continue
			}
			worst = max(worst, gs[i].T-h.T)
		}
		if conclusive {
			c.s.RecoveryMs = max(c.s.RecoveryMs, ms(worst))
		}
	}
}

// Fault kinds after which Redis has lost the namespace's data (dataLoss).
const (
	FaultRestartEmpty = "restart-empty" // restarted without persistence
	FaultFlush        = "flush"         // FLUSHALL or FLUSHDB
)

// dataLoss reports whether a fault of kind leaves Redis without the
// namespace's data: holders inside their deadline must then reclaim.
func dataLoss(kind string) bool { return kind == FaultRestartEmpty || kind == FaultFlush }

// reclaims: across a restart without persistence (or a flush), holds whose
// session was still inside its deadline when Redis came back are
// reclaimed, not lost.
func (c *checker) reclaims() {
	for _, f := range c.faults {
		if !dataLoss(f.Kind) {
			continue
		}
		ready := int64(-1)
		for _, h := range c.heals {
			if h.T >= f.T {
				ready = h.T
				break
			}
		}
		if ready < 0 {
			continue
		}
		window := ready + int64(c.p.Grace+2*c.p.TTL)
		for _, h := range c.holds {
			if h.grant.T >= f.T || h.stop < f.T {
				continue
			}
			c.s.HeldAcross++
			switch {
			case h.end != nil && h.end.How == "lost" && h.end.T <= window:
				c.s.LostAcross++
				if h.end.Deadline > ready+int64(c.ttl(h.grant.Proc)/2) {
					c.violate("reclaim", h.end.T, "%s %s: lost across the restart although its session's deadline was %.0fms after Redis came back (cause: %s)",
						c.describe(h), h.grant.Kind, ms(h.end.Deadline-ready), h.end.Cause)
				}
			case h.stop > ready:
				c.s.KeptAcross++
			}
		}
	}
}

// jobSlots: no slot of the scheduled job runs twice (overlapping runs are
// exclusive's, token order tokens'); slots that no run covered between the
// first run and the last are counted, not judged: a slot is missed when no
// process could claim it in time, e.g. during a fault.
func (c *checker) jobSlots() {
	seen := map[string]*hold{}
	var slots []time.Time
	for _, h := range c.byRes[Job+"/"+jobName] {
		if o := seen[h.grant.Detail]; o != nil {
			c.s.JobDuplicates++
			c.violate("slot", h.grant.T, "job slot %s ran twice: %s, then %s", h.grant.Detail, c.describe(o), c.describe(h))
			continue
		}
		seen[h.grant.Detail] = h
		t, err := time.Parse(time.RFC3339, h.grant.Detail)
		if err != nil {
			c.violate("slot", h.grant.T, "job run %s: bad slot %q", c.describe(h), h.grant.Detail)
			continue
		}
		slots = append(slots, t)
	}
	c.s.JobRuns = len(seen)
	slices.SortFunc(slots, time.Time.Compare)
	for i := 1; i < len(slots); i++ {
		c.s.JobMissed += int(slots[i].Sub(slots[i-1])/time.Second) - 1
	}
}
