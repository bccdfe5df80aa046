package lease

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/internal/promreg"
)

// metrics are the Prometheus collectors of the sessions sharing one
// Registerer. Every method is a no-op on a nil *metrics (Options.Metrics nil).
type metrics struct {
	sessions     *prometheus.GaugeVec     // state: alive
	ended        *prometheus.CounterVec   // cause: closed, lease_lost
	heartbeats   *prometheus.CounterVec   // result: ok, error, lease_gone
	beatLatency  prometheus.Histogram     // heartbeat round trip
	deadlineLeft *prometheus.GaugeVec     // session: seconds left at the last confirmation
	holds        *prometheus.GaugeVec     // kind
	acquireWait  *prometheus.HistogramVec // kind
	handoffs     *prometheus.CounterVec   // kind
	lost         *prometheus.CounterVec   // kind, cause: EndReason's (lease_lost, revoked, keys_expired, not_reclaimed, failover)
	reclaims     *prometheus.CounterVec   // result: reclaimed, lost (holds)
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leasehold_sessions", Help: "Sessions by state.",
		}, []string{"state"}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_sessions_ended_total", Help: "Sessions ended, by cause.",
		}, []string{"cause"}),
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_heartbeats_total", Help: "Heartbeat attempts by result.",
		}, []string{"result"}),
		beatLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "leasehold_heartbeat_duration_seconds", Help: "Heartbeat round-trip time.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		deadlineLeft: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leasehold_lease_deadline_remaining_seconds",
			Help: "Time left to the local lease deadline right after the last confirmed heartbeat.",
		}, []string{"session"}),
		holds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leasehold_holds", Help: "Holds currently held, by kind.",
		}, []string{"kind"}),
		acquireWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "leasehold_acquire_wait_seconds", Help: "Time from an acquire call to its grant, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12),
		}, []string{"kind"}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_handoffs_total", Help: "Grants handed over by a releasing script to a waiter, by kind.",
		}, []string{"kind"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_holds_lost_total", Help: "Holds that ended without Release, by kind and cause.",
		}, []string{"kind", "cause"}),
		reclaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_reclaimed_holds_total",
			Help: "Holds recreated (reclaimed) or not (lost) after Redis lost its data.",
		}, []string{"result"}),
	}
	// Sessions sharing a registry share the collectors.
	var err error
	m.sessions = promreg.Register(reg, m.sessions, &err)
	m.ended = promreg.Register(reg, m.ended, &err)
	m.heartbeats = promreg.Register(reg, m.heartbeats, &err)
	m.beatLatency = promreg.Register(reg, m.beatLatency, &err)
	m.deadlineLeft = promreg.Register(reg, m.deadlineLeft, &err)
	m.holds = promreg.Register(reg, m.holds, &err)
	m.acquireWait = promreg.Register(reg, m.acquireWait, &err)
	m.handoffs = promreg.Register(reg, m.handoffs, &err)
	m.lost = promreg.Register(reg, m.lost, &err)
	m.reclaims = promreg.Register(reg, m.reclaims, &err)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) sessionOpened() {
	if m != nil {
		m.sessions.WithLabelValues("alive").Inc()
	}
}

func (m *metrics) sessionEnded(id string, cause error) {
	if m == nil {
		return
	}
	m.sessions.WithLabelValues("alive").Dec()
	c := "closed"
	if errors.Is(cause, ErrLost) {
		c = "lease_lost"
	}
	m.ended.WithLabelValues(c).Inc()
	m.deadlineLeft.DeleteLabelValues(id)
}

func (m *metrics) heartbeat(result string, rtt time.Duration) {
	if m == nil {
		return
	}
	m.heartbeats.WithLabelValues(result).Inc()
	if result == "ok" {
		m.beatLatency.Observe(rtt.Seconds())
	}
}

func (m *metrics) deadline(id string, left time.Duration) {
	if m != nil {
		m.deadlineLeft.WithLabelValues(id).Set(left.Seconds())
	}
}

func (m *metrics) holdGranted(kind string, waited time.Duration, handoff bool) {
	if m == nil {
		return
	}
	m.holds.WithLabelValues(kind).Inc()
	m.acquireWait.WithLabelValues(kind).Observe(waited.Seconds())
	if handoff {
		m.handoffs.WithLabelValues(kind).Inc()
	}
}

func (m *metrics) holdEnded(kind string, cause error) {
	if m == nil {
		return
	}
	m.holds.WithLabelValues(kind).Dec()
	if errors.Is(cause, ErrLost) {
		m.lost.WithLabelValues(kind, EndReason(cause)).Inc()
	}
}

func (m *metrics) reclaimed(kept, lost int) {
	if m != nil {
		m.reclaims.WithLabelValues("reclaimed").Add(float64(kept))
		m.reclaims.WithLabelValues("lost").Add(float64(lost))
	}
}
