package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
)

// MasterSet is the name the Sentinels monitor.
const MasterSet = "chaos"

// Sentinel is a master, one replica and three Sentinels (started with
// `redis-server <conf> --sentinel`, down-after-milliseconds 1000), all on
// loopback, torn down at the end of the test.
type Sentinel struct {
	t     testing.TB
	Nodes []*redistest.Server // data nodes; Nodes[0] is the first master
	sents []*sentinelProc
}

type sentinelProc struct {
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

func (s *sentinelProc) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// StartSentinel starts the set and waits until the replica is in sync and
// every Sentinel knows the replica and the two other Sentinels.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	args := []string{"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
	s := &Sentinel{t: t}
	for range 2 {
		s.Nodes = append(s.Nodes, redistest.Start(t, redistest.Options{Args: args}))
	}
	s.replicaOf(s.Nodes[1], s.Nodes[0].Addr())
	for range 3 {
		s.sents = append(s.sents, startSentinelProc(t, s.Nodes[0].Addr()))
	}
	s.waitFor("Sentinels to discover the replica and each other", 30*time.Second, func() bool {
		for _, sp := range s.sents {
			reps, err := sentinelCmd(sp.addr(), "SENTINEL", "REPLICAS", MasterSet)
			if err != nil || len(reps) != 1 {
				return false
			}
			sents, err := sentinelCmd(sp.addr(), "SENTINEL", "SENTINELS", MasterSet)
			if err != nil || len(sents) != 2 {
				return false
			}
		}
		return true
	})
	return s
}

func startSentinelProc(t testing.TB, master string) *sentinelProc {
	t.Helper()
	host, port, _ := net.SplitHostPort(master)
	for attempt := 0; ; attempt++ {
		dir := t.TempDir()
		p, err := freePort()
		if err != nil {
			t.Fatalf("chaos: %v", err)
		}
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf(`port %d
bind 127.0.0.1
daemonize no
dir %s
logfile %s
sentinel monitor %s %s %s 2
sentinel down-after-milliseconds %s 1000
sentinel failover-timeout %s 6000
sentinel parallel-syncs %s 1
`, p, dir, filepath.Join(dir, "sentinel.log"), MasterSet, host, port, MasterSet, MasterSet, MasterSet)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatalf("chaos: %v", err)
		}
		cmd := exec.Command("redis-server", conf, "--sentinel")
		cmd.SysProcAttr = sysProcAttr()
		if err := cmd.Start(); err != nil {
			t.Fatalf("chaos: start sentinel: %v", err)
		}
		sp := &sentinelProc{port: p, cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(sp.done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-sp.done })
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := sentinelCmd(sp.addr(), "PING"); err == nil {
				return sp
			}
			select {
			case <-sp.done:
				deadline = time.Time{}
			case <-time.After(10 * time.Millisecond):
			}
		}
		_ = cmd.Process.Kill()
		<-sp.done
		if attempt == 3 {
			b, _ := os.ReadFile(filepath.Join(dir, "sentinel.log"))
			t.Fatalf("chaos: sentinel on port %d did not start:\n%s", p, b)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// sentinelCmd runs one command on addr with a short-lived connection and
// returns the reply as a list (a simple reply is a list of one).
func sentinelCmd(addr string, args ...string) ([]rueidis.RedisMessage, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true,
		ForceSingleClient: true, Dialer: net.Dialer{Timeout: time.Second}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r := c.Do(ctx, c.B().Arbitrary(args...).Build())
	if err := r.Error(); err != nil {
		return nil, err
	}
	if v, err := r.ToArray(); err == nil {
		return v, nil
	}
	m, err := r.ToMessage()
	return []rueidis.RedisMessage{m}, err
}

// Addrs returns the Sentinels' addresses, for rueidis.ClientOption.InitAddress.
func (s *Sentinel) Addrs() []string {
	var out []string
	for _, sp := range s.sents {
		out = append(out, sp.addr())
	}
	return out
}

// MasterAddr asks the Sentinels (the first that answers) for the master.
func (s *Sentinel) MasterAddr() string {
	for _, sp := range s.sents {
		v, err := sentinelCmd(sp.addr(), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterSet)
		if err == nil && len(v) == 2 {
			h, _ := v[0].ToString()
			p, _ := v[1].ToString()
			return net.JoinHostPort(h, p)
		}
	}
	return ""
}

func (s *Sentinel) node(addr string) *redistest.Server {
	for _, n := range s.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	s.t.Fatalf("chaos: no data node at %q", addr)
	return nil
}

// allAgree reports whether every Sentinel names master as the master.
func (s *Sentinel) allAgree(master string) bool {
	for _, sp := range s.sents {
		v, err := sentinelCmd(sp.addr(), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterSet)
		if err != nil || len(v) != 2 {
			return false
		}
		h, _ := v[0].ToString()
		p, _ := v[1].ToString()
		if net.JoinHostPort(h, p) != master {
			return false
		}
	}
	return true
}

// Failover runs SENTINEL FAILOVER on one Sentinel and waits until every
// Sentinel names the former replica as master. It returns the old and new
// master addresses.
func (s *Sentinel) Failover() (oldMaster, newMaster string) {
	oldMaster = s.MasterAddr()
	if _, err := sentinelCmd(s.sents[0].addr(), "SENTINEL", "FAILOVER", MasterSet); err != nil {
		s.t.Fatalf("chaos: SENTINEL FAILOVER: %v", err)
	}
	newMaster = s.waitNewMaster(oldMaster)
	return oldMaster, newMaster
}

// KillMaster kills the master with SIGKILL and waits until the Sentinels
// have promoted the replica. It returns the old and new master addresses;
// the old master stays down (see RejoinAsReplica).
func (s *Sentinel) KillMaster() (oldMaster, newMaster string) {
	oldMaster = s.MasterAddr()
	s.node(oldMaster).Kill()
	return oldMaster, s.waitNewMaster(oldMaster)
}

func (s *Sentinel) waitNewMaster(old string) string {
	var m string
	s.waitFor("the Sentinels to agree on a new master", 30*time.Second, func() bool {
		m = s.MasterAddr()
		return m != "" && m != old && s.allAgree(m)
	})
	return m
}

// RejoinAsReplica restarts a killed data node (empty: no persistence) and
// makes it a replica of master at once, as an operator would.
func (s *Sentinel) RejoinAsReplica(node, master string) {
	n := s.node(node)
	n.Restart()
	s.replicaOf(n, master)
}

// WaitReplicaOf waits until node replicates master with its link up (after a
// manual failover the Sentinels convert the old master on their own).
func (s *Sentinel) WaitReplicaOf(node, master string, timeout time.Duration) {
	n := s.node(node)
	_, port, _ := net.SplitHostPort(master)
	s.waitFor("the old master to replicate "+master, timeout, func() bool {
		info, err := n.Do(s.t, "INFO", "replication").ToString()
		return err == nil && strings.Contains(info, "master_port:"+port+"\r") &&
			strings.Contains(info, "master_link_status:up")
	})
}

func (s *Sentinel) replicaOf(n *redistest.Server, master string) {
	host, port, _ := net.SplitHostPort(master)
	if err := n.Do(s.t, "REPLICAOF", host, port).Error(); err != nil {
		s.t.Fatalf("chaos: REPLICAOF: %v", err)
	}
	s.WaitReplicaOf(n.Addr(), master, 20*time.Second)
}

func (s *Sentinel) waitFor(what string, timeout time.Duration, cond func() bool) {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("chaos: timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
