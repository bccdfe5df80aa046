package main

// The report's golden files: testdata/report/run.json (the latest.json of a
// real run, copied so that a new run does not change the test's input) and
// variants of it are rendered as the bench renders them (targets, then
// markdown) and compared with testdata/report/<case>.md and
// <case>.targets.json. The variants reach the branches a healthy run does
// not: scenarios not run, contenders that failed, targets missed.
//
// After an intended change of the report, rewrite the files with
//
//	go test -run TestReportGolden -update
//
// and read the diff.

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/report from the current code")

var reportCases = []struct {
	name string
	edit func(r *results)
}{
	{"latest", func(*results) {}},
	{"nothing-run", func(r *results) {
		*r = results{Env: r.Env, Config: r.Config, Elapsed: r.Elapsed}
		r.Env.LoadStart, r.Env.LoadEnd = "", ""
	}},
	{"failed", failEverything},
	{"missed", missEverything},
	{"missed-parallel-requests", func(r *results) {
		l := &r.Uncontended[uncIndex(r, lh)]
		for i := range l.Parallel {
			l.Parallel[i].Reqs = 3 * l.Parallel[i].Ops
		}
	}},
	{"partial", partialRun},
	{"one-cpu", oneCPURun},
	{"one-cpu-refused", func(r *results) { r.OneCPUErr = "sched_setaffinity of thread 12: operation not permitted" }},
	{"one-cpu-partial", func(r *results) {
		oneCPURun(r)
		r.OneCPUErr = "sched_setaffinity of thread 12: operation not permitted"
		r.Uncontended[uncIndex(r, "redsync")].OneCPU = nil
		l := &r.Uncontended[uncIndex(r, lh)]
		l.OneCPU, l.OneCPUErr = nil, "no lock+release completed (0 errors: [])"
	}},
}

// oneCPURun gives every uncontended row runs on one CPU (its serial runs
// stand in for them) and adds a floor row (raw's, renamed), which must
// never be taken for the best peer; the cluster gets a floor row too
// (raw's again).
func oneCPURun(r *results) {
	for i := range r.Uncontended {
		u := &r.Uncontended[i]
		u.OneCPU, u.OneCPUMed = u.Serial, u.SerialMed
	}
	f := r.Uncontended[uncIndex(r, raw)]
	f.Contender, f.Group = "floor: lease check + clock token", "floor"
	f.OneCPUMed.OpsPerSec *= 10
	r.Uncontended = append(r.Uncontended, f)
	for _, c := range r.Cluster {
		if c.Contender == raw {
			c.Contender, c.Group = clusterFloor, "floor"
			c.Med.RedisCPUus *= 1.4
			r.Cluster = append(r.Cluster, c)
			break
		}
	}
}

// failEverything makes every scenario fail the way the harness records a
// failure: the error, and no rounds.
func failEverything(r *results) {
	for i := range r.Uncontended {
		u := &r.Uncontended[i]
		u.Err, u.Serial, u.Parallel = "dial: refused", nil, nil
	}
	for i := range r.Contended {
		c := &r.Contended[i]
		c.Err, c.Rounds = "no acquisition in the window", nil
	}
	for i := range r.TryLock {
		t := &r.TryLock[i]
		t.Err, t.Rounds = "probe: hold the key", nil
	}
	for i := range r.Heartbeat {
		r.Heartbeat[i].Err, r.Heartbeat[i].Rounds = "take holds", nil
	}
	r.Scale.Err = "open sessions"
	r.Memory.Err = "INFO memory: no used_memory"
	for i := range r.Loss {
		if r.Loss[i].NA == "" {
			r.Loss[i].Err, r.Loss[i].Rounds = "SIGSTOP", nil
		}
	}
	r.RWMutex[1].Err = "workers did not end"
	r.Flight[0].Err, r.Flight[0].Rounds = "callers did not end within 30s", nil
	for i := range r.Cluster {
		r.Cluster[i].Err, r.Cluster[i].Rounds = "cluster not ok after 30s", nil
	}
	r.HarnessErrors = []string{"uncontended raw: dial: refused", "interrupted"}
}

