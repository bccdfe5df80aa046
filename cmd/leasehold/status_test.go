package main

import (
	"encoding/json"
	"strings"
	"testing"
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
