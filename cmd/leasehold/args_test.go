package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestClientOption(t *testing.T) {
	for _, tc := range []struct {
		url     string
		addrs   []string
		master  string
		db      int
		tls     bool
		wantErr string
	}{
		{url: "redis://127.0.0.1:6380", addrs: []string{"127.0.0.1:6380"}},
		{url: "127.0.0.1:6381", addrs: []string{"127.0.0.1:6381"}},
		{url: "redis://h/3", addrs: []string{"h:6379"}, db: 3},
		{url: "rediss://user:pw@h:6390", addrs: []string{"h:6390"}, tls: true},
		{url: "unix:///run/redis.sock", addrs: []string{"/run/redis.sock"}},
		{url: "redis://s1:26379?master_set=mymaster&addr=s2:26379", addrs: []string{"s1:26379", "s2:26379"}, master: "mymaster"},
		{url: "redis-sentinel://s1,s2:26380/mymaster?db=2", addrs: []string{"s1:26379", "s2:26380"}, master: "mymaster", db: 2},
		{url: "redis-sentinel://:pw@s1:26379?master_set=m", addrs: []string{"s1:26379"}, master: "m"},
		{url: "redis-sentinel://s1:26379", wantErr: "no master name"},
		{url: "http://h:6379", wantErr: "invalid URL scheme"},
		{url: "nonsense", wantErr: "not a URL"},
		{url: "unix://", wantErr: "no socket path"},
		{url: "", wantErr: "empty URL"},
	} {
		opt, err := clientOption(tc.url)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err = %v, want %q", tc.url, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.url, err)
			continue
		}
		if !slices.Equal(opt.InitAddress, tc.addrs) || opt.Sentinel.MasterSet != tc.master ||
			opt.SelectDB != tc.db || (opt.TLSConfig != nil) != tc.tls || !opt.DisableCache {
			t.Errorf("%q: addrs %v master %q db %d tls %v, want %v %q %d %v", tc.url,
				opt.InitAddress, opt.Sentinel.MasterSet, opt.SelectDB, opt.TLSConfig != nil, tc.addrs, tc.master, tc.db, tc.tls)
		}
	}
}

