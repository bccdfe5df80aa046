package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// StartSentinel starts one Sentinel on a free 127.0.0.1 port that monitors
// master under the name masterSet (quorum 1), waits until it answers PING,
// and returns its address. When master serves TLS (Options.TLS), the
// Sentinel serves TLS only, with the same certificates, and talks TLS to
// the master. The Sentinel is killed in t.Cleanup.
func StartSentinel(t testing.TB, master *Server, masterSet string) string {
	t.Helper()
	for range bindRetries {
		port, err := FreePort()
		if err != nil {
			t.Fatalf("redistest: find a free port: %v", err)
		}
		if addr, ok := startSentinel(t, master, masterSet, port); ok {
			return addr
		}
	}
	t.Fatalf("redistest: no Sentinel started after %d ports", bindRetries)
	return ""
}

// startSentinel is one attempt of StartSentinel on port; it reports false
// when the process exited before answering (the port taken meanwhile).
func startSentinel(t testing.TB, master *Server, masterSet string, port int) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	logfile := filepath.Join(dir, "sentinel.log")
	conf := fmt.Sprintf("bind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir %s\nlogfile %s\n", dir, logfile)
	x := master.opts.TLS
	if x == nil {
		conf += fmt.Sprintf("port %d\n", port)
	} else {
		args := x.args(port) // --port 0 --tls-port P ...: the same settings as a data node's
		for i := 0; i+1 < len(args); i += 2 {
			conf += args[i][2:] + " " + args[i+1] + "\n"
		}
		conf += "tls-replication yes\n" // Sentinel's connections to the master
	}
	conf += fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n", masterSet, master.port)
	path := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	cmd := exec.Command("redis-server", path, "--sentinel")
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("redistest: start a Sentinel: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	tc := master.tlsConfig()
	deadline := time.Now().Add(readyTimeout)
	for !ping(addr, tc) {
		select {
		case <-done:
			return "", false
		case <-time.After(pollEvery):
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the Sentinel did not answer PING within %v\nlog tail:\n%s", readyTimeout, tail(logfile, 0))
		}
	}
	return addr, true
}
