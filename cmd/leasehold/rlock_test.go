//go:build unix

package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRLock: two readers, one started with `rlock` and one with `lock
// --shared`, hold read-write mutex NAME together; `rlock --write --wait 0`
// exits 73 while they do; status shows both readers, in text and JSON.
func TestRLock(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	dir := t.TempDir()
	env := []string{"DIR=" + dir}
	info := func(file string) string {
		return `echo "$LEASEHOLD_KIND $LEASEHOLD_TOKEN" > "$DIR/` + file + `"; sleep 60 & wait`
	}
	startEnv(t, env, url, "rlock", "--namespace", ns, "cat", "--", "sh", "-c", info("r1"))
	r1 := strings.Fields(waitFile(t, filepath.Join(dir, "r1"), 10*time.Second))
	startEnv(t, env, url, "lock", "--shared", "--namespace", ns, "cat", "--", "sh", "-c", info("r2"))
	r2 := strings.Fields(waitFile(t, filepath.Join(dir, "r2"), 10*time.Second))
	if r1[0] != "rwmutex" || r2[0] != "rwmutex" || r1[1] == r2[1] {
		t.Fatalf("readers' kind and token: %q, %q", r1, r2)
	}
	if _, stderr, code := cli(t, url, "rlock", "--write", "--wait", "0", "--namespace", ns, "cat", "--", "true"); code != exitNotAcquired {
		t.Fatalf("rlock --write beside readers: exit %d, want %d: %s", code, exitNotAcquired, stderr)
	}
	stdout, stderr, code := cli(t, url, "status", "--json", "--namespace", ns)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	var st Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.RWMutexes) != 1 || st.RWMutexes[0].Name != "cat" || len(st.RWMutexes[0].Readers) != 2 || st.RWMutexes[0].Writer != nil {
		t.Fatalf("status rwmutexes = %+v", st.RWMutexes)
	}
	reads := 0
	for _, s := range st.Sessions {
		for _, h := range s.Holds {
			if h.Kind == "rwmutex" && h.Mode == "read" && h.Name == "cat" {
				reads++
			}
		}
	}
	if reads != 2 {
		t.Fatalf("sessions show %d read holds, want 2: %+v", reads, st.Sessions)
	}
	text, _, _ := cli(t, url, "status", "--namespace", ns)
	if !strings.Contains(text, "RWMUTEXES") || !strings.Contains(text, `rwmutex "cat" (read)`) {
		t.Fatalf("status text lacks the readers:\n%s", text)
	}
}

// TestResetRWMutex: `reset NAME` on a read-write mutex takes every reader
// (or the writer): without --yes it only says so and exits 1, with it the
// holders' commands exit 75 saying an operator reset them; a free one is
// "not held". --all leaves read-write mutexes alone.
func TestResetRWMutex(t *testing.T) {
	t.Parallel()
	_, url, ns := server(t)
	dir := t.TempDir()
	env := []string{"DIR=" + dir}
	script := func(file string) string {
		return `trap 'exit 143' TERM; echo ready > "$DIR/` + file + `"; sleep 60 & wait`
	}
	r1 := startEnv(t, env, url, "rlock", "--namespace", ns, "--ttl", "5s", "cat", "--", "sh", "-c", script("r1"))
	r2 := startEnv(t, env, url, "rlock", "--namespace", ns, "--ttl", "5s", "cat", "--", "sh", "-c", script("r2"))
	waitFile(t, filepath.Join(dir, "r1"), 10*time.Second)
	waitFile(t, filepath.Join(dir, "r2"), 10*time.Second)

	stdout, stderr, code := cli(t, url, "reset", "--namespace", ns, "cat")
	if code != exitError || !strings.Contains(stdout, `would reset rwmutex "cat": read by 2 holds (sessions`) || !strings.Contains(stderr, "--yes") {
		t.Fatalf("reset without --yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	oneLineErr(t, stderr)
	if stdout, _, code := cli(t, url, "reset", "--all", "--namespace", ns); code != exitError || !strings.Contains(stdout, `would reset rwmutex "cat"`) {
		t.Fatalf("reset --all without --yes beside a held rwmutex: exit %d, %q", code, stdout)
	}
	time.Sleep(100 * time.Millisecond)
	if r1.exited() || r2.exited() {
		t.Fatalf("a reader ended without a reset: %s %s", r1.errw.String(), r2.errw.String())
	}

	stdout, stderr, code = cli(t, url, "reset", "--namespace", ns, "cat", "--yes")
	if code != 0 || !strings.Contains(stdout, `reset rwmutex "cat": took 2 holds`) {
		t.Fatalf("reset --yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, p := range []*proc{r1, r2} {
		if code := p.wait(10 * time.Second); code != exitLost {
			t.Fatalf("rlock exit %d, want %d; stderr %s", code, exitLost, p.stderr.String())
		}
		if got := p.stderr.String(); !strings.Contains(got, `rwmutex "cat" was reset by an operator`) {
			t.Errorf("rlock's stderr %q does not say plainly why", got)
		}
	}

	w := startEnv(t, env, url, "rlock", "--write", "--namespace", ns, "--ttl", "5s", "cat", "--", "sh", "-c", script("w"))
	waitFile(t, filepath.Join(dir, "w"), 10*time.Second)
	if stdout, _, code := cli(t, url, "reset", "--namespace", ns, "cat"); code != exitError || !strings.Contains(stdout, `would reset rwmutex "cat": written by session`) {
		t.Fatalf("reset of the writer without --yes: exit %d, %q", code, stdout)
	}
	if stdout, _, code := cli(t, url, "reset", "--namespace", ns, "cat", "--yes"); code != 0 || !strings.Contains(stdout, `reset rwmutex "cat": took 1 hold`) {
		t.Fatalf("reset of the writer: exit %d, %q", code, stdout)
	}
	if code := w.wait(10 * time.Second); code != exitLost {
		t.Fatalf("rlock --write exit %d, want %d; stderr %s", code, exitLost, w.stderr.String())
	}
	if stdout, _, code := cli(t, url, "reset", "--namespace", ns, "cat", "--yes"); code != 0 || !strings.Contains(stdout, `rwmutex "cat" is not held`) {
		t.Errorf("reset of a free rwmutex: exit %d, %q", code, stdout)
	}
}
