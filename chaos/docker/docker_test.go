package docker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	mnet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/chaos"
	"github.com/leasehold/leasehold/internal/redistest"
)

func TestMain(m *testing.M) {
	// Ryuk's image cannot be pulled here; the tests remove what they start.
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	goleak.VerifyTestMain(m, append(redistest.LeakOptions,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)...)
}

// TestHelperProcess is the body of the holder processes.
func TestHelperProcess(t *testing.T) { chaos.HelperProcess(t) }

const image = "leasehold-chaos-redis:local"

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// buildContext writes a Docker build context for a FROM scratch image with
// the host's redis-server and every library ldd lists for it. There is no
// "# syntax=" line: BuildKit would try to pull the frontend.
func buildContext() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server not found on PATH: %w", err)
	}
	bin, _ = filepath.EvalSymlinks(bin)
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return "", fmt.Errorf("ldd %s: %w", bin, err)
	}
	files := []string{bin}
	for _, line := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "/") {
				files = append(files, f)
			}
		}
	}
	dir, err := os.MkdirTemp("", "leasehold-redis-image-")
	if err != nil {
		return "", err
	}
	for _, f := range files {
		b, err := os.ReadFile(f) // follows symlinks: the image gets the files
		if err != nil {
			return "", err
		}
		dst := filepath.Join(dir, "rootfs", f)
		if bin == f {
			dst = filepath.Join(dir, "rootfs", "redis-server")
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			return "", err
		}
	}
	df := "FROM scratch\nCOPY rootfs/ /\nENTRYPOINT [\"/redis-server\"]\n"
	return dir, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644)
}

// redisC is a Redis container on its own network, published on a fixed
// loopback port so that it keeps its address across network reconnects.
type redisC struct {
	c    testcontainers.Container
	cli  *testcontainers.DockerClient
	net  *testcontainers.DockerNetwork
	addr string
}

func startRedis(t *testing.T) *redisC {
	t.Helper()
	testcontainers.SkipIfProviderIsNotHealthy(t)
	buildOnce.Do(func() { buildDir, buildErr = buildContext() })
	if buildErr != nil {
		t.Fatalf("build context: %v", buildErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nw, err := network.New(ctx)
	if err != nil {
		t.Fatalf("network: %v", err)
	}
	testcontainers.CleanupNetwork(t, nw)
	port := freePort(t)
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			FromDockerfile: testcontainers.FromDockerfile{Context: buildDir, Repo: "leasehold-chaos-redis", Tag: "local", KeepImage: true},
			ExposedPorts:   []string{"6379/tcp"},
			Cmd:            []string{"--protected-mode", "no", "--save", "", "--appendonly", "no"},
			Networks:       []string{nw.Name},
			WaitingFor:     wait.ForLog("Ready to accept connections").WithStartupTimeout(time.Minute),
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.PortBindings = mnet.PortMap{mnet.MustParsePort("6379/tcp"): {{
					HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(port)}}}
			},
		},
		Started: true,
	})
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatalf("start redis container: %v", err)
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	r := &redisC{c: c, cli: cli, net: nw, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	r.waitPing(t, 10*time.Second)
	return r
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (r *redisC) waitPing(t testing.TB, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", r.addr, 200*time.Millisecond)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
			_, _ = c.Write([]byte("PING\r\n"))
			b := make([]byte, 7)
			n, _ := c.Read(b)
			c.Close()
			if string(b[:n]) == "+PONG\r\n" {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("redis container at %s does not answer PING", r.addr)
}

func (r *redisC) pause(t testing.TB, on bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if on {
		_, err = r.cli.ContainerPause(ctx, r.c.GetContainerID(), client.ContainerPauseOptions{})
	} else {
		_, err = r.cli.ContainerUnpause(ctx, r.c.GetContainerID(), client.ContainerUnpauseOptions{})
	}
	if err != nil {
		t.Fatalf("pause %v: %v", on, err)
	}
}

func (r *redisC) connect(t testing.TB, on bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if on {
		_, err = r.cli.NetworkConnect(ctx, r.net.ID, client.NetworkConnectOptions{Container: r.c.GetContainerID()})
	} else {
		_, err = r.cli.NetworkDisconnect(ctx, r.net.ID, client.NetworkDisconnectOptions{Container: r.c.GetContainerID()})
	}
	if err != nil {
		t.Fatalf("network connect %v: %v", on, err)
	}
}

func setup(e *chaos.Env) {
	t := e.T.(*testing.T)
	r := startRedis(t)
	e.Addrs = []string{r.addr}
	e.Data = r
}

// TestDocker runs the Docker tier and prints its summary table.
func TestDocker(t *testing.T) {
	testcontainers.SkipIfProviderIsNotHealthy(t)
	var res chaos.Results
	t.Cleanup(func() { t.Logf("docker chaos summary (master seed %d):\n%s", chaos.Seed, res.Table()) })
	for _, sc := range []chaos.Scenario{
		{
			Name: "docker-pause", About: "docker pause of the Redis container for 0.3-2.5 TTL",
			Backend: chaos.External, Duration: 20 * time.Second, Setup: setup,
			Nemesis: func(e *chaos.Env) {
				r := e.Data.(*redisC)
				for e.Sleep(e.Between(time.Second, 2*time.Second)) {
					d := e.Between(300*time.Millisecond, 2500*time.Millisecond)
					e.Fault("container-pause", "docker pause for %v", d.Round(time.Millisecond))
					r.pause(e.T, true)
					time.Sleep(d)
					r.pause(e.T, false)
					e.Heal("docker unpause")
				}
			},
		},
		{
			Name: "docker-disconnect", About: "disconnect the Redis container from its network for 0.3-2.5 TTL",
			Backend: chaos.External, Duration: 20 * time.Second, Setup: setup,
			Nemesis: func(e *chaos.Env) {
				r := e.Data.(*redisC)
				for e.Sleep(e.Between(time.Second, 2*time.Second)) {
					d := e.Between(300*time.Millisecond, 2500*time.Millisecond)
					e.Fault("network-disconnect", "docker network disconnect for %v", d.Round(time.Millisecond))
					r.connect(e.T, false)
					time.Sleep(d)
					r.connect(e.T, true)
					r.waitPing(e.T, 10*time.Second)
					e.Heal("docker network connect")
				}
			},
		},
	} {
		t.Run(sc.Name, func(t *testing.T) { res.Add(chaos.Run(t, sc)) })
	}
}
