//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCron: two `cron` processes on one job run each slot once, in order,
// with increasing tokens and the slot in $LEASEHOLD_SLOT; a signal while
// they wait ends them with 128+N; `jobs` lists the runs.
func TestCron(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	log := filepath.Join(t.TempDir(), "log")
	script := `echo "$LEASEHOLD_SLOT $LEASEHOLD_TOKEN $LEASEHOLD_NAME $LEASEHOLD_KIND" >> "$LOG"`
	env := []string{"LOG=" + log}
	var procs []*proc
	for range 2 {
		procs = append(procs, startEnv(t, env, url, "cron", "--namespace", ns, "--ttl", "2s", "j",
			"--schedule", "@every 1s", "--", "sh", "-c", script))
	}
	const n = 4
	var lines []string
	deadline := time.Now().Add(30 * time.Second)
	for len(lines) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs within 30s; stderr: %s %s", len(lines), procs[0].stderr.String(), procs[1].stderr.String())
		}
		time.Sleep(10 * time.Millisecond) // the runs leave no other trace to wait on
		b, _ := os.ReadFile(log)
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(b) == 0 {
			lines = nil
		}
	}
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		if code := p.wait(10 * time.Second); code != 128+int(syscall.SIGTERM) && code != 0 {
			t.Errorf("exit %d after SIGTERM, want %d (or CMD's 0 if it ran); stderr %s", code, 128+int(syscall.SIGTERM), p.stderr.String())
		}
	}
	b, _ := os.ReadFile(log)
	lines = strings.Split(strings.TrimSpace(string(b)), "\n")
	var lastSlot time.Time
	var lastTok int64
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) != 4 || f[2] != "j" || f[3] != "job" {
			t.Fatalf("line %d malformed:\n%s", i+1, b)
		}
		slot, err := time.Parse(time.RFC3339, f[0])
		tok, _ := strconv.ParseInt(f[1], 10, 64)
		if err != nil || !slot.After(lastSlot) || tok <= lastTok {
			t.Fatalf("line %d: slot %s token %d after %v %d (%v):\n%s", i+1, f[0], tok, lastSlot, lastTok, err, b)
		}
		if i > 0 && slot.Sub(lastSlot) != time.Second {
			// Nobody claimed it before the next came due: a stall of the
			// machine (schedule's tests check that it is counted).
			t.Logf("line %d: slot %v after %v: skipped", i+1, slot, lastSlot)
		}
		lastSlot, lastTok = slot, tok
	}

	out, errOut, code := cli(t, url, "jobs", "--namespace", ns, "--json", "--runs", "100")
	if code != 0 {
		t.Fatalf("jobs --json: exit %d: %s", code, errOut)
	}
	var jobs []JobStatus
	if err := json.Unmarshal([]byte(out), &jobs); err != nil {
		t.Fatalf("jobs --json: %v\n%s", err, out)
	}
	if len(jobs) != 1 || jobs[0].Name != "j" || jobs[0].Spec != "@every 1s" || len(jobs[0].Runs) != len(lines) {
		t.Fatalf("jobs --json = %s, want job j with %d runs", out, len(lines))
	}
	for i, r := range jobs[0].Runs {
		if r.Err != "" || r.Lost || r.End == nil || r.Session == "" ||
			(i > 0 && !r.Slot.Before(jobs[0].Runs[i-1].Slot)) {
			t.Errorf("run %d = %+v: want ok, latest first", i, r)
		}
	}
	if !jobs[0].LastSlot.Equal(lastSlot) {
		t.Errorf("last slot %v, want %v", jobs[0].LastSlot, lastSlot)
	}
	out, errOut, code = cli(t, url, "jobs", "--namespace", ns, "j")
	if code != 0 || !strings.Contains(out, `job j  "@every 1s"`) || !strings.Contains(out, lastSlot.Format(time.RFC3339)) {
		t.Fatalf("jobs j: exit %d\n%s%s", code, out, errOut)
	}
}

// TestCronExitCodes: cron's usage errors exit 2, a missing CMD 127, and
// with --runs it exits with its last run's code, recorded as the run's
// error.
func TestCronExitCodes(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"j", "--", "true"}, exitUsage}, // no --schedule
		{[]string{"j", "--schedule", "bogus", "--", "true"}, exitUsage},
		{[]string{"j", "--schedule", "@hourly", "--misfire", "never", "--", "true"}, exitUsage},
		{[]string{"j", "--schedule", "@hourly", "--tz", "Nowhere/Atlantis", "--", "true"}, exitUsage},
		{[]string{"j", "--schedule", "@hourly", "--wait", "1s", "--", "true"}, exitUsage},
		{[]string{"j", "--schedule", "@hourly", "--", "no-such-command-leasehold"}, exitNotFound},
		{[]string{"x", "--schedule", "@every 1s", "--runs", "1", "--", "sh", "-c", "exit 3"}, 3},
	} {
		args := append([]string{"cron", "--namespace", ns, "--ttl", "2s"}, tc.args...)
		if _, errOut, code := cli(t, url, args...); code != tc.code {
			t.Errorf("%v: exit %d, want %d; stderr %s", tc.args, code, tc.code, errOut)
		}
	}
	out, errOut, code := cli(t, url, "jobs", "--namespace", ns, "--json", "x")
	var jobs []JobStatus
	if err := json.Unmarshal([]byte(out), &jobs); code != 0 || err != nil {
		t.Fatalf("jobs --json x: exit %d, %v: %s%s", code, err, out, errOut)
	}
	if len(jobs) != 1 || len(jobs[0].Runs) != 1 || jobs[0].Runs[0].Err != "exit 3" {
		t.Fatalf("jobs --json x = %s, want one run with error \"exit 3\"", out)
	}
	if _, _, code := cli(t, url, "jobs", "--namespace", ns, "j"); code != exitError {
		t.Errorf("jobs of a job never run: exit %d, want %d", code, exitError)
	}
}
