# The two commands a newcomer needs (see README.md):
#   make demo   runs the demo against a real ZooKeeper started for you
#   make test   runs vet and the whole test suite with the race detector
#   make bench  compares our mutex with zk.Lock, Curator and kazoo (docs/performance.md)
# Both install ZooKeeper and Java from Debian packages first if they are missing.

GO ?= go

.PHONY: demo test setup bench

setup:
	@./scripts/setup.sh

demo: setup
	$(GO) run ./cmd/demo

test: setup
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 15m ./...

bench: setup
	$(GO) run ./cmd/zkbench -json zkbench.jsonl
