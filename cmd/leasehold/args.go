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
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/session"
)

const defaultRedis = "redis://127.0.0.1:6379"

// globals are the flags every command accepts, before or after its name.
type globals struct {
	redis     []string // every --redis value, in order
	redisSet  bool     // --redis was given (the demo ignores $LEASEHOLD_REDIS)
	namespace string
	nsSet     bool // --namespace was given
	shards    int  // --shards: the namespace's shard count; 0 when not given (read from Redis)
	tls       tlsFlags
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.Func("redis", "Redis `URL`; repeat it or separate addresses with commas for several Redis Cluster seeds (default $LEASEHOLD_REDIS, else "+defaultRedis+")", func(v string) error {
		g.redis, g.redisSet = append(g.redis, v), true
		return nil
	})
	if g.namespace == "" {
		g.namespace = "leasehold"
	}
	fs.Func("namespace", "key `namespace` (default \"leasehold\")", func(v string) error {
		g.namespace, g.nsSet = v, true
		return nil
	})
	fs.Func("shards", "the namespace's shard `count` (session.Options.Shards; 1: unsharded); default: as Redis records it", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > session.MaxShards {
			return fmt.Errorf("a whole number from 1 to %d", session.MaxShards)
		}
		g.shards = n
		return nil
	})
	g.tls.register(fs)
}

// clientOption is clientOption of g.urls() with the TLS flags applied.
func (g *globals) clientOption() (rueidis.ClientOption, error) {
	opt, err := clientOption(g.urls()...)
	if err != nil {
		return opt, err
	}
	return opt, g.tls.apply(&opt)
}

// urls returns the Redis URLs to use: every --redis, else $LEASEHOLD_REDIS,
// else the default. Each may be a comma list of seeds (see clientOption).
func (g *globals) urls() []string {
	if g.redisSet {
		return g.redis
	}
	if v := os.Getenv("LEASEHOLD_REDIS"); v != "" {
		return []string{v}
	}
	return []string{defaultRedis}
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
		return fail(exitUsage, "%s name: %v", kind, err)
	}
	return nil
}

// checkExisting checks a name an operator command only reads or removes
// (pool ls, stats, rm; reset): data written before names had to be valid
// UTF-8 without control characters may hold others, and the operator must
// be able to see and clean them up. Only what Redis could never have stored
// for it is refused.
func checkExisting(kind, name string) error {
	if name == "" || len(name) > session.MaxNameLen {
		return checkName(kind, name)
	}
	return nil
}

