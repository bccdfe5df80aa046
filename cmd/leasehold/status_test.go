//go:build unix

package main

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/leasehold/leasehold/internal/scripts"
)

// TestPrintStatusCluster: on a single server status prints what it always
// did; on a cluster one more line, after the namespace, names the slot, the
// master serving it and the masters scanned; JSON gets a "cluster" object
// only on a cluster.
func TestPrintStatusCluster(t *testing.T) {
	t.Parallel()
	const single = `namespace "ns"

SESSIONS  OWNER  TTL  LEFT  HOLDS
(none)                      

MUTEXES  HOLDER SESSION  OWNER  TOKEN  LEFT  WAITERS
(none)                                       

SEMAPHORES  IN USE  WAITERS  HOLDERS (session owner permits token left)
(none)                       

POOLS   MEMBERS  FREE  WAITERS  HELD (key session owner token left)
(none)                          

ELECTIONS  LEADER SESSION  OWNER  VALUE  TERM  LEFT  CANDIDATES
(none)                                               
`
	empty := func(cs *ClusterStatus) *Status {
		return &Status{Namespace: "ns", Cluster: cs, Sessions: []SessionStatus{}, Mutexes: []MutexStatus{},
			Semaphores: []SemaphoreStatus{}, Pools: []PoolStatus{}, Elections: []ElectionStatus{}}
	}
	for _, tc := range []struct {
		name     string
		cluster  *ClusterStatus
		wantText string
		wantJSON string // "" for no "cluster" key
	}{
		{"single server", nil, single, ""},
		{"cluster", &ClusterStatus{Slot: 15495, Master: "10.0.0.3:7000", Masters: []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}},
			strings.Replace(single, "\n", "\nRedis Cluster: slot 15495, served by master 10.0.0.3:7000; 3 masters scanned: 10.0.0.1:7000, 10.0.0.2:7000, 10.0.0.3:7000\n", 1),
			`"cluster":{"slot":15495,"master":"10.0.0.3:7000","masters":["10.0.0.1:7000","10.0.0.2:7000","10.0.0.3:7000"]}`},
		{"slot not served", &ClusterStatus{Slot: 7, Masters: []string{"10.0.0.1:7000"}},
			strings.Replace(single, "\n", "\nRedis Cluster: slot 7, no master serves it (cluster down?); 1 master scanned: 10.0.0.1:7000\n", 1),
			`"cluster":{"slot":7,"master":"","masters":["10.0.0.1:7000"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			printStatus(&b, empty(tc.cluster))
			if got := b.String(); got != tc.wantText {
				t.Errorf("text:\n got %q\nwant %q", got, tc.wantText)
			}
			j, err := json.Marshal(empty(tc.cluster))
			if err != nil {
				t.Fatal(err)
			}
			got := string(j)
			if tc.wantJSON == "" && strings.Contains(got, `"cluster"`) || tc.wantJSON != "" && !strings.Contains(got, tc.wantJSON) {
				t.Errorf("JSON %s, want cluster part %q", got, tc.wantJSON)
			}
		})
	}
}

// TestPrintStatusGrace: a pending restart grace, or a missing epoch
// marker, is one line after the namespace.
func TestPrintStatusGrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		st   Status
		want string // the line after the namespace's
	}{
		{"grace", Status{RestartGrace: &GraceStatus{LeftMs: 7000, GraceMs: 10000}},
			"grants resume in 7s: the restart grace (10s) started 3s ago, when a session found the namespace's data missing (Redis lost it, or the namespace is new)"},
		{"grace, none recorded", Status{RestartGrace: &GraceStatus{LeftMs: 650}},
			"grants resume in 650ms: a restart grace is running, since a session found the namespace's data missing (Redis lost it, or the namespace is new)"},
		{"marker missing", Status{EpochMissing: true},
			"the epoch marker is missing (Redis lost its data, or nothing used the namespace yet): the next session starts the restart grace"},
		{"none", Status{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.st.Namespace = "ns"
			var b strings.Builder
			printStatus(&b, &tc.st)
			lines := strings.Split(b.String(), "\n")
			if lines[0] != `namespace "ns"` || lines[1] != tc.want {
				t.Errorf("first lines %q, want the namespace's then %q", lines[:2], tc.want)
			}
		})
	}
}

// TestStatusEscapesRedis: names, owners and values with control characters
// and invalid UTF-8 written to Redis directly (as old data may hold them)
// are printed escaped by status, pool ls, pool stats and reset, one row
// each; status --json carries them.
func TestStatusEscapesRedis(t *testing.T) {
	t.Parallel()
	srv, url, ns := server(t)
	k := scripts.NewKeys(ns)
	const sid = "00c0ffee00c0ffee"
	for _, cmd := range [][]string{
		{"HSET", k.Lease(sid), "owner", "own\ter\xff", "ttl", "10000", "ld", "0", "g", "0"},
		{"PEXPIRE", k.Lease(sid), "60000"},
		{"HSET", k.Mutex("a\nb"), "hid", sid + ".1", "tok", "7"},
		{"HSET", k.Mutex("\xff\xfe"), "tok", "3"},
		{"HSET", k.Election("e\x1b[31m"), "hid", sid + ".2", "tok", "9", "val", "v\nw"},
		{"ZADD", k.PoolFree("p\tq"), "0", "m\xffx"},
	} {
		if err := srv.Do(t, cmd...).Error(); err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
	}
	clean := func(what, out string) {
		t.Helper()
		if !utf8.ValidString(out) || strings.ContainsAny(out, "\t\xff\x1b\r") {
			t.Errorf("%s: raw bytes in the output:\n%q", what, out)
		}
	}

	stdout, stderr, code := cli(t, url, "status", "--namespace", ns)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	clean("status", stdout)
	for _, want := range []string{
		"\n" + sid + `  "own\ter\xff"  10s`,
		`  mutex "a\nb", election "e\x1b[31m"` + "\n",
		"\nMUTEXES     HOLDER SESSION    OWNER          TOKEN  LEFT  WAITERS\n" +
			`"a\nb"      ` + sid + `  "own\ter\xff"  7 `,
		"\n" + `"\xff\xfe"  (free)            -              3      -     0` + "\n\n",
		"\n" + `"p\tq"  1        1     0        -` + "\n",
		"\n" + `"e\x1b[31m"  ` + sid + `  "own\ter\xff"  "v\nw"  9 `,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, stdout)
		}
	}

	stdout, _, code = cli(t, url, "status", "--namespace", ns, "--json")
	var st Status
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil {
		t.Fatalf("status --json: exit %d, %v", code, err)
	}
	if len(st.Mutexes) != 2 || st.Mutexes[0].Name != "a\nb" || len(st.Sessions) != 1 || len(st.Sessions[0].Holds) != 2 ||
		st.Sessions[0].Holds[0] != (HoldStatus{Kind: "mutex", Name: "a\nb", Token: 7, Session: sid, Hold: sid + ".1",
			Owner: "own\ter\ufffd", RemainingMs: st.Sessions[0].Holds[0].RemainingMs}) {
		t.Errorf("status --json: %+v", st)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pool", "ls", "p\tq"}, `"m\xffx"` + "\n"},
		{[]string{"pool", "stats", "p\tq"}, "pool \"p\\tq\": 1 members, 0 held, 1 free, 0 waiting\n" +
			"KEY       HOLDER SESSION  OWNER  TOKEN  LEFT\n" +
			`"m\xffx"  (free)          -      -      -` + "\n"},
		{[]string{"reset", "--all"}, `would reset mutex "a\nb": held by session ` + sid + ` (owner "own\ter\xff", token 7, lease `},
	} {
		stdout, stderr, _ := cli(t, url, append([]string{"--namespace", ns}, tc.args...)...)
		clean(tc.args[0], stdout+stderr)
		if !strings.Contains(stdout, tc.want) {
			t.Errorf("%q: stdout %q, want %q", tc.args, stdout, tc.want)
		}
	}
}
