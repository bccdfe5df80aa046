//go:build unix

package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/mutex"
	"github.com/leasehold/leasehold/session"
)

// tlsServer starts a Redis that serves TLS only, and returns it, its
// certificates and a namespace already marked intact.
func tlsServer(t *testing.T, requireClientCert bool) (*redistest.Server, *redistest.TLS, string) {
	t.Helper()
	x := redistest.NewTLS(t, requireClientCert)
	srv := redistest.Start(t, redistest.Options{TLS: x})
	ns := redistest.Namespace(t)
	if err := srv.Do(t, "SET", scripts.NewKeys(ns).Epoch(), "0", "NX").Error(); err != nil {
		t.Fatalf("init epoch: %v", err)
	}
	return srv, x, ns
}

// TestTLS: the CLI and the library talk to a Redis that serves TLS only,
// with a private CA, with and without client certificates required; the
// CLI's flags and variables do the same, and what is missing is named.
func TestTLS(t *testing.T) {
	t.Parallel()
	for _, require := range []bool{false, true} {
		t.Run(fmt.Sprintf("client-cert-required=%v", require), func(t *testing.T) {
			t.Parallel()
			srv, x, ns := tlsServer(t, require)
			plain, secure := "redis://"+srv.Addr(), "rediss://"+srv.Addr()
			certFlags := []string{"--cert", x.ClientCertFile, "--key", x.ClientKeyFile}
			certEnv := []string{"LEASEHOLD_CERT=" + x.ClientCertFile, "LEASEHOLD_KEY=" + x.ClientKeyFile}

			// Flags.
			args := append([]string{"lock", "--namespace", ns, "--tls", "--cacert", x.CAFile}, certFlags...)
			stdout, stderr, code := cli(t, plain, append(args, "m", "--", "sh", "-c", `echo "token $LEASEHOLD_TOKEN"`)...)
			if code != 0 || !strings.HasPrefix(stdout, "token ") {
				t.Fatalf("lock --tls --cacert --cert --key: exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			// cron too.
			args = append([]string{"cron", "--namespace", ns, "--tls", "--cacert", x.CAFile, "--runs", "1"}, certFlags...)
			_, stderr, code = cli(t, plain, append(args, "j", "--schedule", "@every 1s", "--", "true")...)
			if code != 0 {
				t.Fatalf("cron --tls --cacert --cert --key: exit %d, stderr %q", code, stderr)
			}
			// Variables, with rediss://.
			p := startEnv(t, append([]string{"LEASEHOLD_CACERT=" + x.CAFile}, certEnv...), secure, "status", "--namespace", ns)
			if code := p.wait(30 * time.Second); code != 0 {
				t.Fatalf("status with LEASEHOLD_CACERT, LEASEHOLD_CERT, LEASEHOLD_KEY: exit %d, stderr %q", code, p.stderr.String())
			}
			p = startEnv(t, []string{"LEASEHOLD_TLS=1", "LEASEHOLD_INSECURE_SKIP_VERIFY=true"}, plain,
				append([]string{"status", "--namespace", ns}, certFlags...)...)
			if code := p.wait(30 * time.Second); code != 0 {
				t.Fatalf("status with LEASEHOLD_TLS, LEASEHOLD_INSECURE_SKIP_VERIFY: exit %d, stderr %q", code, p.stderr.String())
			}

			// What is missing is named.
			_, stderr, code = cli(t, secure, append([]string{"status", "--namespace", ns}, certFlags...)...)
			if code != exitError || !strings.Contains(stderr, "--cacert") {
				t.Errorf("status without the CA: exit %d, stderr %q; want %d and a word of --cacert", code, stderr, exitError)
			}
			_, stderr, code = cli(t, plain, "lock", "--namespace", ns, "--wait", "0", "m", "--", "true")
			if code != exitFailed || !strings.Contains(stderr, "is the server expecting TLS? use rediss:// or --tls") {
				t.Errorf("lock over plain TCP to a TLS port: exit %d, stderr %q", code, stderr)
			}
			_, stderr, code = cli(t, secure, "lock", "--namespace", ns, "--cacert", x.CAFile, "m", "--", "true")
			switch {
			case require && (code != exitFailed || !strings.Contains(stderr, "--cert FILE and --key FILE")):
				t.Errorf("lock without the client certificate required: exit %d, stderr %q", code, stderr)
			case !require && code != 0:
				t.Errorf("lock without a client certificate: exit %d, stderr %q", code, stderr)
			}

			// The library, through rueidis.ClientOption.TLSConfig.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := session.Dial(ctx, rueidis.ClientOption{InitAddress: []string{srv.Addr()}, TLSConfig: x.Config(require)},
				session.Options{Namespace: ns})
			if err != nil {
				t.Fatalf("session.Dial over TLS: %v", err)
			}
			defer s.Close()
			h, err := mutex.New(s, "m").Lock(ctx)
			if err != nil {
				t.Fatalf("Lock over TLS: %v", err)
			}
			if err := h.Release(ctx); err != nil {
				t.Fatalf("Release over TLS: %v", err)
			}
		})
	}
}

// TestTLSToPlainPort: TLS to a Redis that does not serve it says so. A
// plain Redis answers a ClientHello only when one of its random bytes is a
// newline (then with an error reply: not a TLS record); otherwise it waits
// for the rest of the line, and the handshake times out.
func TestTLSToPlainPort(t *testing.T) {
	t.Parallel()
	srv, _, ns := server(t)
	_, stderr, code := cli(t, "rediss://"+srv.Addr()+"?dial_timeout=500ms", "status", "--namespace", ns)
	if code != exitError || !strings.Contains(stderr, "does not speak TLS") {
		t.Errorf("rediss:// to a plain port: exit %d, stderr %q", code, stderr)
	}
}

// TestSentinelTLSOption: with Sentinel, the TLS flags and variables (and
// rediss://) configure the connections to the sentinels as well as to the
// master, with no fixed server name (each connection checks the host it
// dials); without Sentinel, Sentinel.TLSConfig stays unset.
func TestSentinelTLSOption(t *testing.T) {
	x := redistest.NewTLS(t, true)
	for _, tc := range []struct {
		name     string
		url      string
		flags    []string
		sentinel bool
	}{
		{"redis-sentinel:// with --tls, --cacert, --cert, --key", "redis-sentinel://s1:26379,s2/m",
			[]string{"--tls", "--cacert", x.CAFile, "--cert", x.ClientCertFile, "--key", x.ClientKeyFile}, true},
		{"rediss:// with master_set", "rediss://s1:26379?master_set=m", []string{"--cacert", x.CAFile}, true},
		{"rediss:// without Sentinel", "rediss://r1:6379", []string{"--cacert", x.CAFile}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &globals{}
			top := flag.NewFlagSet("leasehold", flag.ContinueOnError)
			g.register(top)
			if err := top.Parse(append([]string{"--redis", tc.url}, tc.flags...)); err != nil {
				t.Fatal(err)
			}
			opt, err := g.clientOption()
			if err != nil {
				t.Fatal(err)
			}
			if opt.TLSConfig == nil || opt.TLSConfig.RootCAs == nil {
				t.Fatalf("TLSConfig %+v, want one with the CA", opt.TLSConfig)
			}
			if !tc.sentinel {
				if opt.Sentinel.TLSConfig != nil {
					t.Fatalf("Sentinel.TLSConfig set without Sentinel")
				}
				return
			}
			for what, c := range map[string]*tls.Config{"TLSConfig": opt.TLSConfig, "Sentinel.TLSConfig": opt.Sentinel.TLSConfig} {
				if c == nil || c.ServerName != "" || !c.RootCAs.Equal(opt.TLSConfig.RootCAs) ||
					len(c.Certificates) != len(opt.TLSConfig.Certificates) {
					t.Errorf("%s = %+v; want the CA and certificates of TLSConfig, no server name", what, c)
				}
			}
			if opt.Sentinel.TLSConfig == opt.TLSConfig {
				t.Error("Sentinel.TLSConfig is TLSConfig itself, not a copy")
			}
		})
	}
}

