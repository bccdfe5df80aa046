# leasehold demo: include from the top-level Makefile, after its first target
# (so that it does not become the default goal):
#
#   include cmd/leasehold/demo.mk
#
# `make demo` plays the scripted story on an embedded in-process Redis in about
# 10 seconds; `make demo DEMO_ARGS="--redis redis://127.0.0.1:6379"` plays it on
# a real server (in a fresh namespace whose keys it deletes at the end).

GO ?= go
DEMO_ARGS ?=

.PHONY: demo

demo:
	$(GO) run ./cmd/leasehold demo $(DEMO_ARGS)