// clientOption turns --redis values into rueidis options. Each value is one
// URL of a form rueidis.ParseURL accepts (redis://, rediss://, unix://,
// valkey://, valkeys://; Sentinel as ?master_set=NAME with more sentinels as
// &addr=host:port), a bare host:port, or
// redis-sentinel://[user:password@]host[:port][,host[:port]...]/NAME -- or a
// comma list of seeds (see splitSeeds). Every seed of every value ends up in
// InitAddress, in order and without duplicates; rueidis then finds out by
// itself whether it talks to a Redis Cluster. All seeds must share the
// scheme (a bare host:port counts as redis://), the user, the password, the
// database and the URL options; anything else is a usage error.
func clientOption(vals ...string) (rueidis.ClientOption, error) {
	if len(vals) == 0 {
		vals = []string{""}
	}
	var (
		opt   rueidis.ClientOption
		first *parsedSeed
		n     int // seeds
	)
	for _, raw := range vals {
		bad := func(format string, args ...any) (rueidis.ClientOption, error) {
			return rueidis.ClientOption{}, fail(exitUsage, "--redis %q: %s", raw, fmt.Sprintf(format, args...))
		}
		if strings.TrimSpace(raw) == "" {
			return bad("empty URL")
		}
		seeds, err := splitSeeds(raw)
		if err != nil {
			return bad("%v", err)
		}
		for _, sd := range seeds {
			ps, err := parseSeed(sd)
			if err != nil {
				if len(seeds) > 1 {
					return bad("seed %q: %v", sd.text, err)
				}
				return bad("%v", err)
			}
			n++
			if first == nil {
				first, opt = &ps, ps.opt
				continue
			}
			if ps.scheme != first.scheme {
				return rueidis.ClientOption{}, fail(exitUsage,
					"--redis: seeds mix schemes: %s (%s) and %s (%s); every seed must use the same scheme",
					first.scheme+"://", strings.Join(first.opt.InitAddress, ","), ps.scheme+"://", strings.Join(ps.opt.InitAddress, ","))
			}
			if d := differs(first.opt, ps.opt); d != "" {
				return rueidis.ClientOption{}, fail(exitUsage,
					"--redis: seeds %s and %s differ in %s; give the user, password, database and options once for all seeds: "+
						"redis://[user:password@]host1:port1,host2:port2[/db][?options]",
					strings.Join(first.opt.InitAddress, ","), strings.Join(ps.opt.InitAddress, ","), d)
			}
			for _, a := range ps.opt.InitAddress {
				if !slices.Contains(opt.InitAddress, a) {
					opt.InitAddress = append(opt.InitAddress, a)
				}
			}
		}
	}
	if first.scheme == "unix" && len(opt.InitAddress) > 1 {
		return rueidis.ClientOption{}, fail(exitUsage, "--redis: unix:// takes one socket path; give several seeds as host:port")
	}
	if n > 1 && opt.TLSConfig != nil {
		// rueidis.ParseURL names the first seed's host as the TLS server name
		// of every connection; with several seeds, let each connection check
		// the certificate against the host it dials.
		opt.TLSConfig = opt.TLSConfig.Clone()
		opt.TLSConfig.ServerName = ""
	}
	opt.DisableCache = true // leasehold uses no client-side caching
	return opt, nil
}

// seedText is one seed of a --redis value, split by splitSeeds.
type seedText struct {
	scheme string // "" for a bare host:port
	text   string // the seed as a URL (or bare host:port) of its own
	rest   string // redis-sentinel only: what follows "redis-sentinel://"
}

// splitSeeds splits one --redis value into its seeds. A comma separates
// seeds
//   - between the hosts of a URL, before its path and query:
//     redis://[user:password@]host1:port1,host2:port2[/db][?query] is
//     redis://[user:password@]host1:port1[/db][?query] and the same for
//     host2:port2 (redis-sentinel:// lists its sentinels the same way and
//     stays one seed);
//   - between bare host:port seeds;
//   - before a new scheme://: redis://host1:port1,redis://host2:port2.
//
// A comma in the path or query belongs to them; one in a user or password
// must be written %2C.
func splitSeeds(v string) ([]seedText, error) {
	type group struct {
		scheme, user string
		hosts        []string
		tail         string // path and query, from the first '/', '?' or '#'
	}
	var groups []*group
	var cur *group // the URL whose host list is being read
	for _, item := range strings.Split(v, ",") {
		scheme, rest, isURL := cutScheme(strings.TrimSpace(item))
		switch {
		case isURL:
			authority, tail := splitAuthority(rest)
			cur = &group{scheme: scheme, tail: tail}
			if i := strings.LastIndexByte(authority, '@'); i >= 0 {
				cur.user, authority = authority[:i+1], authority[i+1:]
			}
			cur.hosts = []string{strings.TrimSpace(authority)}
			groups = append(groups, cur)
		case cur != nil && cur.tail != "":
			cur.tail += "," + item // inside the path or query
		case cur != nil:
			host, tail := splitAuthority(item)
			if strings.Contains(host, "@") {
				return nil, errors.New("user and password go before the first host (write a ',' in them as %2C)")
			}
			cur.hosts, cur.tail = append(cur.hosts, strings.TrimSpace(host)), tail
		default:
			groups = append(groups, &group{hosts: []string{strings.TrimSpace(item)}})
		}
	}
	var out []seedText
	for _, g := range groups {
		if g.scheme == "redis-sentinel" {
			rest := g.user + strings.Join(g.hosts, ",") + g.tail
			out = append(out, seedText{scheme: g.scheme, text: "redis-sentinel://" + rest, rest: rest})
			continue
		}
		for _, h := range g.hosts {
			if h == "" && (len(g.hosts) > 1 || len(groups) > 1) {
				return nil, errors.New("empty address in the seed list")
			}
			if g.scheme == "" {
				out = append(out, seedText{text: h})
				continue
			}
			out = append(out, seedText{scheme: g.scheme, text: g.scheme + "://" + g.user + h + g.tail})
		}
	}
	return out, nil
}

