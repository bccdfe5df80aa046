package lease

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// MinRedis is the oldest Redis version leasehold supports: the read-only
// calls (Holder, Stats, Leader, observers, the CLI's status) run their
// scripts with EVALSHA_RO, which Redis 7.0 brought.
const MinRedis = "7.0.0"

// checkVersion refuses a Redis older than MinRedis, by the version its
// HELLO reports (an ACL user needs HELLO anyway: rueidis sends it on every
// connection). A server that does not answer a HELLO without arguments,
// such as an emulator, or whose reply names no version, is not refused:
// its version is unknown, and scripts it cannot run fail as they come.
func checkVersion(ctx context.Context, c rueidis.Client) error {
	m, err := c.Do(ctx, c.B().Hello().Build()).AsMap()
	if err != nil {
		return nil
	}
	ver := m["version"]
	v, err := ver.ToString()
	if err != nil || !olderThan(v, MinRedis) {
		return nil
	}
	return fmt.Errorf("%w: Redis %s answers at %v, and leasehold needs Redis %s or later (%w)",
		ErrUnsupportedRedis, v, addrs(c), MinRedis, ErrRedisRefused)
}

// addrs names the nodes of c, for a message.
func addrs(c rueidis.Client) string {
	var out []string
	for a := range c.Nodes() {
		out = append(out, a)
	}
	return strings.Join(out, ", ")
}

// olderThan reports whether version v ("major.minor.patch", any part
// missing read as 0) is older than min; a part that is not a number ends
// the comparison, as equal.
func olderThan(v, min string) bool {
	vs, ms := strings.Split(v, "."), strings.Split(min, ".")
	for i := range ms {
		m, err := strconv.Atoi(ms[i])
		if err != nil {
			return false
		}
		n := 0
		if i < len(vs) {
			if n, err = strconv.Atoi(vs[i]); err != nil {
				return false
			}
		}
		if n != m {
			return n < m
		}
	}
	return false
}
