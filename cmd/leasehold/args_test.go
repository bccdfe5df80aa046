package main

import (
	"bytes"
	"context"
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
		{[]string{"lock", "m"}, "no command"},
		{[]string{"lock", "m", "--"}, "no command"},
		{[]string{"lock", "--", "true"}, "no NAME"},
		{[]string{"lock", "m", "extra", "--", "true"}, "unexpected"},
		{[]string{"lock", "--ttl", "1s", "--kill-after", "2s", "m", "--", "true"}, "exceeds --ttl"},
		{[]string{"lock", "--wait", "soon", "m", "--", "true"}, "not a duration"},
		{[]string{"sem", "s", "--", "true"}, "--limit"},
		{[]string{"sem", "s", "--limit", "2", "--weight", "3", "--", "true"}, "--weight"},
		{[]string{"elect", "e", "--wait", "0", "--", "true"}, "--wait 0"},
		{[]string{"--redis", "foo://x", "lock", "m", "--", "true"}, "invalid URL scheme"},
		{[]string{"status", "--redis", "::::"}, "--redis"},
		{[]string{"--namespace", "a{b}", "status"}, "--namespace"},
		{[]string{"reset"}, "no mutex NAME"},
		{[]string{"reset", "a", "--all"}, "not both"},
		{[]string{"pool", "frob", "p"}, "unknown subcommand"},
		{[]string{"pool", "add", "p"}, "at least one KEY"},
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

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"lock", "-h"}, {"sem", "--help"}, {"elect", "-h"},
		{"status", "-h"}, {"reset", "-h"}, {"pool", "-h"}, {"demo", "-h"}} {
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