// cutScheme splits "scheme://rest".
func cutScheme(s string) (scheme, rest string, ok bool) {
	scheme, rest, ok = strings.Cut(s, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "/?#@:[], ") {
		return "", "", false
	}
	return strings.ToLower(scheme), rest, true
}

// splitAuthority splits what follows "scheme://" before its path or query.
func splitAuthority(s string) (authority, tail string) {
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

// parsedSeed is one seed parsed by rueidis.ParseURL.
type parsedSeed struct {
	scheme string // "redis" for a bare host:port
	opt    rueidis.ClientOption
}

func parseSeed(sd seedText) (parsedSeed, error) {
	u := sd.text
	switch sd.scheme {
	case "":
		if _, _, err := net.SplitHostPort(u); err != nil {
			return parsedSeed{}, errors.New("not a URL (redis://host:port, rediss://, unix:///path, redis-sentinel://host:port/NAME) nor host:port")
		}
		u, sd.scheme = "redis://"+u, "redis"
	case "redis-sentinel":
		var err error
		if u, err = sentinelURL(sd.rest); err != nil {
			return parsedSeed{}, err
		}
	}
	if pu, err := url.Parse(u); err == nil {
		if err := checkURLOptions(pu.Query()); err != nil {
			return parsedSeed{}, err
		}
	}
	opt, err := rueidis.ParseURL(u)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // without `parse "URL": `, which may repeat a password
		}
		msg := strings.TrimPrefix(err.Error(), "redis: ")
		if strings.Contains(msg, "invalid URL scheme") {
			msg += " (want redis://, rediss://, unix://, valkey://, valkeys:// or redis-sentinel://)"
		}
		return parsedSeed{}, errors.New(msg)
	}
	if sd.scheme != "unix" && sd.scheme != "redis-sentinel" {
		// rueidis turns "redis://h:1:2" into the address "[h:1]:6379".
		if pu, err := url.Parse(u); err == nil && strings.Contains(pu.Hostname(), ":") && !strings.HasPrefix(pu.Host, "[") {
			return parsedSeed{}, fmt.Errorf("address %q: more than one ':' (IPv6 addresses go in brackets: [::1]:6379)", pu.Host)
		}
	}
	if sd.scheme == "unix" && (len(opt.InitAddress) == 0 || opt.InitAddress[0] == "") {
		return parsedSeed{}, errors.New("no socket path (unix:///path/to/redis.sock)")
	}
	return parsedSeed{scheme: sd.scheme, opt: opt}, nil
}

// differs names the first setting other than the address in which two
// seeds' options differ, or returns "".
func differs(a, b rueidis.ClientOption) string {
	tls := func(o rueidis.ClientOption) string {
		if o.TLSConfig == nil {
			return "off"
		}
		return fmt.Sprint("on, skip_verify ", o.TLSConfig.InsecureSkipVerify)
	}
	for _, f := range []struct {
		name string
		a, b any
	}{
		{"user", a.Username, b.Username},
		{"password", a.Password, b.Password},
		{"database", a.SelectDB, b.SelectDB},
		{"Sentinel master_set", a.Sentinel.MasterSet, b.Sentinel.MasterSet},
		{"TLS", tls(a), tls(b)},
		{"dial_timeout", a.Dialer.Timeout, b.Dialer.Timeout},
		{"write_timeout", a.ConnWriteTimeout, b.ConnWriteTimeout},
		{"protocol", a.AlwaysRESP2, b.AlwaysRESP2},
		{"client_cache", a.DisableCache, b.DisableCache},
		{"max_retries", a.DisableRetry, b.DisableRetry},
		{"client_name", a.ClientName, b.ClientName},
	} {
		if f.a != f.b {
			return f.name
		}
	}
	return ""
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