func TestParseInterleaved(t *testing.T) {
	g := &globals{}
	c := newCommand(g, "sem", "sem NAME -- CMD", "")
	limit := c.fs.Int64("limit", 0, "")
	ttl := c.fs.Duration("ttl", time.Second, "")
	pos, cmd, hasCmd, err := c.parse([]string{"--limit", "3", "name", "--ttl=2s", "--namespace", "x", "--", "sh", "-c", "--limit 9"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pos, []string{"name"}) || !hasCmd || !slices.Equal(cmd, []string{"sh", "-c", "--limit 9"}) ||
		*limit != 3 || *ttl != 2*time.Second || g.namespace != "x" || !g.nsSet {
		t.Fatalf("pos %q cmd %q hasCmd %v limit %d ttl %v ns %q", pos, cmd, hasCmd, *limit, *ttl, g.namespace)
	}
}

// TestUsageErrors: bad input gives one clear line on stderr and exit code 2,
// without touching Redis.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"elect", "e"}, "no command"},
		{[]string{"sem-limit", "s", "-3"}, "limit -3: a limit is a whole number from 1 to 70368744177664, or 0 to withdraw the operator's limit"},
		{[]string{"sem-limit", "s", "many"}, "a limit is a whole number from 1"},
		{[]string{"sem-limit", "s", "70368744177665"}, "a limit is a whole number from 1 to 70368744177664"},
		{[]string{"lock", "m", "--"}, "no command"},
		{[]string{"lock", "--", "true"}, "no NAME"},
		{[]string{"lock", "m", "extra", "--", "true"}, "unexpected"},
		{[]string{"lock", "--ttl", "1s", "--kill-after", "2s", "m", "--", "true"}, "exceeds --ttl"},
		{[]string{"lock", "--wait", "soon", "m", "--", "true"}, "not a duration"},
		{[]string{"lock", "--ttl", "8761h", "m", "--", "true"}, "TTL 8761h0m0s above the maximum 8760h0m0s"},
		{[]string{"lock", "--ttl", "2s", "--restart-grace", "1s", "m", "--", "true"}, "RestartGrace 1s shorter than the TTL 2s"},
		{[]string{"lock", "--lock-delay", "9000h", "m", "--", "true"}, "LockDelay 9000h0m0s"},
		// Checked before connecting: nothing answers on port 1.
		{[]string{"--redis", "redis://127.0.0.1:1", "cron", "--schedule", "@every 1500ms", "j", "--", "true"}, "@every takes whole seconds"},
		{[]string{"--redis", "redis://127.0.0.1:1", "cron", "--grace", "500us", "--schedule", "@hourly", "j", "--", "true"}, "Grace 500µs"},
		{[]string{"sem", "s", "--", "true"}, "--limit"},
		{[]string{"sem", "s", "--limit", "70368744177665", "--", "true"}, "--limit N (1 to 70368744177664)"},
		{[]string{"sem", "s", "--limit", "2", "--weight", "3", "--", "true"}, "--weight"},
		{[]string{"pool", "acquire", "p"}, "no command"},
		{[]string{"pool", "acquire", "--", "true"}, "no NAME"},
		{[]string{"pool", "--ttl", "1s", "acquire", "--kill-after", "2s", "p", "--", "true"}, "exceeds --ttl"},
		{[]string{"pool", "acquire", "--lock-delay", "1s", "p", "--", "true"}, "flag provided but not defined: -lock-delay"},
		{[]string{"pool", "acquire", "p", "q", "--", "true"}, "unexpected"},
		{[]string{"--redis", "foo://x", "lock", "m", "--", "true"}, "invalid URL scheme"},
		{[]string{"status", "--redis", "::::"}, "--redis"},
		{[]string{"--namespace", "a{b}", "status"}, "--namespace"},
		{[]string{"reset"}, "no NAME"},
		{[]string{"reset", "a", "--all"}, "not both"},
		{[]string{"reset", "a", "--kind", "lock"}, `--kind "lock": not one of mutex, rwmutex, election, semaphore, pool`},
		{[]string{"pool", "frob", "p"}, "unknown subcommand"},
		{[]string{"pool", "add", "p"}, "at least one KEY"},
		{[]string{"--redis", "redis://h:1?tls_ca_file=x", "status"}, `unknown URL option "tls_ca_file" (known: addr,`},
		{[]string{"status", "--redis", "redis-sentinel://h:1/m?foo=bar"}, `unknown URL option "foo"`},
		{[]string{"--redis", "redis://h:1", "--cacert", "ca.pem", "status"}, "--cacert needs TLS: use a rediss:// URL or add --tls"},
		{[]string{"--redis", "rediss://h:1", "--cert", "c.pem", "status"}, "needs both --cert and --key"},
		{[]string{"--redis", "unix:///tmp/r.sock", "--tls", "status"}, "TLS is not available on a unix socket"},
		{[]string{"--redis", "rediss://h:1", "--cacert", "/nonexistent/ca.pem", "status"}, "--cacert: open /nonexistent/ca.pem"},
		{[]string{"--redis", "redis://h:1", "--tls=maybe", "status"}, "--tls"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"--bogus"}, "flag provided but not defined"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errb)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %q", tc.args, code, exitUsage, errb.String())
		}
		oneLineErr(t, errb.String())
		if !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q: stderr %q, want it to mention %q", tc.args, errb.String(), tc.want)
		}
	}
}

// TestComputedLockDelayInBounds: the --lock-delay a runner computes when
// none is given (--kill-after + --ttl/10) stays within the session's bound
// at the longest --ttl: the command gets as far as connecting (nothing
// answers on port 1), it is not refused as a usage error.
func TestComputedLockDelayInBounds(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"--redis", "redis://127.0.0.1:1", "lock", "--ttl", "8760h", "--kill-after", "8760h", "m", "--", "true"}
	if code := run(context.Background(), args, &out, &errb); code != exitFailed {
		t.Errorf("%q: exit %d, want %d (no Redis); stderr %q", args, code, exitFailed, errb.String())
	}
}

