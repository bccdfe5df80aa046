# bench.mk: `make bench` runs leasehold's benchmarks (bench/, a Go module of
# its own) against a redis-server they start on a free loopback port.
# Included from the top-level Makefile, which defines GO and redis-server.
#
#   make bench                      full run, about 11 minutes
#   make bench BENCH_FLAGS=-quick   quick run, about 2 minutes
#   make bench BENCH_FLAGS='-scenarios contended -rounds 9'
#   make bench BENCH_FLAGS='-quick -scenarios cluster'
#
# The cluster scenario (3-master Redis Cluster, issue 30) is part of the
# default set: about 70 s of the full run, 12 s of the quick one.
#   make bench-micro                only the testing.B micro-benchmarks
#
# The comparison table goes to stdout and bench/results/latest.md (data in
# latest.json); the micro-benchmarks to bench/results/micro.txt. A missed
# target does not fail the run; a harness error does.

GO ?= go
BENCH_FLAGS ?=
# Micro-benchmark time per benchmark: shorter in quick mode.
BENCH_MICRO ?= $(if $(findstring -quick,$(BENCH_FLAGS)),-benchtime=150ms,-benchtime=1s)

.PHONY: bench bench-micro

define bench_micro
	@mkdir -p bench/results
	cd bench && $(GO) test -mod=mod -run '^$$' -bench . $(BENCH_MICRO) -count 1 . > results/micro.txt 2>&1; \
		status=$$?; cat results/micro.txt; exit $$status
endef

bench: redis-server
	cd bench && $(GO) run -mod=mod . $(BENCH_FLAGS)
	$(bench_micro)

bench-micro: redis-server
	$(bench_micro)
