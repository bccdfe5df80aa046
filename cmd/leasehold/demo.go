package main

import (
	"context"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/demo"
)

const demoAbout = `Plays a short scripted story (about 10 seconds) with simulated nodes, each its
own session on its own connection: leader election with failover when the
leader crashes, bounded concurrency with a semaphore, shard assignment from a
pool, and Redis outages shorter and longer than the lease TTL (1s). A checker
records every hold and reports at the end whether any two holders of one
resource overlapped.

Without --redis it starts an embedded in-process Redis (miniredis), whatever
$LEASEHOLD_REDIS says. With --redis it plays on that server, in a fresh
namespace "leasehold-demo-<random>" whose keys it deletes at the end (unless
--namespace names one, which should be unused; its keys are kept). Outages and
crashes are simulated between the nodes and Redis; the server is not touched.
`

func cmdDemo(ctx context.Context, g *globals, args []string, stdout io.Writer) error {
	c := newCommand(g, "demo", "demo [--redis URL] [--namespace NS]", demoAbout)
	c.fs.Lookup("redis").Usage = "play on the Redis at `URL` (default: an embedded in-process Redis)"
	c.fs.Lookup("namespace").Usage = "play in `namespace` (default: a fresh one)"
	pos, _, hasCmd, err := c.parse(args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 || hasCmd {
		return c.usageErr("unexpected arguments")
	}
	cfg := demo.Config{Out: stdout}
	if g.nsSet {
		if err := g.check(); err != nil {
			return err
		}
		cfg.Namespace = g.namespace
	}
	if g.redisSet {
		opt, err := clientOption(g.redis...)
		if err == nil {
			err = g.tls.apply(&opt)
		}
		if err != nil {
			return err
		}
		cfg.Redis, cfg.Where = &opt, strings.Join(g.redis, ",")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	sum, err := demo.Run(ctx, cfg)
	if err != nil {
		return fail(exitError, "demo: %v", err)
	}
	if sum.Overlaps > 0 || sum.TokenErrors > 0 {
		return fail(exitError, "demo: the checker found %d overlaps and %d tokens out of order", sum.Overlaps, sum.TokenErrors)
	}
	return nil
}