// TestVersion: --version prints the module's version, "(devel)" when the
// build did not record one.
func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &out, &errb); code != 0 || errb.Len() > 0 ||
		out.String() != "leasehold "+version()+"\n" || version() == "" {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"lock", "-h"}, {"sem", "--help"}, {"elect", "-h"},
		{"status", "-h"}, {"reset", "-h"}, {"pool", "-h"}, {"demo", "-h"},
		{"pool", "acquire", "-h"}, {"pool", "--namespace", "x", "acquire", "--help"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 0 || errb.Len() > 0 || !strings.Contains(out.String(), "Usage") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), nil, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "Commands:") {
		t.Errorf("no args: exit %d, stderr %q", code, errb.String())
	}
}

// TestClientOptionSeeds: several seeds, as a comma list or by repeating
// --redis, all end up in InitAddress, in order and without duplicates; the
// user, password, database and options written once apply to all.
func TestClientOptionSeeds(t *testing.T) {
	t.Parallel()
	type want struct {
		addrs      []string
		user, pass string
		db         int
		master     string
		tls        bool
		serverName string // with tls
		clientName string
	}
	for _, tc := range []struct {
		name string
		vals []string // --redis values
		want want
	}{
		{"bare comma list", []string{"127.0.0.1:7301,127.0.0.1:7302,127.0.0.1:7303"},
			want{addrs: []string{"127.0.0.1:7301", "127.0.0.1:7302", "127.0.0.1:7303"}}},
		{"redis:// comma list", []string{"redis://127.0.0.1:7301,127.0.0.1:7302"},
			want{addrs: []string{"127.0.0.1:7301", "127.0.0.1:7302"}}},
		{"spaces after commas", []string{"redis://a:7301, b:7302 ,c:7303"},
			want{addrs: []string{"a:7301", "b:7302", "c:7303"}}},
		{"repeated bare", []string{"127.0.0.1:7301", "127.0.0.1:7302"},
			want{addrs: []string{"127.0.0.1:7301", "127.0.0.1:7302"}}},
		{"repeated redis://", []string{"redis://a:1", "redis://b:2"},
			want{addrs: []string{"a:1", "b:2"}}},
		{"bare counts as redis://", []string{"a:1", "redis://b:2,c:3"},
			want{addrs: []string{"a:1", "b:2", "c:3"}}},
		{"comma list of URLs", []string{"redis://a:1,redis://b:2"},
			want{addrs: []string{"a:1", "b:2"}}},
		{"duplicates dropped", []string{"a:1,b:2", "b:2,c:3", "a:1"},
			want{addrs: []string{"a:1", "b:2", "c:3"}}},
		{"user, password, db and query for all", []string{"redis://u:pw@a:1,b:2/3?client_name=x"},
			want{addrs: []string{"a:1", "b:2"}, user: "u", pass: "pw", db: 3, clientName: "x"}},
		{"same credentials repeated", []string{"redis://u:pw@a:1", "redis://u:pw@b:2"},
			want{addrs: []string{"a:1", "b:2"}, user: "u", pass: "pw"}},
		{"default port", []string{"redis://a,b"},
			want{addrs: []string{"a:6379", "b:6379"}}},
		{"IPv6", []string{"redis://[::1]:7301,[::1]:7302", "[::1]:7303"},
			want{addrs: []string{"[::1]:7301", "[::1]:7302", "[::1]:7303"}}},
		{"valkey:// list", []string{"valkey://a:1,b:2"},
			want{addrs: []string{"a:1", "b:2"}}},
		{"rediss:// list: each connection checks its own host", []string{"rediss://a:1,b:2"},
			want{addrs: []string{"a:1", "b:2"}, tls: true, serverName: ""}},
		{"rediss:// one seed keeps its server name", []string{"rediss://a:1"},
			want{addrs: []string{"a:1"}, tls: true, serverName: "a"}},
		{"comma in the password as %2C", []string{"redis://:p%2Cq@a:1,b:2"},
			want{addrs: []string{"a:1", "b:2"}, pass: "p,q"}},
		{"comma in the query is not a seed", []string{"redis://a:1?client_name=x,y"},
			want{addrs: []string{"a:1"}, clientName: "x,y"}},
		{"comma in a socket path", []string{"unix:///run/a,b.sock"},
			want{addrs: []string{"/run/a,b.sock"}}},
		{"same socket twice", []string{"unix:///run/r.sock", "unix:///run/r.sock"},
			want{addrs: []string{"/run/r.sock"}}},
		{"Sentinel addr= form", []string{"redis://s1:26379?master_set=m&addr=s2:26379"},
			want{addrs: []string{"s1:26379", "s2:26379"}, master: "m"}},
		{"Sentinel addr= form repeated", []string{"redis://s1:26379?master_set=m", "redis://s2:26379?master_set=m"},
			want{addrs: []string{"s1:26379", "s2:26379"}, master: "m"}},
		{"redis-sentinel:// list", []string{"redis-sentinel://s1,s2:26380/m"},
			want{addrs: []string{"s1:26379", "s2:26380"}, master: "m"}},
		{"redis-sentinel:// repeated", []string{"redis-sentinel://s1/m", "redis-sentinel://s2:26380,s1/m"},
			want{addrs: []string{"s1:26379", "s2:26380"}, master: "m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt, err := clientOption(tc.vals...)
			if err != nil {
				t.Fatalf("clientOption(%q): %v", tc.vals, err)
			}
			got := want{addrs: opt.InitAddress, user: opt.Username, pass: opt.Password, db: opt.SelectDB,
				master: opt.Sentinel.MasterSet, tls: opt.TLSConfig != nil, clientName: opt.ClientName}
			if opt.TLSConfig != nil {
				got.serverName = opt.TLSConfig.ServerName
			}
			if !slices.Equal(got.addrs, tc.want.addrs) || got.user != tc.want.user || got.pass != tc.want.pass ||
				got.db != tc.want.db || got.master != tc.want.master || got.tls != tc.want.tls ||
				got.serverName != tc.want.serverName || got.clientName != tc.want.clientName {
				t.Errorf("clientOption(%q)\n got %+v\nwant %+v", tc.vals, got, tc.want)
			}
			if !opt.DisableCache {
				t.Errorf("clientOption(%q): DisableCache is off", tc.vals)
			}
		})
	}
}

