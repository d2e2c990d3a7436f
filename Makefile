# The two commands a newcomer needs (see README.md):
#   make demo   runs the demo against a real ZooKeeper started for you
#   make test   runs vet and the whole test suite with the race detector
# Both install ZooKeeper and Java from Debian packages first if they are missing.

GO ?= go

.PHONY: demo test setup

setup:
	@./scripts/setup.sh

demo: setup
	$(GO) run ./cmd/demo

test: setup
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 15m ./...