// missEverything makes leasehold miss every target it can miss, in a quick
// run.
func missEverything(r *results) {
	r.Config.Quick, r.Config.ScaleDuration = true, 10*time.Second
	l := &r.Uncontended[uncIndex(r, lh)]
	l.SerialMed.OpsPerSec /= 10
	l.ParallelMed.OpsPerSec /= 10
	l.SerialMed.ClientCPUus *= 10
	l.SerialMed.SrvCPUus *= 10
	l.SerialMed.SrvCmdPerOp = 12
	l.Serial[0].Reqs += 5
	for i := range r.TryLock {
		if r.TryLock[i].Contender == lh {
			r.TryLock[i].Med.OpsPerSec /= 10
			r.TryLock[i].Med.P50us *= 10
		}
	}
	for i := range r.Contended {
		c := &r.Contended[i]
		if c.Contender != lh {
			continue
		}
		c.Med.HandoffsPerSec /= 10
		c.Med.SrvCPUus *= 10
		c.Med.GapP50us *= 10
		c.Med.ReacqPct = 10
		c.Med.ReqPerHandoff = 3
		c.Med.Overlaps = 2
		c.Rounds[0].PollingLocksPct = 1.5
		c.Rounds[1].ErrorSamples = append(c.Rounds[1].ErrorSamples, "Lock: context deadline exceeded")
	}
	for i := range r.Heartbeat {
		if r.Heartbeat[i].Holds == 10000 {
			r.Heartbeat[i].Rounds[0].ReqPerBeat = 1.5
		}
	}
	r.Scale.Sessions, r.Scale.LeasesLost, r.Scale.HoldsLost = 100, 2, 3
	r.Memory.BackMs, r.Memory.KeysAfter = -1, 40
	for i := range r.Loss {
		if r.Loss[i].Contender == lh {
			r.Loss[i].MinMs = -3.5
			r.Loss[i].Rounds[0].NoSignal = true
		}
	}
	for i := range r.Cluster {
		c := &r.Cluster[i]
		switch c.Contender {
		case clusterSharded:
			c.Med.OpsPerSec /= 10
			c.Med.BusiestSharePct, c.Med.MasterCPUPct, c.Med.ShardsPerMaster = 71, []float64{50, 12, 8}, []float64{10, 4, 2}
			c.Rounds[0].ErrorSamples = []string{"Lock: context deadline exceeded"}
		case clusterRL: // Redis-bound: the speed target is judged without a caveat
			c.Med.BusiestPct, c.Med.MasterCPUPct[0] = 97, 97
		case raw: // bench and masters keep both CPUs busy
			c.Med.ClientCPUPct = 150
		}
	}
	r.Uncontended[0].Serial[0].ErrorSamples = []string{"EOF", "EOF"}
	r.TryLock[0].Rounds[0].ErrorSamples = []string{"granted"}
}

// partialRun leaves scenarios out and peers failed: the targets that need
// them are not measured.
func partialRun(r *results) {
	for i := range r.Uncontended {
		u := &r.Uncontended[i]
		switch {
		case u.Group == "peer":
			u.Err, u.Serial, u.Parallel = "dial: refused", nil, nil
		case u.Contender == raw:
			u.Err = "failed in the last round" // its earlier rounds stay
		}
	}
	r.Uncontended = append(r.Uncontended[:uncIndex(r, "leasehold semaphore")], r.Uncontended[uncIndex(r, "leasehold semaphore")+1:]...)
	r.Uncontended[uncIndex(r, "leasehold pool")].SerialMed.ServerCommands = nil
	for i := range r.Contended {
		if r.Contended[i].Group == "peer" {
			r.Contended[i].Err = "no acquisition in the window"
		}
	}
	r.TryLock = nil
	r.Heartbeat = r.Heartbeat[:2]
	r.Scale, r.Memory, r.Loss, r.RWMutex = nil, nil, nil, nil
	r.Flight = r.Flight[:1]
	r.Cluster = slices.DeleteFunc(r.Cluster, func(c clusterRow) bool { return c.Contender == clusterRL })
	r.Env.LoadEnd = "4.55 5.10 3.15" // other work on both CPUs: the cluster runs say so
}

func uncIndex(r *results, name string) int {
	for i, u := range r.Uncontended {
		if u.Contender == name {
			return i
		}
	}
	panic("no uncontended row " + name)
}

func loadResults(t *testing.T) *results {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "report", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func TestReportGolden(t *testing.T) {
	for _, tc := range reportCases {
		t.Run(tc.name, func(t *testing.T) {
			res := loadResults(t)
			tc.edit(res)
			h := &harness{cfg: res.Config, res: res}
			h.res.Targets = h.targets()
			js, err := json.MarshalIndent(h.res.Targets, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".targets.json", append(js, '\n'))
			golden(t, tc.name+".md", []byte(h.markdown()))
		})
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "report", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: the report differs from the golden file; rerun with -update after an intended change and read the diff\ngot:\n%s", path, got)
	}
}