// TestClientOptionSeedErrors: seeds that do not parse or do not agree are
// usage errors, on one line, naming the problem.
func TestClientOptionSeedErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		vals []string
		want string // in the message
	}{
		{"mixed schemes in a list", []string{"redis://a:1,rediss://b:2"}, "mix schemes: redis:// (a:1) and rediss:// (b:2)"},
		{"mixed schemes repeated", []string{"redis://a:1", "valkey://b:2"}, "mix schemes"},
		{"bare and rediss://", []string{"a:1", "rediss://b:2"}, "mix schemes"},
		{"redis-sentinel:// and redis://", []string{"redis-sentinel://s1/m", "redis://a:1"}, "mix schemes"},
		{"bad port in a list", []string{"redis://a:1,b:x"}, `seed "redis://b:x": invalid port ":x"`},
		{"bad scheme in a list", []string{"redis://a:1,http://b:2"}, "invalid URL scheme"},
		{"bare seed without port", []string{"a:1,b"}, `seed "b": not a URL`},
		{"empty seed", []string{"redis://a:1,,b:2"}, "empty address"},
		{"trailing comma", []string{"a:1,"}, "empty address"},
		{"empty value among several", []string{"a:1", " "}, "empty URL"},
		{"two colons", []string{"redis://a:1,b:2:3"}, `address "b:2:3": more than one ':'`},
		{"passwords differ", []string{"redis://:pw@a:1", "redis://b:2"}, "a:1 and b:2 differ in password"},
		{"users differ", []string{"redis://u@a:1", "redis://v@b:2"}, "differ in user"},
		{"databases differ", []string{"redis://a:1/1", "b:2"}, "differ in database"},
		{"master names differ", []string{"redis-sentinel://s1/m", "redis-sentinel://s2/n"}, "differ in Sentinel master_set"},
		{"Sentinel and not", []string{"redis://s1?master_set=m", "redis://a:1"}, "differ in Sentinel master_set"},
		{"options differ", []string{"redis://a:1?dial_timeout=1s", "redis://b:2"}, "differ in dial_timeout"},
		{"several sockets", []string{"unix:///a.sock", "unix:///b.sock"}, "unix:// takes one socket path"},
		{"comma in the password", []string{"redis://u:p,q@a:1"}, "%2C"},
		{"no master name in a list", []string{"redis-sentinel://s1,s2"}, "no master name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := clientOption(tc.vals...)
			var ee *exitErr
			if !errors.As(err, &ee) || ee.code != exitUsage {
				t.Fatalf("clientOption(%q) = %v, want a usage error (exit %d)", tc.vals, err, exitUsage)
			}
			if !strings.Contains(ee.msg, tc.want) || !strings.HasPrefix(ee.msg, "--redis") || strings.Contains(ee.msg, "\n") {
				t.Errorf("clientOption(%q): %q, want one line starting with --redis and mentioning %q", tc.vals, ee.msg, tc.want)
			}
		})
	}
}

