// Command bench measures leasehold against a raw SET NX PX lock and its
// peers (rueidislock, redsync, redislock) on a redis-server it starts itself
// on a free loopback port. Every contender runs back-to-back in the same run,
// round-robin over several rounds; the tables report medians over rounds and
// ratios against the raw baseline of the same run. The cluster scenario
// starts a 3-master Redis Cluster of its own as well (redis-cli must be on
// PATH) and stops it when it ends.
//
//	go run . [-quick] [-rounds N] [-scale-duration 60s] [-cluster-duration 3s] [-scenarios list] [-out results]
//
// The table goes to stdout and to <out>/latest.md, the data to
// <out>/latest.json. The exit status is non-zero only for harness errors
// (Redis could not start, a snapshot failed, goroutines did not end, a
// contender could not be opened, results could not be written); missed
// targets are reported in the table, marked MISSED, with the shortfall.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

type config struct {
	Quick            bool
	Rounds           int
	Warmup           time.Duration
	Duration         time.Duration // uncontended window per run
	ContDuration     time.Duration // contended window per run
	ClusterDuration  time.Duration // cluster window per run
	TryDuration      time.Duration // failed TryLock window per run
	Workers          int           // uncontended parallel goroutines
	Holders          int           // contended holders
	Hold             time.Duration
	HoldMode         string // spin or sleep
	HBHolds          []int
	HBWindow         time.Duration
	HBRounds         int
	ScaleSessions    int
	ScaleHolds       int
	ScaleDuration    time.Duration
	LossRounds       int
	LeaseholdLossTTL time.Duration
	Scenarios        []string
	Out              string
	ProfileDir       string
}

var allScenarios = []string{"uncontended", "contended", "trylock", "heartbeat", "scale", "loss", "memory", "rwmutex", "flight", "cluster"}

func parseFlags() config {
	var c config
	quick := flag.Bool("quick", false, "quick mode: fewer, shorter rounds (about 2 minutes)")
	rounds := flag.Int("rounds", 0, "rounds per scenario (default 5, quick 2)")
	dur := flag.Duration("duration", 0, "measurement window of each uncontended run (default 1s, quick 300ms)")
	cdur := flag.Duration("contended-duration", 0, "measurement window of each contended run (default 2s, quick 700ms)")
	cldur := flag.Duration("cluster-duration", 0, "measurement window of each cluster run (default 3s, quick 1s)")
	sdur := flag.Duration("scale-duration", 0, "duration of the 1,000-session run (default 60s, quick 10s)")
	sess := flag.Int("scale-sessions", 1000, "sessions in the scale run, each with its own client")
	holds := flag.Int("scale-holds", 10, "holds per session in the scale run")
	lossRounds := flag.Int("loss-rounds", 0, "SIGSTOP rounds per contender (default 3, quick 1)")
	holdMode := flag.String("hold", "spin", "how a contended holder holds for 100µs: spin (busy-wait; its CPU is subtracted from client CPU) or sleep")
	scen := flag.String("scenarios", strings.Join(allScenarios, ","), "comma-separated subset of "+strings.Join(allScenarios, ","))
	out := flag.String("out", "results", "directory for latest.md and latest.json")
	prof := flag.String("cpuprofile-dir", "", "write a CPU profile of each leasehold and raw-baseline run (first round) here")
	flag.Parse()

	c = config{
		Quick: *quick, Rounds: 5, Warmup: 200 * time.Millisecond, Duration: time.Second,
		ContDuration: 2 * time.Second, ClusterDuration: 3 * time.Second, TryDuration: 500 * time.Millisecond,
		Workers: 32, Holders: 8, Hold: 100 * time.Microsecond, HoldMode: *holdMode,
		HBHolds: []int{1, 100, 10000}, HBWindow: 2 * time.Second, HBRounds: 3,
		ScaleSessions: *sess, ScaleHolds: *holds, ScaleDuration: 60 * time.Second,
		LossRounds: 3, LeaseholdLossTTL: 3 * time.Second,
		Out: *out, ProfileDir: *prof,
	}
	if c.Quick {
		c.Rounds, c.Warmup, c.Duration, c.ContDuration, c.TryDuration = 2, 100*time.Millisecond, 300*time.Millisecond, 700*time.Millisecond, 200*time.Millisecond
		c.HBWindow, c.HBRounds, c.ScaleDuration, c.LossRounds = time.Second, 1, 10*time.Second, 1
		c.ClusterDuration = time.Second
	}
	if *rounds > 0 {
		c.Rounds = *rounds
	}
	if *dur > 0 {
		c.Duration = *dur
	}
	if *cdur > 0 {
		c.ContDuration = *cdur
	}
	if *cldur > 0 {
		c.ClusterDuration = *cldur
	}
	if *sdur > 0 {
		c.ScaleDuration = *sdur
	}
	if *lossRounds > 0 {
		c.LossRounds = *lossRounds
	}
	for s := range strings.SplitSeq(*scen, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(allScenarios, s) {
			fmt.Fprintf(os.Stderr, "bench: unknown scenario %q (want some of %s)\n", s, strings.Join(allScenarios, ","))
			os.Exit(2)
		}
		c.Scenarios = append(c.Scenarios, s)
	}
	if c.HoldMode != "spin" && c.HoldMode != "sleep" {
		fmt.Fprintf(os.Stderr, "bench: -hold must be spin or sleep\n")
		os.Exit(2)
	}
	return c
}