// TestSentinelTLS: through a Sentinel that, like its master, serves TLS
// only, the CLI finds the master and holds a lock with the TLS flags (and
// with rediss:// and LEASEHOLD_CACERT); without TLS it says that the server
// may expect it.
func TestSentinelTLS(t *testing.T) {
	t.Parallel()
	srv, x, ns := tlsServer(t, false)
	sentinel := redistest.StartSentinel(t, srv, "m")
	run := []string{"lock", "--namespace", ns, "m", "--", "sh", "-c", `echo "token $LEASEHOLD_TOKEN"`}

	stdout, stderr, code := cli(t, "redis-sentinel://"+sentinel+"/m", append([]string{"--tls", "--cacert", x.CAFile}, run...)...)
	if code != 0 || !strings.HasPrefix(stdout, "token ") {
		t.Fatalf("lock through a TLS Sentinel with --tls --cacert: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	p := startEnv(t, []string{"LEASEHOLD_CACERT=" + x.CAFile}, "rediss://"+sentinel+"?master_set=m", run...)
	if code := p.wait(30 * time.Second); code != 0 || !strings.HasPrefix(p.stdout.String(), "token ") {
		t.Fatalf("lock through a TLS Sentinel with rediss:// and LEASEHOLD_CACERT: exit %d, stderr %q", code, p.stderr.String())
	}
	_, stderr, code = cli(t, "redis-sentinel://"+sentinel+"/m?dial_timeout=1s", "status", "--namespace", ns)
	if code != exitError || !strings.Contains(stderr, "TLS") {
		t.Errorf("status through a TLS Sentinel without TLS: exit %d, stderr %q", code, stderr)
	}
	oneLineErr(t, stderr)
}
