package scripts_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/redistest"
	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestRefused: Refused tells the errors of a real Redis that retrying
// cannot fix (permissions, authentication, unknown commands, a read-only
// replica; also raised inside a script) from the others.
func TestRefused(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rep := redistest.Start(t, redistest.Options{})
	host, port, _ := net.SplitHostPort(srv.Addr())
	if err := rep.Do(t, "REPLICAOF", host, port).Error(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Do(t, "ACL", "SETUSER", "u", "on", ">pw", "~{ns}:*", "&{ns}:*", "-@all",
		"+eval", "+get", "+set", "+incr", "+publish").Error(); err != nil {
		t.Fatal(err)
	}
	o := testutil.ClientOption(srv.Addr())
	o.Username, o.Password = "u", "pw"
	user, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close()
	admin := testutil.Client(t, srv.Addr())
	replica := testutil.Client(t, rep.Addr())
	ctx := testutil.Ctx(t, 10*time.Second)
	if err := admin.Do(ctx, admin.B().Set().Key("{ns}:s").Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	eval := func(c rueidis.Client, script string) rueidis.Completed {
		return c.B().Eval().Script(script).Numkeys(1).Key("{ns}:k").Build()
	}
	for _, tc := range []struct {
		name string
		c    rueidis.Client
		cmd  rueidis.Completed
		want bool
	}{
		{"command not allowed", user, user.B().Info().Build(), true},
		{"key not allowed", user, user.B().Get().Key("{other}:k").Build(), true},
		{"command not allowed in a script", user, eval(user, "return redis.call('INFO')"), true},
		{"key not allowed in a script", user, eval(user, "return redis.call('GET', '{other}:k')"), true},
		{"channel not allowed", user, user.B().Publish().Channel("{other}:c").Message("m").Build(), true},
		{"channel not allowed in a script", user, eval(user, "return redis.call('PUBLISH', '{other}:c', 'm')"), true},
		{"wrong password", user, user.B().Auth().Username("u").Password("wrong").Build(), true},
		{"unknown command", admin, admin.B().Arbitrary("NOSUCHCOMMAND").Build(), true},
		{"unknown command in a script", admin, eval(admin, "return redis.call('NOSUCHCOMMAND')"), true},
		{"write on a replica", replica, replica.B().Set().Key("{ns}:k").Value("v").Build(), true},
		{"write on a replica in a script", replica, eval(replica, "return redis.call('SET', KEYS[1], 'v')"), true},
		{"wrong type", admin, admin.B().Hget().Key("{ns}:s").Field("f").Build(), false},
		{"wrong arguments", admin, admin.B().Arbitrary("GET").Build(), false},
		{"not an integer in a script", user, user.B().Eval().Script("return redis.call('INCR', KEYS[1])").Numkeys(1).Key("{ns}:s").Build(), false},
		{"script not loaded", admin, admin.B().Evalsha().Sha1(strings.Repeat("0", 40)).Numkeys(0).Build(), false},
		{"nil reply", admin, admin.B().Get().Key("{ns}:missing").Build(), false},
	} {
		err := tc.c.Do(ctx, tc.cmd).Error()
		if tc.want && err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if got := scripts.Refused(err); got != tc.want {
			t.Errorf("%s: Refused(%v) = %v, want %v", tc.name, err, got, tc.want)
		}
	}
	for _, err := range []error{nil, context.DeadlineExceeded, errors.New("NOPERM look-alike"), rueidis.ErrClosing} {
		if scripts.Refused(err) {
			t.Errorf("Refused(%v) = true, want false (not a Redis error)", err)
		}
	}
}

// TestACLCommands: ACLCommands names every command the scripts call (but
// SPUBLISH, for Redis Cluster, and INFO, which epoch_init.lua may be
// refused), so that the ACL rule it gives stays enough.
func TestACLCommands(t *testing.T) {
	files, err := filepath.Glob("*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Lua files: %v", err)
	}
	call := regexp.MustCompile(`redis\.p?call\(\s*'([A-Z_]+)'|'(S?PUBLISH)'`)
	optional := []string{"spublish", "info"}
	seen := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			cmd := strings.ToLower(m[1] + m[2])
			seen[cmd] = true
			if !slices.Contains(scripts.ACLCommands, cmd) && !slices.Contains(optional, cmd) {
				t.Errorf("%s calls %s, which ACLCommands lacks", f, strings.ToUpper(cmd))
			}
		}
	}
	for _, cmd := range []string{"hset", "publish", "time", "info"} { // the pattern still finds calls
		if !seen[cmd] {
			t.Errorf("no call of %s found in the scripts", strings.ToUpper(cmd))
		}
	}
}
