# The two commands a newcomer needs (see README.md):
#   make demo   runs the demo against a real ZooKeeper started for you
#   make test   runs vet and the whole test suite with the race detector
# Extra: make bench compares our mutex with zk.Lock, Curator and kazoo
# (docs/performance.md), make nemesis runs the fault-injection test.
# Each first runs scripts/setup.sh, which installs from Debian packages
# whatever is missing of ZooKeeper and Java (a JDK: testkit/zktest seeds servers
# with a Java source file), PostgreSQL and PgBouncer,
# Redis, and etcd (a server named in the environment needs nothing).

GO ?= go

# -trimpath keeps the checkout's directory out of what the go command
# builds, and so out of its build cache's keys: a clean clone in a new
# directory (as CI makes) reuses what an earlier clone compiled, instead of
# compiling every package of the module again with the race detector (a
# clean clone's make test on 2 idle cores: 480 s with the cache, 499 to
# 560 s without). The tests that build programs inherit it.
export GOFLAGS := -trimpath $(GOFLAGS)

.PHONY: demo test setup bench nemesis pictures kube-apiserver api api-baseline

setup:
	@./scripts/setup.sh

# The Kubernetes backend's tests and nemesis (and zkbench -peers k8s) run a real
# kube-apiserver, built from the Go module proxy once per machine by
# scripts/kube-apiserver.sh (about 4 minutes on 2 cores and ~1 GB of module
# downloads the first time; the ~100 MB binary is cached in
# ~/.cache/zkrecipes, so later runs cost nothing). Not built when
# KUBE_APISERVER names a binary or K8S_TEST_KUBECONFIG a cluster.
kube-apiserver:
	@[ -n "$$KUBE_APISERVER$$K8S_TEST_KUBECONFIG" ] || ./scripts/kube-apiserver.sh >/dev/null

demo: setup
	$(GO) run ./cmd/demo

# The short nemesis run (3 servers, kills, pauses, 2 s sessions) runs on its
# own after the rest, so that it never starves another package's 2 s
# sessions on a 2-core machine. It runs even when the rest failed (one
# report of everything); the target fails if either did. The sequence-limit
# tests run again on ZooKeeper 3.9.3 (Debian 13's, laid out by
# scripts/zk-debian.sh and cached), so that the behaviour at the limit is
# checked on both server lines, and so are the persistent watches of
# package cache and the requests of our own under them (3.9 removes one
# persistent watch, 3.8 cannot): beside the main run, one package at a time
# (their output follows the main run's). They are the zookeeper package's
# and testkit/zktest's own tests, which the main run runs beside the other
# packages anyway: servers started on seeded data, no session expiry and
# no fault, the load of one more package. Their test binaries are built
# first, so that the two go commands do not compile the same packages at
# once.
# The backends, the metrics adapters, the etcd, Redis and SQL fences, the
# heavy test kits, the command line tool, the benchmark, the nemesis and the
# demo are modules of their own (backend/*, metrics/*, resource/fenceetcd,
# resource/fenceredis, resource/fencesql, testkit/nemesis, testkit/pgtest,
# testkit/containers, cmd/*: so that ZooKeeper-only users of the library
# never require the other backends' client libraries, Prometheus,
# OpenTelemetry, SQL drivers, porcupine nor testcontainers; the release test
# checks it): ./... at the root does not reach them, so they are listed
# after it.
BACKENDS := ./backend/etcdlock/... ./backend/pglock/... ./backend/redislock/... ./backend/k8slease/... ./metrics/otelmetrics/... ./metrics/prommetrics/... ./resource/fenceetcd/... ./resource/fenceredis/... ./resource/fencesql/...
TESTKITS := ./testkit/pgtest/... ./testkit/containers/...
COMMANDS := ./cmd/zkrecipes/... ./cmd/zkbench/... ./cmd/nemesis/... ./cmd/demo/...
# The slowest packages (about 1 to 2 minutes each in CI, the longest
# first) first: go test starts packages in the order given (each once), so
# they no longer form the tail of the run while the cores idle.
SLOWEST := ./cmd/zkrecipes ./mutex ./testkit/releasetest ./backend/k8slease ./backend/etcdlock ./zookeeper ./backend/pglock ./backend/redislock ./testkit/zktest ./backend/memlock

