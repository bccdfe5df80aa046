package flight

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/internal/promreg"
)

// metrics are the Prometheus collectors of the groups sharing one
// Registerer, with the group's name as label. Every method is a no-op on a
// nil *metrics (Options.Metrics nil).
type metrics struct {
	group        string
	computations *prometheus.CounterVec // group, outcome: stored, failed, discarded, unstored
	waits        *prometheus.CounterVec // group
	hits         *prometheus.CounterVec // group
	stale        *prometheus.CounterVec // group
}

func newMetrics(reg prometheus.Registerer, group string) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		group: group,
		computations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_flight_computations_total",
			Help: "Computations run by this process, by group and outcome (stored, failed, discarded, unstored).",
		}, []string{"group", "outcome"}),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_flight_waits_total",
			Help: "Calls served by another caller's computation after waiting for it, by group.",
		}, []string{"group"}),
		hits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_flight_cache_hits_total",
			Help: "Calls served at once from a fresh cached outcome, by group.",
		}, []string{"group"}),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_flight_stale_serves_total",
			Help: "Calls served a stale value while another caller recomputes it (ServeStale), by group.",
		}, []string{"group"}),
	}
	var err error
	m.computations = promreg.Register(reg, m.computations, &err)
	m.waits = promreg.Register(reg, m.waits, &err)
	m.hits = promreg.Register(reg, m.hits, &err)
	m.stale = promreg.Register(reg, m.stale, &err)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) computed(outcome string) {
	if m != nil {
		m.computations.WithLabelValues(m.group, outcome).Inc()
	}
}

func (m *metrics) waited() {
	if m != nil {
		m.waits.WithLabelValues(m.group).Inc()
	}
}

func (m *metrics) hit() {
	if m != nil {
		m.hits.WithLabelValues(m.group).Inc()
	}
}

func (m *metrics) staleServe() {
	if m != nil {
		m.stale.WithLabelValues(m.group).Inc()
	}
}
