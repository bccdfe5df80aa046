package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// The fenced store is a separate redis-server that no nemesis touches: the
// resource that holders protect with their locks. Every operation carries the
// holder's fencing token; the store accepts it only when the token is at
// least the highest it has seen for that resource (reads too, so that a
// holder's read-modify-write cannot interleave with a newer holder's), and
// logs every operation, accepted or not, in its own order.
const storeLog = "st:log"

// fencedScript: KEYS[1] st:<kind>/<resource> (hash: hi, v)  KEYS[2] log list
// ARGV[1] op r|w  ARGV[2] token  ARGV[3] hold id  ARGV[4] send time  ARGV[5]
// key  ARGV[6] value to write. Returns {1, value} when accepted, {0, hi} not.
var fencedScript = rueidis.NewLuaScript(`
local hi = tonumber(redis.call('HGET', KEYS[1], 'hi') or '0')
local tok = tonumber(ARGV[2])
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
local ok = 0
if tok >= hi then
  ok = 1
  if tok > hi then
    redis.call('HSET', KEYS[1], 'hi', ARGV[2])
  end
  if ARGV[1] == 'w' then
    v = tonumber(ARGV[6])
    redis.call('HSET', KEYS[1], 'v', ARGV[6])
  end
end
redis.call('RPUSH', KEYS[2], ARGV[5] .. '|' .. ARGV[1] .. '|' .. ARGV[2] .. '|' .. ARGV[3] .. '|' .. ARGV[4] .. '|' .. ok .. '|' .. string.format('%d', v))
if ok == 1 then
  return {1, v}
end
return {0, hi}
`)

// readStore returns the store's log.
func readStore(t testing.TB, addr string) []Op {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatalf("chaos: store: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lines, err := c.Do(ctx, c.B().Lrange().Key(storeLog).Start(0).Stop(-1).Build()).AsStrSlice()
	if err != nil {
		t.Fatalf("chaos: read the store log: %v", err)
	}
	ops := make([]Op, 0, len(lines))
	for _, l := range lines {
		op, err := parseOp(l)
		if err != nil {
			t.Fatalf("chaos: store log line %q: %v", l, err)
		}
		ops = append(ops, op)
	}
	return ops
}

func parseOp(l string) (Op, error) {
	f := strings.Split(l, "|")
	if len(f) != 7 {
		return Op{}, fmt.Errorf("%d fields", len(f))
	}
	var op Op
	var err error
	op.Key, op.Op, op.Hold = f[0], f[1], f[3]
	if op.Token, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return op, err
	}
	if op.Sent, err = strconv.ParseInt(f[4], 10, 64); err != nil {
		return op, err
	}
	op.Accepted = f[5] == "1"
	op.Value, err = strconv.ParseInt(f[6], 10, 64)
	return op, err
}
