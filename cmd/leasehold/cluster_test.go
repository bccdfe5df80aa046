//go:build unix

package main

// End-to-end test on a Redis Cluster (internal/redistest.StartCluster): the
// leasehold binary gets the cluster's seeds as a comma list (in
// $LEASEHOLD_REDIS and in --redis) and as repeated --redis flags.

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestCluster: on a 3-master, 3-replica cluster, with the namespace on the
// master that serves slot 16383, `lock` holds a mutex, `status` shows the
// hold once and names the namespace's slot and master, also while a replica
// hangs, and after the holder ends `lock NAME -- CMD` is granted again with a
// larger token, whichever way the seeds are given (also when the first seed
// is down).
func TestCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterOptions{})
	master := c.MasterOf(t, redistest.NumSlots-1)
	ns := namespaceOn(t, c, master)
	slot := redistest.Slot(scripts.NewKeys(ns).Prefix)
	initEpochCluster(t, c, ns)

	seeds := c.Seeds()
	forms := map[string]struct {
		env  string   // LEASEHOLD_REDIS
		args []string // global flags
	}{
		"env redis:// comma list": {env: "redis://" + strings.Join(seeds, ",")},
		"env bare comma list":     {env: strings.Join(seeds, ",")},
		"--redis comma list":      {args: []string{"--redis", "redis://" + strings.Join(seeds[:3], ",")}},
		"repeated --redis":        {args: repeatFlag("--redis", seeds[3:])},
		"first seed down":         {args: []string{"--redis", "127.0.0.1:1", "--redis", seeds[0]}},
	}
	formNames := slices.Sorted(maps.Keys(forms))
	run := func(form string, args ...string) (string, string, int) {
		t.Helper()
		f := forms[form]
		return cli(t, f.env, append(append(slices.Clone(f.args), "--namespace", ns), args...)...)
	}

	var masters []string
	for _, m := range c.Masters(t) {
		masters = append(masters, m.Addr())
	}
	slices.Sort(masters)
	replica := c.ReplicaOf(t, master)

	dir := t.TempDir()
	holder := startEnv(t, []string{"DIR=" + dir}, forms["env redis:// comma list"].env,
		"lock", "--namespace", ns, "m", "--", "sh", "-c", `echo "$LEASEHOLD_SESSION $LEASEHOLD_TOKEN" > "$DIR/held"; sleep 60 & wait`)
	held := strings.Fields(waitFile(t, filepath.Join(dir, "held"), 30*time.Second))
	sid := held[0]
	token, err := strconv.ParseInt(held[1], 10, 64)
	if err != nil {
		t.Fatalf("token %q: %v", held[1], err)
	}

	wantCluster := ClusterStatus{Slot: int64(slot), Master: master.Addr(), Masters: masters}
	checkHeld := func(t *testing.T, st Status) {
		t.Helper()
		if cs := st.Cluster; cs == nil || cs.Slot != wantCluster.Slot || cs.Master != wantCluster.Master || !slices.Equal(cs.Masters, wantCluster.Masters) {
			t.Errorf("cluster %+v, want %+v", st.Cluster, wantCluster)
		}
		if len(st.Sessions) != 1 || st.Sessions[0].ID != sid || len(st.Sessions[0].Holds) != 1 ||
			st.Sessions[0].Holds[0].Kind != "mutex" || st.Sessions[0].Holds[0].Name != "m" || st.Sessions[0].Holds[0].Token != token {
			t.Errorf("sessions %+v, want only %s holding mutex \"m\"", st.Sessions, sid)
		}
		if len(st.Mutexes) != 1 || st.Mutexes[0].Name != "m" || st.Mutexes[0].Holder == nil ||
			st.Mutexes[0].Holder.Session != sid || st.Mutexes[0].Holder.Token != token || st.Mutexes[0].Holder.RemainingMs <= 0 {
			t.Errorf("mutexes %+v, want m held by %s with token %d", st.Mutexes, sid, token)
		}
	}

	for _, form := range formNames {
		t.Run("held/"+form, func(t *testing.T) {
			stdout, stderr, code := run(form, "status", "--json")
			if code != 0 {
				t.Fatalf("status --json: exit %d: %s", code, stderr)
			}
			var st Status
			if err := json.Unmarshal([]byte(stdout), &st); err != nil {
				t.Fatalf("status --json: %v\n%s", err, stdout)
			}
			checkHeld(t, st)

			stdout, stderr, code = run(form, "status")
			wantLine := fmt.Sprintf("Redis Cluster: slot %d, served by master %s; 3 masters scanned: %s\n",
				slot, master.Addr(), strings.Join(masters, ", "))
			if code != 0 || !strings.Contains(stdout, wantLine) {
				t.Errorf("status: exit %d, stderr %q; stdout lacks %q:\n%s", code, stderr, wantLine, stdout)
			}
			if n := strings.Count(stdout, sid); n != 2 { // its SESSIONS line and the mutex's
				t.Errorf("session %s appears %d times, want 2:\n%s", sid, n, stdout)
			}

			_, stderr, code = run(form, "lock", "--wait", "0", "m", "--", "true")
			if code != exitNotAcquired || !strings.Contains(stderr, "held by another session") {
				t.Errorf("lock --wait 0 on the held mutex: exit %d, want %d; stderr %q", code, exitNotAcquired, stderr)
			}
		})
	}

	// A hanging replica is not scanned: status neither waits for it nor fails.
	t.Run("held/replica stopped", func(t *testing.T) {
		replica.Stop()
		defer replica.Cont()
		begin := time.Now()
		stdout, stderr, code := run("repeated --redis", "status", "--json")
		if code != 0 {
			t.Fatalf("status --json with replica %s stopped: exit %d after %v: %s", replica.Addr(), code, time.Since(begin), stderr)
		}
		var st Status
		if err := json.Unmarshal([]byte(stdout), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, stdout)
		}
		checkHeld(t, st)
	})
	c.WaitHealthy(t)

	// The holder ends (SIGTERM passed on to its command); each form then gets
	// the mutex, each with a larger token.
	if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := holder.wait(10 * time.Second); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("holder: exit %d, want %d (its command's); stderr %s", code, 128+int(syscall.SIGTERM), holder.stderr.String())
	}
	last := token
	for _, form := range formNames {
		t.Run("free/"+form, func(t *testing.T) {
			stdout, stderr, code := run(form, "lock", "m", "--", "sh", "-c", `echo "$LEASEHOLD_TOKEN"`)
			if code != 0 {
				t.Fatalf("lock m: exit %d: %s", code, stderr)
			}
			tok, err := strconv.ParseInt(strings.TrimSpace(stdout), 10, 64)
			if err != nil || tok <= last {
				t.Fatalf("token %q (%v), want one above %d", stdout, err, last)
			}
			last = tok

			stdout, stderr, code = run(form, "status", "--json")
			var st Status
			if code != 0 || json.Unmarshal([]byte(stdout), &st) != nil {
				t.Fatalf("status --json: exit %d, stderr %q:\n%s", code, stderr, stdout)
			}
			if st.Cluster == nil || st.Cluster.Master != master.Addr() || len(st.Sessions) != 0 ||
				len(st.Mutexes) != 1 || st.Mutexes[0].Holder != nil || st.Mutexes[0].LastToken != tok {
				t.Errorf("status after lock m -- CMD: cluster %+v, sessions %+v, mutexes %+v; want m free with last token %d",
					st.Cluster, st.Sessions, st.Mutexes, tok)
			}
		})
	}
}

// namespaceOn returns a fresh namespace whose slot master serves.
func namespaceOn(t *testing.T, c *redistest.Cluster, master *redistest.Server) string {
	t.Helper()
	base := redistest.Namespace(t)
	for i := range 1000 {
		ns := base + "-" + strconv.Itoa(i)
		if c.MasterOf(t, redistest.Slot(scripts.NewKeys(ns).Prefix)) == master {
			return ns
		}
	}
	t.Fatalf("no namespace %s-N on master %s", base, master.Addr())
	return ""
}

// initEpochCluster marks namespace ns intact, as testutil.InitEpoch does on
// a single server: no restart grace on the fresh cluster.
func initEpochCluster(t *testing.T, c *redistest.Cluster, ns string) {
	t.Helper()
	cl := c.Client(t)
	ctx := testutil.Ctx(t, 10*time.Second)
	if err := cl.Do(ctx, cl.B().Set().Key(scripts.NewKeys(ns).Epoch()).Value("0").Nx().Build()).Error(); err != nil && !rueidis.IsRedisNil(err) {
		t.Fatalf("init epoch: %v", err)
	}
}

func repeatFlag(flag string, vals []string) []string {
	var out []string
	for _, v := range vals {
		out = append(out, flag, v)
	}
	return out
}
