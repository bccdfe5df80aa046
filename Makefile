# leasehold — make test installs what the tests need, then runs them all
# against real redis-server processes started on free loopback ports.

GO ?= go
# The oldest Go release the module supports: the go line of go.mod. CI also
# runs the tests with it (make test-oldest); the go command fetches that
# toolchain through the module proxy.
GO_OLDEST ?= go$(shell sed -n 's/^go //p' go.mod)

.PHONY: test test-oldest lint redis-server postgresql

# chaos/ is a module of its own (a test suite, not library API); without
# LEASEHOLD_CHAOS its tests are the quick smoke scenario and the checker's.
# bench/ is one too: its tests check the report against golden files, and
# each micro-benchmark runs once (-benchtime 1x), so that one whose script
# contract changed fails here rather than in make bench.
test: redis-server postgresql
	$(GO) test -race -count=1 ./...
	cd chaos && $(GO) test -race -count=1 ./...
	cd bench && $(GO) test -race -count=1 -bench . -benchtime 1x ./...

# test-oldest runs the tests with the oldest supported toolchain, without
# -race to keep CI time down: it proves that go.mod's go line is enough.
test-oldest: redis-server postgresql
	GOTOOLCHAIN=$(GO_OLDEST) $(GO) vet ./...
	GOTOOLCHAIN=$(GO_OLDEST) $(GO) test -count=1 ./...

# gocyclo walks the whole tree, chaos/ included: no function of the library,
# the CLI or the chaos suite above cyclomatic complexity 20 (tests aside).
GOCYCLO ?= $(GO) run github.com/fzipp/gocyclo/cmd/gocyclo@v0.6.0

lint:
	$(GO) vet ./...
	cd chaos && $(GO) vet ./...
	cd bench && $(GO) vet ./...
	$(GO) run ./internal/tools/apicheck ./...
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GOCYCLO) -over 20 -ignore '_test\.go$$' .

# redis-server comes from Debian's package when it is missing.
redis-server:
	@if ! command -v redis-server >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing redis-server with apt-get"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
		else \
			echo "redis-server is missing: install it (sudo apt-get install redis-server) and run make test again"; exit 1; \
		fi; \
	fi
	@redis-server --version

# postgresql (initdb, postgres) too, for fence.Guard's tests; Debian keeps
# the binaries in /usr/lib/postgresql/<version>/bin, off PATH, where
# internal/pgtest looks for them.
postgresql:
	@if ! ls /usr/lib/postgresql/*/bin/initdb /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && \
		! command -v initdb >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing postgresql with apt-get"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
		else \
			echo "postgresql is missing: install it (sudo apt-get install postgresql) and run make test again"; exit 1; \
		fi; \
	fi
	@ls -d /usr/lib/postgresql/*/bin 2>/dev/null || command -v initdb

include cmd/leasehold/demo.mk
include bench/bench.mk
include chaos/chaos.mk
