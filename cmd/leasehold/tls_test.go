//go:build unix

package main

import (
	"context"
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
