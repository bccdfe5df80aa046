package lease

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

func TestOlderThan(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
	}{
		{"6.2.14", true}, {"6", true}, {"6.9.99", true},
		{"7.0.0", false}, {"7.0.15", false}, {"7", false}, {"7.2.4", false}, {"8.0.1", false}, {"10.0.0", false},
		{"7.0.0-rc1", false}, {"unknown", false}, {"", false},
	} {
		if got := olderThan(c.v, MinRedis); got != c.want {
			t.Errorf("olderThan(%q, %q) = %v, want %v", c.v, MinRedis, got, c.want)
		}
	}
}

// TestOldRedisRefused: New refuses a server whose HELLO reports a version
// older than MinRedis, naming both versions, with an error matching
// ErrUnsupportedRedis and ErrRedisRefused, before it writes anything. The
// server is a stand-in speaking just enough RESP3 for rueidis' handshake
// (no Redis 6 is installed here).
func TestOldRedisRefused(t *testing.T) {
	addr, cmds := fakeRedis(t, "6.2.14")
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := New(ctx, c, Options{Namespace: "old"})
	if err == nil {
		s.Close()
		t.Fatal("New on Redis 6.2.14 succeeded")
	}
	if !errors.Is(err, ErrUnsupportedRedis) || !errors.Is(err, ErrRedisRefused) {
		t.Fatalf("New on Redis 6.2.14: %v; want ErrUnsupportedRedis and ErrRedisRefused", err)
	}
	if !strings.Contains(err.Error(), "6.2.14") || !strings.Contains(err.Error(), MinRedis) {
		t.Errorf("the error does not name both versions: %v", err)
	}
	for _, cmd := range cmds() {
		if !strings.HasPrefix(cmd, "HELLO") && !strings.HasPrefix(cmd, "CLIENT") && !strings.HasPrefix(cmd, "CLUSTER") {
			t.Errorf("New sent %q to a server it refuses", cmd)
		}
	}
}

// fakeRedis serves HELLO (reporting version), CLIENT and CLUSTER (as a
// standalone server does) in RESP3, refusing everything else, and records the commands it got.
func fakeRedis(t *testing.T, version string) (addr string, cmds func() []string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			cn, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { cn.Close() })
			wg.Go(func() {
				r := bufio.NewReader(cn)
				for {
					args, err := readCommand(r)
					if err != nil {
						return
					}
					cmd := strings.ToUpper(strings.Join(args, " "))
					mu.Lock()
					got = append(got, cmd)
					mu.Unlock()
					var reply string
					switch {
					case strings.HasPrefix(cmd, "HELLO"):
						reply = fmt.Sprintf("%%3\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$%d\r\n%s\r\n$5\r\nproto\r\n:3\r\n", len(version), version)
					case strings.HasPrefix(cmd, "CLIENT"):
						reply = "+OK\r\n"
					case strings.HasPrefix(cmd, "CLUSTER"):
						reply = "-ERR This instance has cluster support disabled\r\n" // rueidis' probe
					default:
						reply = "-ERR unexpected\r\n"
					}
					if _, err := cn.Write([]byte(reply)); err != nil {
						return
					}
				}
			})
		}
	})
	return l.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		if _, err := r.ReadString('\n'); err != nil { // $len
			return nil, err
		}
		v, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		args[i] = strings.TrimSuffix(v, "\r\n")
	}
	return args, nil
}