// TestRedisFlagRepeated: --redis may be given several times, before and
// after the command's name; it overrides $LEASEHOLD_REDIS, which may hold a
// comma list.
func TestRedisFlagRepeated(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  string
		top  []string // flags before the command
		cmd  []string // flags after it
		want []string
	}{
		{"default", "", nil, nil, []string{defaultRedis}},
		{"env comma list", "redis://a:1,b:2", nil, nil, []string{"redis://a:1,b:2"}},
		{"one flag", "redis://e:1", []string{"--redis", "a:1"}, nil, []string{"a:1"}},
		{"before and after", "redis://e:1", []string{"--redis", "a:1"}, []string{"--redis=b:2", "--redis", "c:3,d:4"},
			[]string{"a:1", "b:2", "c:3,d:4"}},
		{"after only", "", nil, []string{"--redis", "a:1", "--redis", "b:2"}, []string{"a:1", "b:2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("LEASEHOLD_REDIS", tc.env)
			g := &globals{}
			top := flag.NewFlagSet("leasehold", flag.ContinueOnError)
			g.register(top)
			if err := top.Parse(append(tc.top, "status")); err != nil {
				t.Fatal(err)
			}
			c := newCommand(g, "status", "status", "")
			if _, _, _, err := c.parse(tc.cmd, nil); err != nil {
				t.Fatal(err)
			}
			if got := g.urls(); !slices.Equal(got, tc.want) {
				t.Errorf("urls() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSeedUsageErrors: bad seeds from --redis or $LEASEHOLD_REDIS end the
// command with exit 2 and one line, before any connection.
func TestSeedUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want string
	}{
		{"repeated, mixed schemes", "", []string{"--redis", "127.0.0.1:1", "status", "--redis", "rediss://127.0.0.1:2"}, "mix schemes"},
		{"list, bad port", "", []string{"lock", "--redis", "redis://127.0.0.1:1,127.0.0.1:x", "m", "--", "true"}, "invalid port"},
		{"env list, mixed schemes", "redis://127.0.0.1:1,valkey://127.0.0.1:2", []string{"status"}, "mix schemes"},
		{"env list, empty seed", "127.0.0.1:1,,127.0.0.1:2", []string{"reset", "--all"}, "empty address"},
		{"demo, mixed schemes", "", []string{"demo", "--redis", "127.0.0.1:1", "--redis", "unix:///x.sock"}, "mix schemes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("LEASEHOLD_REDIS", tc.env)
			var out, errb bytes.Buffer
			if code := run(context.Background(), tc.args, &out, &errb); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %q", code, exitUsage, errb.String())
			}
			oneLineErr(t, errb.String())
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q, want it to mention %q", errb.String(), tc.want)
			}
		})
	}
}

// oneLineErr checks that stderr is exactly one line starting with "leasehold: ".
func oneLineErr(t *testing.T, stderr string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "leasehold: ") {
		t.Errorf("stderr is not one \"leasehold: \" line: %q", stderr)
	}
}