func main() {
	cfg := parseFlags()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, cfg))
}

func run(ctx context.Context, cfg config) int {
	start := time.Now()
	srv, err := startServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer srv.kill()
	adm, err := newAdmin(srv.addr())
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer adm.close()

	h := &harness{cfg: cfg, srv: srv, adm: adm, res: &results{Config: cfg}}
	h.res.Env = envInfo{
		Date: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		NumCPU: runtime.NumCPU(), CPU: cpuModel(), Redis: adm.version(ctx), OS: runtime.GOOS + "/" + runtime.GOARCH,
		LoadStart: loadAvg(),
	}
	h.logf("redis-server %s on %s; mode %s; %d rounds", h.res.Env.Redis, srv.addr(), modeName(cfg), cfg.Rounds)
	if slices.Contains(cfg.Scenarios, "loss") {
		if h.lossSrv, err = startServer(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer h.lossSrv.kill()
	}

	for _, s := range cfg.Scenarios {
		if ctx.Err() != nil {
			h.harnessErr("interrupted")
			break
		}
		t := time.Now()
		h.scenario(s)(ctx)
		h.logf("%s done in %v", s, time.Since(t).Round(100*time.Millisecond))
	}
	h.res.Elapsed = time.Since(start).Round(time.Second).String()
	h.res.Env.LoadEnd = loadAvg()
	h.res.Targets = h.targets()
	md := h.markdown()
	fmt.Print(md)
	if err := h.write(md); err != nil {
		fmt.Fprintln(os.Stderr, "bench: write results:", err)
		return 1
	}
	if len(h.res.HarnessErrors) > 0 {
		fmt.Fprintf(os.Stderr, "bench: %d harness error(s):\n  %s\n", len(h.res.HarnessErrors), strings.Join(h.res.HarnessErrors, "\n  "))
		return 1
	}
	return 0
}

// scenario returns the function that runs scenario s.
func (h *harness) scenario(s string) func(context.Context) {
	return map[string]func(context.Context){
		"uncontended": h.runUncontended, "contended": h.runContended, "trylock": h.runTryLock,
		"heartbeat": h.runHeartbeat, "scale": h.runScale, "loss": h.runLoss, "memory": h.runMemory,
		"rwmutex": h.runRWMutex, "flight": h.runFlight, "cluster": h.runCluster,
	}[s]
}

func modeName(c config) string {
	if c.Quick {
		return "quick"
	}
	return "full"
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// harness runs the scenarios and collects their results.
type harness struct {
	cfg     config
	srv     *server
	lossSrv *server // the server the loss scenario SIGSTOPs
	adm     *admin
	seq     int
	res     *results
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func (h *harness) harnessErr(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.res.HarnessErrors = append(h.res.HarnessErrors, msg)
	h.logf("HARNESS ERROR: %s", msg)
}

// ns returns a fresh key namespace, so that no run sees another's keys.
func (h *harness) ns() string {
	h.seq++
	return fmt.Sprintf("bench%d", h.seq)
}

// order returns the contenders of round r, rotated so that no contender
// always runs first (after a FLUSHALL) or last.
func order[T any](xs []T, r int) []T {
	if len(xs) == 0 {
		return nil
	}
	r %= len(xs)
	return append(slices.Clone(xs[r:]), xs[:r]...)
}

// loadAvg returns the 1, 5 and 15 minute load averages, "" where unknown.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
