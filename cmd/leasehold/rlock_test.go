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
