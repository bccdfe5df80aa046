package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/session"
)

const defaultRedis = "redis://127.0.0.1:6379"

// globals are the flags every command accepts, before or after its name.
type globals struct {
	redis     string
	redisSet  bool // --redis was given (the demo ignores $LEASEHOLD_REDIS)
	namespace string
	nsSet     bool // --namespace was given
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.Func("redis", "Redis `URL` (default $LEASEHOLD_REDIS, else "+defaultRedis+")", func(v string) error {
		g.redis, g.redisSet = v, true
		return nil
	})
	if g.namespace == "" {
		g.namespace = "leasehold"
	}
	fs.Func("namespace", "key `namespace` (default \"leasehold\")", func(v string) error {
		g.namespace, g.nsSet = v, true
		return nil
	})
}

// url returns the Redis URL to use: --redis, else $LEASEHOLD_REDIS, else the default.
func (g *globals) url() string {
	if g.redisSet {
		return g.redis
	}
	if v := os.Getenv("LEASEHOLD_REDIS"); v != "" {
		return v
	}
	return defaultRedis
}

// check validates the namespace the way session.Options does.
func (g *globals) check() error {
	if g.namespace == "" || strings.ContainsAny(g.namespace, "{}") || len(g.namespace) > 128 {
		return fail(exitUsage, "--namespace %q: must be 1 to 128 bytes without '{' or '}'", g.namespace)
	}
	return nil
}

// command describes one subcommand for its flag set and usage text.
type command struct {
	name  string
	synop string // "lock [flags] NAME -- CMD [ARGS...]"
	about string // paragraphs after the flags
	fs    *flag.FlagSet
}

func newCommand(g *globals, name, synop, about string) *command {
	c := &command{name: name, synop: synop, about: about, fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	c.fs.SetOutput(io.Discard)
	g.register(c.fs)
	return c
}

// help returns the command's usage text.
func (c *command) help() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: leasehold %s\n\nFlags:\n", c.synop)
	c.fs.SetOutput(&b)
	c.fs.PrintDefaults()
	c.fs.SetOutput(io.Discard)
	if c.about != "" {
		b.WriteString("\n" + strings.TrimLeft(c.about, "\n"))
	}
	return b.String()
}

// parse parses flags placed anywhere before "--" and returns the positional
// arguments and what follows "--" (hasCmd reports whether "--" was there).
// -h prints the help on stdout and returns errHelp.
func (c *command) parse(args []string, stdout io.Writer) (pos, cmd []string, hasCmd bool, err error) {
	if i := slices.Index(args, "--"); i >= 0 {
		args, cmd, hasCmd = args[:i], args[i+1:], true
	}
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, c.help())
				return nil, nil, false, errHelp
			}
			return nil, nil, false, c.usageErr("%v", err)
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			return pos, cmd, hasCmd, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// usageErr is a usage error naming the command, on one line.
func (c *command) usageErr(format string, args ...any) error {
	return fail(exitUsage, "%s: %s (usage: leasehold %s)", c.name, fmt.Sprintf(format, args...), c.synop)
}

// optDuration is a duration flag whose default is computed from other flags.
type optDuration struct {
	set bool
	d   time.Duration
	def string // shown as the default
}

func (o *optDuration) String() string {
	if o == nil || !o.set {
		if o != nil {
			return o.def
		}
		return ""
	}
	return o.d.String()
}

func (o *optDuration) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("not a duration (e.g. 500ms, 10s, 2m)")
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	o.set, o.d = true, d
	return nil
}

// or returns the flag's value, or def when it was not given.
func (o *optDuration) or(def time.Duration) time.Duration {
	if o.set {
		return o.d
	}
	return def
}

// checkName validates a resource name as the library does.
func checkName(kind, name string) error {
	if err := session.CheckName(name); err != nil {
		return fail(exitUsage, "%s name %q: %v", kind, name, err)
	}
	return nil
}

// clientOption turns a Redis URL into rueidis options. It accepts what
// rueidis.ParseURL does (redis://, rediss://, unix://, valkey://, valkeys://;
// Sentinel as ?master_set=NAME with more sentinels as &addr=host:port), a bare
// host:port, and redis-sentinel://[user:password@]host[:port][,host[:port]...]/NAME.
func clientOption(raw string) (rueidis.ClientOption, error) {
	bad := func(format string, args ...any) (rueidis.ClientOption, error) {
		return rueidis.ClientOption{}, fail(exitUsage, "--redis %q: %s", raw, fmt.Sprintf(format, args...))
	}
	u := strings.TrimSpace(raw)
	if u == "" {
		return bad("empty URL")
	}
	if !strings.Contains(u, "://") {
		if _, _, err := net.SplitHostPort(u); err != nil {
			return bad("not a URL (redis://host:port, rediss://, unix:///path, redis-sentinel://host:port/NAME) nor host:port")
		}
		u = "redis://" + u
	}
	if rest, ok := strings.CutPrefix(u, "redis-sentinel://"); ok {
		var err error
		if u, err = sentinelURL(rest); err != nil {
			return bad("%v", err)
		}
	}
	opt, err := rueidis.ParseURL(u)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "redis: ")
		if strings.Contains(msg, "invalid URL scheme") {
			msg += " (want redis://, rediss://, unix://, valkey://, valkeys:// or redis-sentinel://)"
		}
		return bad("%s", msg)
	}
	if strings.HasPrefix(u, "unix:") && (len(opt.InitAddress) == 0 || opt.InitAddress[0] == "") {
		return bad("no socket path (unix:///path/to/redis.sock)")
	}
	opt.DisableCache = true // leasehold uses no client-side caching
	return opt, nil
}

// sentinelURL rewrites the part after "redis-sentinel://" into the form
// rueidis.ParseURL reads: redis://first-sentinel?master_set=NAME&addr=others.
func sentinelURL(rest string) (string, error) {
	query := ""
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query = rest[:i], rest[i+1:]
	}
	hosts, master, _ := strings.Cut(rest, "/")
	master = strings.Trim(master, "/")
	user := ""
	if i := strings.LastIndexByte(hosts, '@'); i >= 0 {
		user, hosts = hosts[:i+1], hosts[i+1:]
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", fmt.Errorf("bad query: %v", err)
	}
	if master == "" {
		master = q.Get("master_set")
	}
	if master == "" {
		return "", errors.New("no master name (redis-sentinel://host:26379/NAME)")
	}
	q.Set("master_set", master)
	var addrs []string
	for h := range strings.SplitSeq(hosts, ",") {
		if h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), "26379")
		}
		addrs = append(addrs, h)
	}
	if len(addrs) == 0 {
		return "", errors.New("no sentinel address")
	}
	q.Del("addr")
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	return "redis://" + user + addrs[0] + "?" + q.Encode(), nil
}
