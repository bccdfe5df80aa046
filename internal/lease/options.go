package lease

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/leasehold/leasehold/internal/scripts"
)

// Options is session.Options: the same fields in the same order, so that
// each converts to the other. Their meaning and defaults are documented
// there, on the public type.
type Options struct {
	Namespace           string
	TTL                 time.Duration
	Heartbeat           time.Duration
	Owner               string
	LockDelay           time.Duration
	RestartGrace        time.Duration
	DisableRestartGrace bool
	ReplicaAck          int
	ReplicaAckTimeout   time.Duration
	Logger              *slog.Logger
	Metrics             prometheus.Registerer
	Conn                *rueidis.ClientOption
	Shards              int
}

// MaxShards is session.MaxShards.
const MaxShards = scripts.MaxShards

// DefaultRestartGrace is the restart grace of a session whose TTL is no
// longer: one value for every such session, so that sessions of one
// namespace with different TTLs agree on it (see session.Options).
const DefaultRestartGrace = 10 * time.Second

const (
	minTTL = 50 * time.Millisecond
	// MaxDuration bounds TTL, LockDelay and RestartGrace: far beyond any
	// lease a heartbeat keeps, and small enough that what the scripts
	// compute from them (idle and held expiries, 2*TTL + LockDelay, in ms)
	// stays exact, where a TTL of about 146 years overflowed a Duration.
	MaxDuration     = 365 * 24 * time.Hour
	maxNamespaceLen = 128
	// MaxNameLen is the longest resource name accepted, in bytes.
	MaxNameLen = 1024
)

// WithDefaults validates o and fills in defaults. Errors match ErrInvalidOptions.
func (o Options) WithDefaults() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	if o.Namespace == "" {
		o.Namespace = "leasehold"
	}
	if strings.ContainsAny(o.Namespace, "{}") {
		return bad("namespace %q contains '{' or '}'", o.Namespace)
	}
	if len(o.Namespace) > maxNamespaceLen {
		return bad("namespace longer than %d bytes", maxNamespaceLen)
	}
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	if o.TTL < minTTL {
		return bad("TTL %v below the minimum %v", o.TTL, minTTL)
	}
	if o.TTL > MaxDuration {
		return bad("TTL %v above the maximum %v", o.TTL, MaxDuration)
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = o.TTL / 3
	}
	if o.Heartbeat < time.Millisecond || o.Heartbeat > o.TTL/2 {
		return bad("Heartbeat %v must be >= 1ms and <= TTL/2 (%v)", o.Heartbeat, o.TTL/2)
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = host + "/" + strconv.Itoa(os.Getpid())
	}
	if o.LockDelay < 0 || o.LockDelay > MaxDuration || (o.LockDelay > 0 && o.LockDelay < time.Millisecond) {
		// Redis counts in ms: a lock delay under one would be none there
		// and one here (Release past the deadline refuses to release).
		return bad("LockDelay %v: 0, or 1ms..%v", o.LockDelay, MaxDuration)
	}
	return o.withRest()
}

// withRest is the second half of WithDefaults: the restart grace, the
// replica acknowledgements and the shards.
func (o Options) withRest() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	if o.RestartGrace < 0 || o.RestartGrace > MaxDuration {
		return bad("RestartGrace %v outside 0..%v", o.RestartGrace, MaxDuration)
	}
	if o.DisableRestartGrace {
		return bad("DisableRestartGrace cannot be made safe: a data loss it did not wait out would let a session be granted " +
			"what another still holds; mark a brand-new test or example namespace intact instead (leaseholdtest.MarkIntact)")
	}
	if o.RestartGrace == 0 {
		o.RestartGrace = max(o.TTL, DefaultRestartGrace)
	}
	if o.RestartGrace < o.TTL {
		return bad("RestartGrace %v shorter than the TTL %v would let a grant overlap an unreclaimed hold", o.RestartGrace, o.TTL)
	}
	if o.ReplicaAck < 0 {
		return bad("negative ReplicaAck %d", o.ReplicaAck)
	}
	if o.ReplicaAckTimeout < 0 {
		return bad("negative ReplicaAckTimeout %v", o.ReplicaAckTimeout)
	}
	if o.ReplicaAckTimeout == 0 {
		o.ReplicaAckTimeout = o.Heartbeat
	}
	if o.ReplicaAckTimeout > o.TTL/2 {
		return bad("ReplicaAckTimeout %v above TTL/2", o.ReplicaAckTimeout)
	}
	if o.ReplicaAck > 0 && o.ReplicaAckTimeout < time.Millisecond {
		// WAIT counts in ms, and WAIT n 0 waits for ever.
		return bad("ReplicaAckTimeout %v below 1ms", o.ReplicaAckTimeout)
	}
	if o.Shards < 0 || o.Shards > MaxShards {
		return bad("Shards %d outside 0..%d", o.Shards, MaxShards)
	}
	if o.Shards == 0 {
		o.Shards = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o, nil
}

// Log returns o.Logger, or a logger that discards when it is nil.
func (o Options) Log() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o.Logger
}
