package redistest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// StartReplicated starts a master and one replica of it, each stopped at the
// end of the test, and returns once the master sees the replica acknowledge
// writes (WAIT 1), so that ReplicaAck 1 works from the first call.
func StartReplicated(t testing.TB) (master, replica *Server) {
	t.Helper()
	master = Start(t, Options{Args: []string{"--repl-diskless-sync-delay", "0"}})
	host, port, _ := strings.Cut(master.Addr(), ":")
	replica = Start(t, Options{Args: []string{"--replicaof", host, port}})
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{master.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatalf("redistest: connect to master %s: %v", master.Addr(), err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if c.Do(ctx, c.B().Set().Key("redistest:probe").Value("1").Build()).Error() == nil {
			n, err := c.Do(ctx, c.B().Wait().Numreplicas(1).Timeout(100).Build()).AsInt64()
			if err == nil && n == 1 {
				return master, replica
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("redistest: replica %s of %s not acknowledging writes", replica.Addr(), master.Addr())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
