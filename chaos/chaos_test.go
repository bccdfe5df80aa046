package chaos

import (
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.LeakOptions...) }

// TestHelperProcess is the body of the holder processes the scenarios start.
func TestHelperProcess(t *testing.T) { HelperProcess(t) }

// gated skips long scenarios unless LEASEHOLD_CHAOS=1 (make chaos sets it).
func gated(t *testing.T) {
	t.Helper()
	if os.Getenv("LEASEHOLD_CHAOS") != "1" {
		t.Skip("long chaos scenario: set LEASEHOLD_CHAOS=1 (make chaos)")
	}
}

// TestSmoke is the quick scenario every `go test ./...` runs: 8 holder
// processes on all five primitives through fault proxies, with a latency
// spike, connection resets and a short Redis SIGSTOP.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	Run(t, Scenario{
		Name: "smoke", About: "latency, resets and a short SIGSTOP of Redis", Backend: Plain, Proxies: true,
		Duration: 4 * time.Second,
		Nemesis: func(e *Env) {
			e.Sleep(500 * time.Millisecond)
			ps := e.Pick(3)
			e.Fault("latency", "%s: +150ms each way for 700ms", procNames(ps))
			for _, p := range ps {
				p.Proxy.Latency(150 * time.Millisecond)
			}
			time.Sleep(700 * time.Millisecond)
			for _, p := range ps {
				p.Proxy.Latency(0)
			}
			e.Heal("latency back to normal")
			e.Sleep(500 * time.Millisecond)
			n := 0
			for _, p := range e.Procs {
				n += p.Proxy.Reset()
			}
			e.Fault("reset", "all: %d connections reset", n)
			e.Heal("reset done")
			e.Sleep(700 * time.Millisecond)
			e.Fault("redis-stop", "redis SIGSTOP for 300ms")
			e.Redis.Stop()
			time.Sleep(300 * time.Millisecond)
			e.Redis.Cont()
			e.Heal("redis SIGCONT")
		},
	})
}