#
# No secret in any output: the tests of failure paths give passwords that
# start with TEST_SECRET (e.g. "s3cr3t-zkr-pglock"), and the whole output of
# the run (tee'd to a scratch file) must not hold one anywhere: a password
# that leaked into an error, a log line or a panic fails the target, even
# when the test that leaked it passed.
TEST_SECRET := s3cr3t-zkr-
#
# testkit/nemesis (a module of its own: its short seeded runs under
# faults) runs beside the rest, as the 3.9.3 sequence-limit tests do: alone
# at the end it kept less than half a core busy for a minute, and its runs
# pass with both cores kept busy by other work.
#
# -p 4: four packages at a time on 2 cores. The tests spend much of their
# time waiting (servers starting, sessions and leases expiring): at go
# test's default of one package per core the CPU was busy 46% of the run
# (10 min 12 s of CPU in an 11-minute CI run); at -p 3 it was idle 138 of
# 1034 CPU-s (520 s), at -p 4 71 of 960 (482 s, one run each on a clean
# clone), and the suite's tests pass with both cores kept busy by other
# work.

test: setup kube-apiserver
	$(GO) vet ./... ./testkit/nemesis/... $(BACKENDS) $(TESTKITS) $(COMMANDS)
	out="$$(mktemp -d)"; status=0; \
	{ \
	h="$$(./scripts/zk-debian.sh)" && $(GO) test -race -c -o "$$out/" ./zookeeper/ ./testkit/zktest/ ./cache/ || touch "$$out/failed"; \
	{ [ -n "$$h" ] && ZOOKEEPER_HOME="$$h" $(GO) test -race -count=1 -p 1 -timeout 10m -run 'SequenceLimit|SeqCounters|TestStream|TestLimitsAndClose|TestConformance' ./zookeeper/ ./testkit/zktest/ ./cache/ || touch "$$out/failed"; } >"$$out/zk393" 2>&1 & \
	{ $(GO) test -race -count=1 -timeout 10m ./testkit/nemesis || touch "$$out/failed"; } >"$$out/nemesis" 2>&1 & \
	$(GO) test -race -count=1 -p 4 -timeout 15m $(SLOWEST) $$($(GO) list ./... ./testkit/nemesis/... | grep -v '/testkit/nemesis$$') $(BACKENDS) $(TESTKITS) $(COMMANDS) || touch "$$out/failed"; \
	wait; echo "The sequence-limit, stream and cache tests on ZooKeeper 3.9.3:"; cat "$$out/zk393"; \
	echo "The nemesis (testkit/nemesis), run beside the rest:"; cat "$$out/nemesis"; \
	} 2>&1 | tee "$$out/log"; \
	[ ! -e "$$out/failed" ] || status=1; \
	if grep -q -F -e '$(TEST_SECRET)' "$$out/log"; then \
		echo "make test: FAIL: $$(grep -c -F -e '$(TEST_SECRET)' "$$out/log") line(s) of the test output above hold a test password ($(TEST_SECRET)...): a secret leaked into an error, log line or panic" >&2; \
		status=1; \
	fi; \
	rm -rf "$$out"; exit $$status

# make api reports every incompatible change of a library package's exported
# API against the v0.1.0 baseline in api/v0.1.0/ and fails on one;
# make api-baseline rewrites that baseline from the tree (scripts/api.sh).
api:
	@./scripts/api.sh

api-baseline:
	@./scripts/api.sh write

bench: setup
	$(GO) run ./cmd/zkbench -json zkbench.jsonl

# The long fault-injection run (docs/reliability.md): BACKEND=zk (the
# default: a 3-server ensemble, every ZooKeeper recipe in turn), etcd, pg,
# redis, k8s, or all (one backend after the other, NEMESIS_DURATION each), under
# the nemesis. NEMESIS_DURATION=30m NEMESIS_SEED=7 to vary.
# ZK=debian13 runs ZooKeeper's against Debian 13's ZooKeeper 3.9.3 (scripts/zk-debian.sh)
# instead of Debian 12's 3.8.0, which loses committed writes under these faults.
# Each run's page (timeline, check results, porcupine's views) goes to
# NEMESIS_OUT/run<i>-<recipe>-seed<seed>/index.html (NEMESIS_OUT/<backend>/...
# with BACKEND=all).
BACKEND ?= zk
NEMESIS_DURATION ?= 10m
NEMESIS_SEED ?= 1
NEMESIS_OUT ?= nemesis-out
ZK ?=
nemesis: setup $(if $(filter k8s all,$(BACKEND)),kube-apiserver)
	$(if $(filter debian13,$(ZK)),h="$$(./scripts/zk-debian.sh)" && export ZOOKEEPER_HOME="$$h" &&) $(GO) run -race ./cmd/nemesis -backend $(BACKEND) -duration $(NEMESIS_DURATION) -seed $(NEMESIS_SEED) -out $(NEMESIS_OUT)

# The screenshots of docs/reliability.md: a seeded nemesis run and the broken
# recipe, drawn and checked in headless Chromium (installed from Debian if
# missing), with their captions written from the same runs. They go to a
# scratch directory; UPDATE_DOCS=1 puts them in docs/img and the captions in
# docs/reliability.md. PICTURES_RUN=90s PICTURES_SEED=1 by default.
pictures: setup
	./scripts/pictures.sh
