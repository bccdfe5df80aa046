package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"
)

type envInfo struct {
	Date       string
	GoVersion  string
	GOMAXPROCS int
	NumCPU     int
	CPU        string
	Redis      string
	OS         string
	LoadStart  string // /proc/loadavg when the run started: other work on the machine
	LoadEnd    string
}

type results struct {
	Env         envInfo
	Config      config
	Elapsed     string
	Uncontended []uncRow
	Contended   []contRow
	TryLock     []tryRow
	Heartbeat   []hbRow
	Scale       *scaleResult `json:",omitempty"`
	Memory      *memResult   `json:",omitempty"`
	Loss        []lossRow
	RWMutex     []rwRow      `json:",omitempty"`
	Flight      []flightRow  `json:",omitempty"`
	Cluster     []clusterRow `json:",omitempty"`
	// OneCPUErr: why the uncontended scenario has no runs on one CPU.
	OneCPUErr     string `json:",omitempty"`
	Targets       []target
	HarnessErrors []string
}

type target struct {
	Target   string
	Measured string
	Status   string // MET, MISSED, or n/a
	Detail   string `json:",omitempty"`
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianOf returns, field by field, the median over rounds of a struct of
// float64 fields; error and overlap counts are summed instead.
func medianOf[T any](rounds []T) T {
	var out T
	if len(rounds) == 0 {
		return out
	}
	ov := reflect.ValueOf(&out).Elem()
	t := ov.Type()
	for i := range t.NumField() {
		if t.Field(i).Type.Kind() != reflect.Float64 {
			continue
		}
		name := t.Field(i).Name
		xs := make([]float64, len(rounds))
		for j, r := range rounds {
			xs[j] = reflect.ValueOf(r).Field(i).Float()
		}
		if strings.HasSuffix(name, "Errors") || name == "Overlaps" {
			var s float64
			for _, x := range xs {
				s += x
			}
			ov.Field(i).SetFloat(s)
			continue
		}
		ov.Field(i).SetFloat(median(xs))
	}
	return out
}

// ---- targets ----

func (h *harness) row(name string) (uncRow, bool) {
	for _, r := range h.res.Uncontended {
		if r.Contender == name {
			return r, r.Err == "" && len(r.Serial) > 0
		}
	}
	return uncRow{}, false
}

func (h *harness) cont(name string) (contRow, bool) {
	for _, r := range h.res.Contended {
		if r.Contender == name {
			return r, r.Err == "" && len(r.Rounds) > 0
		}
	}
	return contRow{}, false
}

func (h *harness) try(name string) (tryRow, bool) {
	for _, r := range h.res.TryLock {
		if r.Contender == name {
			return r, r.Err == "" && len(r.Rounds) > 0
		}
	}
	return tryRow{}, false
}

const (
	lh  = "leasehold mutex"
	raw = "raw SET NX PX + CAD"
)

// atLeast and atMost build a target verdict with the shortfall.
func atLeast(name string, got, want float64, unit, measured string) target {
	t := target{Target: name, Measured: measured}
	if got >= want {
		t.Status = "MET"
	} else {
		t.Status = "MISSED"
		t.Detail = fmt.Sprintf("short by %s%s (%.1f%% below)", num(want-got), unit, 100*(want-got)/want)
	}
	return t
}

func atMost(name string, got, want float64, unit, measured string) target {
	t := target{Target: name, Measured: measured}
	if got <= want {
		t.Status = "MET"
	} else {
		t.Status = "MISSED"
		over := "n/a"
		if want > 0 {
			over = fmt.Sprintf("%.1f%% above", 100*(got-want)/want)
		}
		t.Detail = fmt.Sprintf("over by %s%s (%s)", num(got-want), unit, over)
	}
	return t
}

func notMeasured(name, why string) target {
	return target{Target: name, Measured: "not measured", Status: "n/a", Detail: why}
}

// targets judges the run against leasehold's targets, one row per target,
// in the order of the report.
func (h *harness) targets() []target {
	var ts []target
	ts = append(ts, h.uncontendedTargets()...)
	ts = append(ts, h.tryLockTargets()...)
	ts = append(ts, h.contendedTargets()...)
	ts = append(ts, h.heartbeatTarget(), h.scaleTarget(), h.memoryTarget())
	ts = append(ts, h.lossTargets()...)
	return append(ts, h.clusterTargets()...)
}

// highest returns the row that ok accepts with the highest score above 0
// (the first of equals), its score, and whether there was one.
func highest[T any](rows []T, ok func(T) bool, score func(T) float64) (best T, v float64, found bool) {
	for _, r := range rows {
		if ok(r) && score(r) > v {
			best, v, found = r, score(r), true
		}
	}
	return best, v, found
}

// lowest returns the row that ok accepts with the lowest finite score (the
// first of equals), its score, and whether there was one.
func lowest[T any](rows []T, ok func(T) bool, score func(T) float64) (best T, v float64, found bool) {
	v = math.Inf(1)
	for _, r := range rows {
		if ok(r) && score(r) < v {
			best, v, found = r, score(r), true
		}
	}
	return best, v, found
}

// The peers a leasehold figure is compared with: measured, no error.
func uncPeer(r uncRow) bool   { return r.Group == "peer" && r.Err == "" && len(r.Serial) > 0 }
func tryPeer(r tryRow) bool   { return r.Group == "peer" && r.Err == "" && len(r.Rounds) > 0 }
func contPeer(r contRow) bool { return r.Group == "peer" && r.Err == "" }

// uncontendedTargets judges the leasehold mutex's uncontended lock+release:
// speed and CPU against the peers, the other kinds against the mutex, and
// the commands and requests it costs.
func (h *harness) uncontendedTargets() []target {
	l, ok := h.row(lh)
	if !ok {
		return []target{notMeasured("uncontended lock+release >= 1.0x the best peer; 2 requests", "uncontended scenario not run or failed")}
	}
	ts := h.uncSpeedTargets(l)
	ts = append(ts, h.uncCPUTargets(l)...)
	ts = append(ts, h.kindTargets(l)...)
	cmds := l.SerialMed.SrvCmdPerOp
	ts = append(ts, atMost("at most 8 Redis commands per uncontended lock+release", cmds, 8, " commands",
		fmt.Sprintf("%.1f (scripts' inner commands included)", cmds)))
	return append(ts, requestsTarget(l))
}

// uncSpeedTargets: ops/s, serial and parallel, against the best peer
// measured in the same run (that is the choice a user makes).
func (h *harness) uncSpeedTargets(l uncRow) []target {
	var ts []target
	for _, m := range []struct {
		name string
		run  func(uncRow) uncRun
	}{
		{"uncontended serial lock+release", func(r uncRow) uncRun { return r.SerialMed }},
		{fmt.Sprintf("uncontended %d-goroutine lock+release", h.cfg.Workers), func(r uncRow) uncRun { return r.ParallelMed }},
	} {
		name := m.name + " >= 1.0x the best peer"
		b, best, found := highest(h.res.Uncontended, uncPeer, func(r uncRow) float64 { return m.run(r).OpsPerSec })
		if !found {
			ts = append(ts, notMeasured(name, "no peer measured"))
			continue
		}
		lr, br := m.run(l), m.run(b)
		x := lr.OpsPerSec / best
		ts = append(ts, atLeast(name, x, 1.0, "x",
			fmt.Sprintf("%.2fx (%s vs %s, %s ops/s; p50 %s vs %s µs, p99 %s vs %s µs)", x, num(lr.OpsPerSec), b.Contender, num(best),
				num(lr.P50us), num(br.P50us), num(lr.P99us), num(br.P99us))))
	}
	return ts
}

// uncCPUTargets: CPU per serial lock+release, client and Redis, against the
// lowest peer's.
func (h *harness) uncCPUTargets(l uncRow) []target {
	var ts []target
	for _, m := range []struct {
		name string
		get  func(uncRun) float64
	}{
		{"client CPU", func(u uncRun) float64 { return u.ClientCPUus }},
		{"Redis CPU", func(u uncRun) float64 { return u.SrvCPUus }},
	} {
		b, low, found := lowest(h.res.Uncontended, uncPeer, func(r uncRow) float64 { return m.get(r.SerialMed) })
		if !found {
			continue
		}
		x := m.get(l.SerialMed) / low
		ts = append(ts, atMost(fmt.Sprintf("%s per serial lock+release <= 1.1x the lowest peer's", m.name), x, 1.1, "x",
			fmt.Sprintf("%.2fx (%s vs %s, %s µs)", x, num(m.get(l.SerialMed)), b.Contender, num(low))))
	}
	return ts
}

// kindTargets: the other kinds against the mutex, in the same run.
func (h *harness) kindTargets(l uncRow) []target {
	var ts []target
	for _, kind := range []string{"semaphore", "pool", "rwmutex"} {
		k, ok := h.row("leasehold " + kind)
		if !ok {
			continue
		}
		for _, m := range []struct {
			name string
			run  func(uncRow) uncRun
		}{
			{"serial", func(r uncRow) uncRun { return r.SerialMed }},
			{fmt.Sprintf("%d-goroutine", h.cfg.Workers), func(r uncRow) uncRun { return r.ParallelMed }},
		} {
			kr, lr := m.run(k), m.run(l)
			x := kr.OpsPerSec / lr.OpsPerSec
			ts = append(ts, atLeast(fmt.Sprintf("uncontended %s %s >= 0.8x the mutex", kind, m.name), x, 0.8, "x",
				fmt.Sprintf("%.2fx (%s vs %s ops/s; %.1f Redis commands per acquire+release)", x, num(kr.OpsPerSec), num(lr.OpsPerSec), kr.SrvCmdPerOp)))
		}
	}
	return ts
}

// requestsTarget: serially each call is one request; concurrent calls of
// one session may share one (internal/scripts/batch.go).
func requestsTarget(l uncRow) target {
	var ops, reqs, beats, pops, preqs float64
	exact := true
	for _, u := range l.Serial {
		ops, reqs, beats = ops+u.Ops, reqs+u.Reqs, beats+u.Heartbeats
		exact = exact && u.Reqs == 2*u.Ops
	}
	for _, u := range l.Parallel {
		pops, preqs, beats = pops+u.Ops, preqs+u.Reqs, beats+u.Heartbeats
	}
	t := target{Target: "2 client requests per lock+release (exactly 2 serially, at most 2 from 32 goroutines)",
		Measured: fmt.Sprintf("serial: %s requests for %s lock+release over all rounds (%.4f each); 32 goroutines: %.4f each; heartbeats apart: %s",
			num(reqs), num(ops), reqs/ops, preqs/pops, num(beats))}
	switch {
	case !exact:
		t.Status = "MISSED"
		t.Detail = fmt.Sprintf("serial: %s requests more than 2 per lock+release", num(reqs-2*ops))
	case preqs > 2*pops:
		t.Status = "MISSED"
		t.Detail = fmt.Sprintf("32 goroutines: %s requests more than 2 per lock+release", num(preqs-2*pops))
	default:
		t.Status = "MET"
	}
	return t
}

// tryLockTargets: failed TryLock ops/s against the best peer's.
func (h *harness) tryLockTargets() []target {
	lt, ok := h.try(lh)
	if !ok {
		return nil
	}
	b, best, found := highest(h.res.TryLock, tryPeer, func(r tryRow) float64 { return r.Med.OpsPerSec })
	if !found {
		return nil
	}
	x := lt.Med.OpsPerSec / best
	return []target{atLeast("failed TryLock ops/s >= 1.0x the best peer", x, 1.0, "x",
		fmt.Sprintf("%.2fx (%s vs %s, %s ops/s; p50 %.0f vs %.0f µs)", x, num(lt.Med.OpsPerSec), b.Contender, num(best),
			lt.Med.P50us, b.Med.P50us))}
}

// contendedTargets judges the leasehold mutex's hand-offs: speed and Redis
// CPU against the peers, the gap against one round trip, and what a
// hand-off and a waiter cost.
func (h *harness) contendedTargets() []target {
	lc, ok := h.cont(lh)
	if !ok {
		return []target{notMeasured("contended targets", "contended scenario not run or failed")}
	}
	ts := h.bestPeerHandoffTarget(lc)
	ts = append(ts, h.everyPeerTargets(lc)...)
	ts = append(ts, h.gapTargets(lc)...)
	m := lc.Med
	ts = append(ts, atMost("re-acquisition by the releasing worker <= 5%", m.ReacqPct, 5, " points",
		fmt.Sprintf("%.2f%%", m.ReacqPct)))
	ts = append(ts, atMost("client requests per hand-off <= 2", m.ReqPerHandoff, 2, "",
		fmt.Sprintf("%.3f (+ %.4f heartbeats per hand-off, sent by the sessions whatever the hand-offs)", m.ReqPerHandoff, m.BeatsPerHandoff)))
	ts = append(ts, pollingTarget(lc))
	if m.Overlaps > 0 {
		ts = append(ts, target{Target: "mutual exclusion (no overlapping holders)", Measured: num(m.Overlaps) + " overlaps", Status: "MISSED"})
	}
	return ts
}

// bestPeerHandoffTarget: hand-offs/s against the best peer's, with the
// acquisitions for reference: counted as acquisitions (re-acquisitions by
// the releasing worker included), peers that keep the lock look better.
func (h *harness) bestPeerHandoffTarget(lc contRow) []target {
	b, best, found := highest(h.res.Contended, contPeer, func(r contRow) float64 { return r.Med.HandoffsPerSec })
	if !found {
		return nil
	}
	x := lc.Med.HandoffsPerSec / best
	t := atLeast("contended hand-offs/s >= 2x the best peer", x, 2, "x",
		fmt.Sprintf("%.2fx (%s vs %s, %s hand-offs/s)", x, num(lc.Med.HandoffsPerSec), b.Contender, num(best)))
	a, bestAcq, _ := highest(h.res.Contended, contPeer, func(r contRow) float64 { return r.Med.AcqPerSec })
	t.Measured += fmt.Sprintf("; counting re-acquisitions too: %.2fx (%s vs %s, %s acquisitions/s)",
		lc.Med.AcqPerSec/bestAcq, num(lc.Med.AcqPerSec), a.Contender, num(bestAcq))
	return []target{t}
}

// everyPeerTargets: hand-offs/s at least 1.5x every peer's, a spinning one
// included, and Redis CPU per hand-off at most half of every peer's.
func (h *harness) everyPeerTargets(lc contRow) []target {
	worst, worstName := math.Inf(1), ""
	cpuWorst, cpuWorstName, cpuPeer := math.Inf(1), "", 0.0
	lcCPU := srvCPUPerHandoff(lc.Med)
	for _, c := range h.res.Contended {
		if !contPeer(c) || c.Med.HandoffsPerSec <= 0 {
			continue
		}
		if x := lc.Med.HandoffsPerSec / c.Med.HandoffsPerSec; x < worst {
			worst, worstName = x, c.Contender
		}
		peerCPU := srvCPUPerHandoff(c.Med)
		if x := lcCPU / peerCPU; x < math.Inf(1) && (cpuWorstName == "" || x > cpuWorst) {
			cpuWorst, cpuWorstName, cpuPeer = x, c.Contender, peerCPU
		}
	}
	if worstName == "" {
		return nil
	}
	return []target{
		atLeast("contended hand-offs/s >= 1.5x every peer's", worst, 1.5, "x",
			fmt.Sprintf("%.2fx the closest (%s)", worst, worstName)),
		atMost("Redis CPU per contended hand-off <= 0.5x every peer's", cpuWorst, 0.5, "x",
			fmt.Sprintf("%.2fx the lowest (%s: %s vs %s µs per hand-off)", cpuWorst, cpuWorstName, num(lcCPU), num(cpuPeer))),
	}
}

// srvCPUPerHandoff is the Redis CPU of a contended run per hand-off, µs.
func srvCPUPerHandoff(m contRun) float64 { return m.SrvCPUus * m.AcqPerSec / m.HandoffsPerSec }

// gapTargets: one round trip is defined as the p50 of a failed TryLock in
// the same run. The run has two: timed under the load the gap is measured
// in (contended scenario), and on an idle server (trylock scenario). Both
// are judged, each in its own row.
func (h *harness) gapTargets(lc contRow) []target {
	m := lc.Med
	ts := []target{atMost("release-to-next-owner gap p50 <= one round trip (failed TryLock p50 under the same load)",
		m.GapP50us, m.TryP50us, " µs",
		fmt.Sprintf("gap p50 %.0f µs vs failed TryLock p50 %.0f µs under the contended load (a PING under that load: p50 %.0f µs)",
			m.GapP50us, m.TryP50us, m.PingP50us))}
	lt, ok := h.try(lh)
	if !ok {
		return append(ts, notMeasured("release-to-next-owner gap p50 <= idle failed TryLock p50", "trylock scenario not run"))
	}
	return append(ts, atMost("release-to-next-owner gap p50 <= one round trip (failed TryLock p50 on an idle server)",
		m.GapP50us, lt.Med.P50us, " µs",
		fmt.Sprintf("gap p50 %.0f µs vs failed TryLock p50 %.0f µs on an idle server (%.2fx)",
			m.GapP50us, lt.Med.P50us, m.GapP50us/lt.Med.P50us)))
}

// pollingTarget: a waiter sends no request while it waits, judged on the
// worst round.
func pollingTarget(lc contRow) target {
	var polling float64
	for _, rr := range lc.Rounds {
		polling = max(polling, rr.PollingLocksPct)
	}
	return atMost("no request from a waiter while it waits", polling, 0, "% of Lock calls",
		fmt.Sprintf("requests per Lock %.3f; Lock calls with more than 1 request: %.3f%% (worst round)", lc.Med.ReqPerLock, polling))
}

// heartbeatTarget: one request per heartbeat at 10,000 holds, judged on the
// worst round.
func (h *harness) heartbeatTarget() target {
	var hb10k *hbRow
	for i := range h.res.Heartbeat {
		if h.res.Heartbeat[i].Holds == 10000 {
			hb10k = &h.res.Heartbeat[i]
		}
	}
	if hb10k == nil || hb10k.Err != "" || len(hb10k.Rounds) == 0 {
		return notMeasured("heartbeat at 10,000 holds", "heartbeat scenario not run or failed")
	}
	worst := 0.0
	for _, r := range hb10k.Rounds {
		worst = max(worst, r.ReqPerBeat)
	}
	return atMost("heartbeat: 1 request per heartbeat at 10,000 holds", worst, 1, " requests",
		fmt.Sprintf("%.2f requests per heartbeat (worst round), %.2f heartbeats per interval; Redis %.1f µs per heartbeat",
			worst, hb10k.Med.BeatsPerInt, hb10k.Med.SrvUsPerBeat))
}

// scaleTarget: no lease lost in the scale run; a run shorter or smaller
// than the target's says so.
func (h *harness) scaleTarget() target {
	s := h.res.Scale
	if s == nil || s.Err != "" {
		return notMeasured("1,000 sessions x 10 holds: no lease lost", "scale scenario not run or failed")
	}
	t := target{Target: fmt.Sprintf("%s sessions x %d holds, heartbeat %s, %s: no lease lost", count(s.Sessions), s.HoldsPerSession, s.Heartbeat, s.Duration),
		Measured: fmt.Sprintf("%d leases, %d holds lost; Redis CPU %.1f%%", s.LeasesLost, s.HoldsLost, s.RedisCPUPct)}
	if s.LeasesLost == 0 && s.HoldsLost == 0 {
		t.Status = "MET"
	} else {
		t.Status = "MISSED"
		t.Detail = fmt.Sprintf("%d leases lost", s.LeasesLost)
	}
	if s.Sessions < 1000 || h.cfg.ScaleDuration < 60*time.Second {
		t.Detail = strings.TrimSpace(t.Detail + " shortened run: the target is 1,000 sessions for 60 s")
	}
	return t
}

// lossTargets: the leasehold mutex learns of a loss before its key expires,
// in every run.
func (h *harness) lossTargets() []target {
	const name = "loss detection margin > 0 in every run"
	var ts []target
	for _, l := range h.res.Loss {
		if l.Contender != lh {
			continue
		}
		if l.Err != "" || len(l.Rounds) == 0 {
			ts = append(ts, notMeasured(name, "loss scenario failed"))
			continue
		}
		t := target{Target: name,
			Measured: fmt.Sprintf("min %.1f ms, median %.1f ms over %d runs", l.MinMs, l.MedMs, len(l.Rounds))}
		if l.MinMs > 0 {
			t.Status = "MET"
		} else {
			t.Status = "MISSED"
			t.Detail = fmt.Sprintf("worst run %.1f ms", l.MinMs)
		}
		ts = append(ts, t)
	}
	return ts
}

// ---- markdown ----

// num formats a number compactly: 12345 -> "12,345", 12.3456 -> "12.3".
func num(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	switch ax := math.Abs(x); {
	case ax >= 1000:
		s := fmt.Sprintf("%.0f", x)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		if neg {
			return "-" + b.String()
		}
		return b.String()
	case ax >= 100:
		return fmt.Sprintf("%.0f", x)
	case ax >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

// count formats an integer with thousands separators.
func count(n int) string {
	if n < 1000 && n > -1000 {
		return fmt.Sprint(n)
	}
	return num(float64(n))
}

func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

type table struct {
	b    *strings.Builder
	cols int
}

func newTable(b *strings.Builder, head ...string) table {
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for range head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	return table{b, len(head)}
}

func (t table) row(cells ...string) {
	for len(cells) < t.cols {
		cells = append(cells, "")
	}
	t.b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

// markdown renders the report: the targets, then a section per scenario
// run.
func (h *harness) markdown() string {
	var b strings.Builder
	h.headerMarkdown(&b)
	h.targetsMarkdown(&b)
	h.uncontendedMarkdown(&b)
	h.contendedMarkdown(&b)
	h.tryLockMarkdown(&b)
	h.heartbeatMarkdown(&b)
	h.memoryMarkdown(&b)
	h.flightMarkdown(&b)
	h.clusterMarkdown(&b)
	h.scaleMarkdown(&b)
	h.lossMarkdown(&b)
	h.errorsMarkdown(&b)
	h.rwMarkdown(&b)
	h.contendersMarkdown(&b)
	return b.String()
}

// headerMarkdown is the title, the machine and the run, and how to read
// the ratios.
func (h *harness) headerMarkdown(b *strings.Builder) {
	e, c := h.res.Env, h.cfg
	fmt.Fprintf(b, "# leasehold bench (%s mode)\n\n", modeName(c))
	fmt.Fprintf(b, "%s · %s · %d CPUs (GOMAXPROCS %d) · %s · Redis %s · %s · %d rounds, medians · took %s\n\n",
		e.Date, e.CPU, e.NumCPU, e.GOMAXPROCS, e.GoVersion, e.Redis, e.OS, c.Rounds, h.res.Elapsed)
	if e.LoadStart != "" {
		fmt.Fprintf(b, "Load average (1, 5, 15 min) at start %s, at end %s: anything above ~0.1 is other work sharing the %d CPUs with the bench.\n\n", e.LoadStart, e.LoadEnd, e.NumCPU)
	}
	b.WriteString("Ratios are against the raw baseline (rueidis SET NX PX + compare-and-delete) of the same run. " +
		"`req` counts client requests (commands sent), `srv cmd` the commands Redis executed (those inside scripts too, from INFO commandstats).\n\n")
}

func (h *harness) targetsMarkdown(b *strings.Builder) {
	b.WriteString("## Targets\n\n")
	t := newTable(b, "target", "measured", "status")
	for _, x := range h.res.Targets {
		st := x.Status
		if x.Detail != "" {
			st += ": " + x.Detail
		}
		t.row(x.Target, x.Measured, st)
	}
	b.WriteString("\n")
}

func (h *harness) uncontendedMarkdown(b *strings.Builder) {
	if len(h.res.Uncontended) == 0 {
		return
	}
	var rawS, rawP float64 = math.NaN(), math.NaN()
	if r, ok := h.row(raw); ok {
		rawS, rawP = r.SerialMed.OpsPerSec, r.ParallelMed.OpsPerSec
	}
	fmt.Fprintf(b, "## Uncontended lock+release\n\nSerial: one goroutine, one key. Parallel: %d goroutines on one client, each on its own key. %v window per run.\n\n", h.cfg.Workers, h.cfg.Duration)
	t := newTable(b, "contender", "serial ops/s", "x raw", "p50 µs", "p99 µs", "req/op", "srv cmd/op", "client CPU µs/op", "Redis CPU µs/op",
		"parallel ops/s", "x raw", "p50 µs", "p99 µs", "req/op", "srv reads/op", "client CPU µs/op", "Redis CPU µs/op", "errors")
	for _, r := range h.res.Uncontended {
		if r.Err != "" && len(r.Serial) == 0 {
			t.row(r.Contender, "ERROR: "+r.Err)
			continue
		}
		s, p := r.SerialMed, r.ParallelMed
		t.row(r.Contender, num(s.OpsPerSec), ratio(s.OpsPerSec, rawS), num(s.P50us), num(s.P99us), num(s.ReqPerOp), num(s.SrvCmdPerOp),
			num(s.ClientCPUus), num(s.SrvCPUus), num(p.OpsPerSec), ratio(p.OpsPerSec, rawP), num(p.P50us), num(p.P99us), num(p.ReqPerOp),
			num(p.SrvReadsPerOp), num(p.ClientCPUus), num(p.SrvCPUus), count(int(s.Errors+p.Errors)))
	}
	b.WriteString("\nRedis commands per serial lock+release (last round; commands inside scripts included):\n\n")
	for _, r := range h.res.Uncontended {
		if len(r.SerialMed.ServerCommands) > 0 {
			fmt.Fprintf(b, "- %s: %s\n", r.Contender, serverCommands(r.SerialMed.ServerCommands))
		}
	}
	b.WriteString("\n")
	h.oneCPUMarkdown(b)
}

// oneCPUMarkdown reports the serial runs made with the bench and Redis on
// one CPU, where a round trip costs the CPU work of both and a context
// switch: the cost of each contender's path, without the wake-ups of an
// idle CPU that make the serial figures above vary so much on a virtual
// machine. Information, not a target: the targets are the runs
// above.
func (h *harness) oneCPUMarkdown(b *strings.Builder) {
	onCPU := func(r uncRow) bool { return r.Err == "" && len(r.OneCPU) > 0 }
	_, best, found := highest(h.res.Uncontended, func(r uncRow) bool { return r.Group == "peer" && onCPU(r) },
		func(r uncRow) float64 { return r.OneCPUMed.OpsPerSec })
	if h.res.OneCPUErr != "" {
		what := "No serial run on one CPU"
		if slices.ContainsFunc(h.res.Uncontended, onCPU) {
			what = "Some serial runs on one CPU are missing"
		}
		fmt.Fprintf(b, "%s: %s.\n\n", what, h.res.OneCPUErr)
	}
	if !found {
		return
	}
	b.WriteString("### Serial lock+release on one CPU\n\nThe serial run again, with the bench and redis-server pinned to one CPU: " +
		"a round trip then costs the client's and Redis' CPU work and a context switch, without the wake-up of an idle CPU. " +
		"Information, not a target.\n\n")
	t := newTable(b, "contender", "ops/s", "x best peer", "p50 µs", "p99 µs", "client CPU µs/op", "Redis CPU µs/op", "client + Redis µs/op")
	for _, r := range h.res.Uncontended {
		if r.OneCPUErr != "" && len(r.OneCPU) == 0 {
			t.row(r.Contender, "ERROR: "+r.OneCPUErr)
		}
		if !onCPU(r) {
			continue
		}
		u := r.OneCPUMed
		t.row(r.Contender, num(u.OpsPerSec), ratio(u.OpsPerSec, best), num(u.P50us), num(u.P99us), num(u.ClientCPUus),
			num(u.SrvCPUus), num(u.ClientCPUus+u.SrvCPUus))
	}
	b.WriteString("\n")
}

// serverCommands lists the commands Redis ran per operation, by name,
// leaving out those under 0.05 per operation.
func serverCommands(perOp map[string]float64) string {
	var parts []string
	for k, v := range perOp {
		if v >= 0.05 {
			parts = append(parts, fmt.Sprintf("%s %s", k, num(v)))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func (h *harness) contendedMarkdown(b *strings.Builder) {
	if len(h.res.Contended) == 0 {
		return
	}
	c := h.cfg
	rawH := math.NaN()
	if r, ok := h.cont(raw); ok {
		rawH = r.Med.HandoffsPerSec
	}
	fmt.Fprintf(b, "## Contended: %d holders on one key, hold %v (%s), each holder with its own client\n\n", c.Holders, c.Hold, c.HoldMode)
	b.WriteString("A hand-off is an acquisition by another worker than the one that released last; `re-acq` is the share of acquisitions by the releasing worker. " +
		"The gap runs from the releaser calling Release to the next owner's Lock returning (monotonic clock, one process). " +
		"`PING under load` is a round trip of a separate client, every 2 ms during the window; `failed TryLock under load` is the same contender's TryLock of another key, held by another of its clients, every 10 ms (neither probe is counted in the requests; both add under 2% to the server's commands). " +
		"`req/Lock` counts the requests a worker sent during one Lock call (heartbeats excluded); `polling Locks` the share of Lock calls that sent more than one. " +
		"Client CPU leaves out the holders' busy-wait.\n\n")
	t := newTable(b, "contender", "hand-offs/s", "x raw", "acq/s", "re-acq", "gap p50 µs", "gap p99 µs", "Release call p50 µs", "PING p50 µs under load", "failed TryLock p50 µs under load", "req/hand-off", "req/Lock", "polling Locks",
		"srv cmd/hand-off", "client CPU µs/acq", "Redis CPU µs/acq", "hold µs", "errors")
	for _, r := range h.res.Contended {
		if r.Err != "" && len(r.Rounds) == 0 {
			t.row(r.Contender, "ERROR: "+r.Err)
			continue
		}
		m := r.Med
		errs := count(int(m.LockErrors + m.ReleaseErrors))
		if m.Overlaps > 0 {
			errs += fmt.Sprintf(", %s OVERLAPS", num(m.Overlaps))
		}
		t.row(r.Contender, num(m.HandoffsPerSec), ratio(m.HandoffsPerSec, rawH), num(m.AcqPerSec), fmt.Sprintf("%.1f%%", m.ReacqPct),
			num(m.GapP50us), num(m.GapP99us), num(m.ReleaseP50us), num(m.PingP50us), num(m.TryP50us), num(m.ReqPerHandoff), num(m.ReqPerLock), fmt.Sprintf("%.1f%%", m.PollingLocksPct),
			num(m.SrvCmdPerHandoff), num(m.ClientCPUus), num(m.SrvCPUus), num(m.HoldUs), errs)
	}
	b.WriteString("\n")
}

func (h *harness) tryLockMarkdown(b *strings.Builder) {
	if len(h.res.TryLock) == 0 {
		return
	}
	rawP := math.NaN()
	if r, ok := h.try(raw); ok {
		rawP = r.Med.P50us
	}
	fmt.Fprintf(b, "## Failed TryLock (key held by another client)\n\n")
	t := newTable(b, "contender", "p50 µs", "x raw", "p99 µs", "ops/s", "req/op", "errors")
	for _, r := range h.res.TryLock {
		if r.Err != "" && len(r.Rounds) == 0 {
			t.row(r.Contender, "ERROR: "+r.Err)
			continue
		}
		m := r.Med
		t.row(r.Contender, num(m.P50us), ratio(m.P50us, rawP), num(m.P99us), num(m.OpsPerSec), num(m.ReqPerOp), count(int(m.Errors)))
	}
	b.WriteString("\n")
}

func (h *harness) heartbeatMarkdown(b *strings.Builder) {
	if len(h.res.Heartbeat) == 0 {
		return
	}
	fmt.Fprintf(b, "## Heartbeat cost versus holds per session (leasehold)\n\nOne session, TTL %v (heartbeat every %v), %v window. "+
		"A sharded session renews one lease copy per shard it holds in: a heartbeat is one script per copy, "+
		"all of an interval's in one round trip. Client CPU is the bench process's per interval.\n\n", hbTTL, hbTTL/3, h.cfg.HBWindow)
	t := newTable(b, "holds", "shards", "heartbeats seen", "heartbeats per interval", "requests per heartbeat", "round trips per interval",
		"Redis µs per heartbeat", "script calls per heartbeat", "client CPU µs per interval")
	for _, r := range h.res.Heartbeat {
		shards := "-"
		if r.Shards > 1 {
			shards = count(r.Shards)
		}
		if r.Err != "" && len(r.Rounds) == 0 {
			t.row(count(r.Holds), shards, "ERROR: "+r.Err)
			continue
		}
		m := r.Med
		t.row(count(r.Holds), shards, count(int(m.Beats)), num(m.BeatsPerInt), num(m.ReqPerBeat), num(m.TripsPerInt),
			num(m.SrvUsPerBeat), num(m.SrvCallsPerBeat), num(m.ClientUsPerInt))
	}
	b.WriteString("\n")
}

func (h *harness) scaleMarkdown(b *strings.Builder) {
	s := h.res.Scale
	if s == nil {
		return
	}
	fmt.Fprintf(b, "## Scale (leasehold)\n\n")
	if s.Err != "" {
		fmt.Fprintf(b, "ERROR: %s\n\n", s.Err)
		return
	}
	t := newTable(b, "sessions", "holds each", "TTL / heartbeat", "duration", "leases lost", "holds lost", "Redis CPU", "client CPU",
		"heartbeats/s", "Redis µs/heartbeat", "heartbeat RTT p50 / p99 / max µs", "least slack before a deadline")
	t.row(count(s.Sessions), count(s.HoldsPerSession), s.TTL+" / "+s.Heartbeat, s.Duration,
		fmt.Sprint(s.LeasesLost), fmt.Sprint(s.HoldsLost), fmt.Sprintf("%.1f%%", s.RedisCPUPct), fmt.Sprintf("%.1f%%", s.ClientCPUPct),
		num(s.HeartbeatsPerS), num(s.SrvUsPerBeat), num(s.BeatP50us)+" / "+num(s.BeatP99us)+" / "+num(s.BeatMaxus),
		fmt.Sprintf("%.0f ms", s.MinSlackMs))
	b.WriteString("\n")
}

func (h *harness) lossMarkdown(b *strings.Builder) {
	if len(h.res.Loss) == 0 {
		return
	}
	b.WriteString("## Lock-loss detection: Redis SIGSTOPped while holding\n\n" +
		"margin = moment the lock's key(s) expire on the server (PEXPIRETIME read just before SIGSTOP) − moment the holder's context is canceled. " +
		"Positive: the holder knew before anyone else could be granted the lock.\n\n")
	t := newTable(b, "contender", "runs", "margin min / median / max ms", "signal after SIGSTOP ms (median)", "setup")
	for _, l := range h.res.Loss {
		switch {
		case l.NA != "":
			t.row(l.Contender, "-", "n/a", "-", l.NA)
		case l.Err != "" && len(l.Rounds) == 0:
			t.row(l.Contender, "-", "ERROR: "+l.Err)
		default:
			t.row(lossCells(l)...)
		}
	}
	b.WriteString("\n")
}

// lossCells is the row of a measured contender in the loss table.
func lossCells(l lossRow) []string {
	var sig []float64
	nosig := 0
	for _, r := range l.Rounds {
		sig = append(sig, r.SignalMs)
		if r.NoSignal {
			nosig++
		}
	}
	mm := fmt.Sprintf("%s / %s / %s", num(l.MinMs), num(l.MedMs), num(l.MaxMs))
	if nosig > 0 {
		mm += fmt.Sprintf(" (%d runs without any signal)", nosig)
	}
	return []string{l.Contender, fmt.Sprint(len(l.Rounds)), mm, num(median(sig)), l.Note}
}

// errorsMarkdown lists the error samples of every round, sorted, each once.
func (h *harness) errorsMarkdown(b *strings.Builder) {
	var errLines []string
	addErrs := func(scen, who string, samples []string) {
		for _, e := range samples {
			errLines = append(errLines, fmt.Sprintf("- %s, %s: %s", scen, who, e))
		}
	}
	for _, r := range h.res.Uncontended {
		for _, u := range append(slices.Clone(r.Serial), r.Parallel...) {
			addErrs("uncontended", r.Contender, u.ErrorSamples)
		}
	}
	for _, r := range h.res.Contended {
		for _, u := range r.Rounds {
			addErrs("contended", r.Contender, u.ErrorSamples)
		}
	}
	for _, r := range h.res.TryLock {
		for _, u := range r.Rounds {
			addErrs("failed TryLock", r.Contender, u.ErrorSamples)
		}
	}
	for _, r := range h.res.Cluster {
		for _, u := range r.Rounds {
			addErrs("cluster", r.Contender, u.ErrorSamples)
		}
	}
	if len(errLines) > 0 {
		slices.Sort(errLines)
		b.WriteString("## Errors the contenders returned (samples)\n\n" + strings.Join(slices.Compact(errLines), "\n") + "\n\n")
	}
}

// contendersMarkdown ends the report: what each contender is, then the
// harness errors, if any.
func (h *harness) contendersMarkdown(b *strings.Builder) {
	var notes []string
	for _, x := range contenders() {
		if x.note != "" {
			notes = append(notes, fmt.Sprintf("- %s: %s", x.name, x.note))
		}
	}
	b.WriteString("## Contenders\n\n" + strings.Join(notes, "\n") + "\n")
	if len(h.res.HarnessErrors) > 0 {
		b.WriteString("\n## Harness errors\n\n- " + strings.Join(h.res.HarnessErrors, "\n- ") + "\n")
	}
}

func (h *harness) write(md string) error {
	if err := os.MkdirAll(h.cfg.Out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(h.res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(h.cfg.Out, "latest.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(h.cfg.Out, "latest.md"), []byte(md), 0o644)
}
