# leasecached: the two set-up commands are `make run` and `make test` (see README.md).

GO       ?= go
BIN      := bin/leasecached
# The load tool and benchmark harness: a Go module of its own, so that `go test ./...` here builds none of it.
BENCH_MOD := tools/bench
PORT     ?= 11211
ARGS     ?=
# apt-get needs root; use sudo when we are not root and sudo exists.
SUDO     := $(if $(filter 0,$(shell id -u)),,sudo)
# Debian packages the tests talk to: the real memcached (differential tests) and twemproxy
# (nutcracker: clientlib's ketama placement must agree with it); the other languages' memcached
# clients and libmemcached's tools (integration/clients_test.go, integration/clients_tools_test.go), with
# the binary-protocol ones (ruby-dalli, python3-pylibmc: integration/clients_binary_test.go); openssl
# (s_client, the TLS tests: integration/tls_test.go); Cyrus SASL's saslpasswd2 and sasldb plugin, which
# memcached -S authenticates with (sasl2-bin, libsasl2-modules-db: integration/differential_binary_sasl_test.go,
# integration/clients_binary_test.go); systemd's systemd-analyze, which checks deploy/leasecached.service
# (deploy/deploy_test.go); prometheus, for promtool, which checks a scrape of --metrics-listen
# (integration/metrics_test.go); buildah, which builds deploy/Containerfile's image without a daemon
# (deploy/image_test.go); e2fsprogs and mount, which the machine-reboot test makes and mounts an ext4
# image with (integration/restart_reboot_test.go), and xfsprogs and btrfs-progs, with which a data
# directory is filled to the last block on XFS and btrfs (slab/backing_linux_test.go, TestBackingFullDisk).
TEST_DEPS := memcached nutcracker \
	python3-pymemcache python3-memcache libcache-memcached-perl libcache-memcached-fast-perl \
	php-cli php-memcached libmemcached-tools nodejs npm openssl \
	ruby ruby-dalli python3-pylibmc sasl2-bin libsasl2-modules-db systemd prometheus buildah \
	e2fsprogs xfsprogs btrfs-progs mount

.PHONY: all build run test test-deps vet fmt-check unit fuzz-smoke bench clean static image

all: build

build:
	$(GO) build -o $(BIN) ./cmd/leasecached

## static: the daemon as one static binary (no cgo: no libc, no dynamic loader; build paths trimmed), to copy
## to a host (deploy/leasecached.service) or into a container image (deploy/Containerfile).
STATIC_BIN ?= bin/static/leasecached
static:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(STATIC_BIN) ./cmd/leasecached

## image: the container image of deploy/Containerfile, from the static binary alone, built by the first of
## podman, buildah (neither needs a daemon) and docker found; CONTAINER=... picks one, and CONTAINER_FLAGS go
## before its build command (deploy/image_test.go gives buildah a storage of its own).
CONTAINER       ?= $(shell command -v podman || command -v buildah || command -v docker)
CONTAINER_FLAGS ?=
IMAGE           ?= leasecached
image: static
	$(CONTAINER) $(CONTAINER_FLAGS) build -f deploy/Containerfile -t $(IMAGE) $(dir $(STATIC_BIN))

## run: build and start the server on port $(PORT) (127.0.0.1, 64 MB, one event loop per CPU).
run: build
	./$(BIN) -p $(PORT) $(ARGS)

## test: install what the tests need, then vet, format check, the gnet fork check, and every test with the race
## detector; then the crash images taken between the writes of a change, which need the crashsteps build tag
## (shard/crashstep_on.go). go test runs packages in the order named, two at a time on two CPUs: the two
## longest first (integration 600-670 s, shard 200 s), so that the others run beside them, not before. The
## timeout stops a hung package before the whole run passes 15 minutes.
test: test-deps fmt-check vet check-fork
	$(GO) test -race -count=1 -timeout 800s ./integration/ ./shard/ ./...
	$(GO) test -race -count=1 -tags crashsteps -run Step ./shard
	cd $(BENCH_MOD) && $(GO) test -race -count=1 -short -timeout 300s ./...

test-deps:
	@missing=""; for p in $(TEST_DEPS); do \
		command -v $$p >/dev/null 2>&1 || [ -x /usr/sbin/$$p ] || [ -x /usr/bin/$$p ] || \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing test dependencies:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@[ -d integration/clients/node/node_modules/memcached ] && [ -d integration/clients/node/node_modules/memjs ] || \
		(cd integration/clients/node && npm ci --no-audit --no-fund)

vet:
	$(GO) vet ./...
	$(GO) vet -tags crashsteps ./shard
	cd $(BENCH_MOD) && $(GO) vet ./...

## check-fork: third_party/gnet differs from the gnet release go.mod pins only as its LEASECACHED.md lists.
.PHONY: check-fork
check-fork:
	GO=$(GO) bash third_party/gnet/check-fork.sh

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## fuzz-smoke: a short run of every parser fuzz target (longer: FUZZTIME=10m make fuzz-smoke).
## `go test -fuzz` takes one target at a time, hence the list. Go spends up to a minute minimising each new
## interesting input, during which no new inputs are tried: FuzzParse made no progress after its first 3 s
## in a 60 s run (72k execs, 18 new inputs); with 2 s it made 205k execs and 104 new inputs in 20 s.
FUZZTIME ?= 30s
FUZZMINTIME ?= 2s
FUZZ_TARGETS := ./protocol:FuzzParse ./protocol:FuzzStrtoMagnitude ./protocol:FuzzSplitLine ./protocol:FuzzParseHot ./protocol:FuzzParseMetaFlags ./protocol:FuzzDecodeKeyBase64 \
	./protocol:FuzzParseAuth ./server:FuzzBinaryServe ./clientlib:FuzzReplyParsers ./cmd/leasecached:FuzzParseListen ./cmd/leasecached:FuzzExtendedFlags ./auth:FuzzParse \
	./slab:FuzzParseJournal ./slab:FuzzOwnerLeaving
# The load tool's targets, run inside its own module ($(BENCH_MOD)).
BENCH_FUZZ_TARGETS := ./load:FuzzValueLineFast
fuzz-smoke:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME); \
	done; \
	for t in $(BENCH_FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; echo "fuzz $(BENCH_MOD)/$$pkg $$name ($(FUZZTIME))"; \
		(cd $(BENCH_MOD) && $(GO) test $$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME)); \
	done

## fuzz-diff: the differential fuzzer (integration/fuzzdiff_test.go) for FUZZTIME: random command sequences,
## pipelined and cut at random points, sent to memcached 1.6.18 and to leasecached, replies compared; a
## divergence is shrunk to a reproducer (`make fuzz-diff FUZZTIME=10m`; replay one with FUZZDIFF_SEED=n
## FUZZDIFF_SEQS=1). `make test` runs it for 15 s under the race detector; this runs without it, for speed.
.PHONY: fuzz-diff
fuzz-diff: test-deps
	FUZZDIFF_TIME=$(FUZZTIME) $(GO) test -count=1 -timeout 0 -v -run '^TestFuzzDiff$$' ./integration/

## fuzz-diff-binary: the binary protocol's differential fuzzer (integration/fuzzdiff_binary_test.go) for
## FUZZTIME: random packet sequences, cut at random points, to memcached 1.6.18 and to leasecached, replies
## compared packet by packet; a divergence is shrunk and printed with the bytes in hex (replay one with
## FUZZDIFF_BINARY_SEED=n FUZZDIFF_BINARY_SEQS=1). `make test` runs it for 10 s under the race detector.
.PHONY: fuzz-diff-binary
fuzz-diff-binary: test-deps
	FUZZDIFF_BINARY_TIME=$(FUZZTIME) $(GO) test -count=1 -timeout 0 -v -run '^TestFuzzDiffBinary$$' ./integration/

## auth-timing: the -Y checks' wall-clock tests (auth/auth_test.go, requireTimingRun): an unknown user's
## check takes as long as a known one's. Run on a quiet machine; make test proves the same by counting.
.PHONY: auth-timing
auth-timing:
	AUTH_TIMING=1 $(GO) test -count=1 -v -run 'TestCheckCostsOneBcrypt|TestCheckTimeTellsNoUser' ./auth/

## soak: the integrity soak (integration/soak_test.go), each of its two runs (memory to spare, then
## overfilled) for SOAKTIME instead of the 12 s `make test` gives them (`make soak SOAKTIME=10m`), with the
## race detector as in make test. The test bounds itself (its clock, a deadline on every exchange), hence no
## go test timeout.
SOAKTIME ?= 10m
.PHONY: soak
soak:
	SOAK_TIME=$(SOAKTIME) $(GO) test -race -count=1 -timeout 0 -v -run '^TestSoak$$' ./integration/

## restart-soak: the kill -9 campaign (integration/restart_kill_test.go) for RESTARTROUNDS rounds instead of
## the 3 `make test` runs: a write-heavy load killed with SIGKILL at a random moment, the daemon restarted on
## the same directory and every key checked against the model, once with DIR's files mapped, once with
## the live copy and once with the copy's root changed at each restart, with the race detector as in make test (`make restart-soak RESTARTROUNDS=500`; replay a
## failure with LEASECACHED_RESTART_SEED). Each round bounds itself, hence no go test timeout.
RESTARTROUNDS ?= 100
.PHONY: restart-soak
restart-soak: test-deps
	LEASECACHED_KILL_ROUNDS=$(RESTARTROUNDS) $(GO) test -race -count=1 -timeout 0 -v -run '^TestRestartAfterKillDuringWrites(Live|SwitchingRoots)?$$' ./integration/

## herd: issue 27's measurement (integration/plain_herd_test.go): 200 plain get/set clients on one hot key that
## expires every 2 s, then on one a writer deletes every 2 s, against memcached 1.6.18 and leasecached with
## neither herd mode, with --grace, with --hold and with both, and grace with crashing refillers; each row for
## HERDTIME (`make herd HERDTIME=2m`), one table per scenario (README.md, "Herds of plain get/set clients").
## `make test` runs a short version that asserts the targets under the race detector; this runs the daemon
## without it, for the latencies. The test bounds itself (a row stops at most 15 s after HERDTIME), hence no
## go test timeout.
HERDTIME ?= 30s
.PHONY: herd
herd: bench-deps
	HERD_TIME=$(HERDTIME) $(GO) test -count=1 -timeout 0 -v -run '^TestPlainHerd$$' ./integration/

## vm-check: the warm restart on a whole machine (integration/vm_test.go): Debian 12 under QEMU (emulated;
## LEASECACHED_VM_ACCEL=kvm for KVM where a guest runs under it), the daemon from deploy/leasecached.service under systemd with deploy/vm/vm.conf:
## systemctl restart, SIGKILL and the OOM killer of the unit's cgroup v2 during writes (systemd restarts it),
## a clean reboot and a hard reset, each checked against a model (doc/design/deploy.md). The first run
## debootstraps Debian into $(VMDIR) (about 2 minutes); later ones reuse it. Not in `make test`.
VMDIR ?= bin/vm
.PHONY: vm-check vm-deps
vm-deps:
	command -v qemu-system-x86_64 >/dev/null && command -v debootstrap >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-system-x86 qemu-utils debootstrap)

vm-check: static vm-deps
	sh deploy/vm/image.sh $(VMDIR) $(STATIC_BIN)
	LEASECACHED_VM_DIR=$(abspath $(VMDIR)) $(GO) test -count=1 -timeout 20m -v -run '^TestVM$$' ./integration/

## vm-tests: the tests of the code that meets the kernel (slab, shard, the daemon's warm-restart tests), as
## static binaries in the same Debian 12 machine, on its kernel (6.1), with the power cut test that needs
## device-mapper: about 35-40 minutes emulated. Not in `make test`. LEASECACHED_VM_RUN=SUITE=REGEXP runs one
## suite's matching tests (doc/design/deploy.md).
.PHONY: vm-tests
vm-tests: static vm-deps
	LEASECACHED_VM_DIR=$(abspath $(VMDIR)) LEASECACHED_VM_STATIC=$(abspath $(STATIC_BIN)) \
		$(GO) test -count=1 -timeout 6h -v -run '^TestVMSuites$$' ./integration/

clean:
	rm -rf bin

## bench: leasecached vs memcached (same -t 2 -m 1024 -c 4096) on the same workload matrix, medians of
## 3 x 5 s, one table; BENCH_QUICK=1 for a four-minute run; THIRD="pogocache -p {port}" adds a third server.
.PHONY: bench-storage bench-deps bench-tool
bench: bench-deps build bench-tool
	GO=$(GO) ./bench/bench.sh

## bench-storage: bytes per item, RSS at the limit, hit ratio and GC, leasecached and memcached side by
## side; BENCH_QUICK=1 for a two-minute run.
bench-storage: bench-deps build bench-tool
	GO=$(GO) ./bench/storage.sh

## bench-restart: issue 30's measurement: restart time and items recovered, leasecached --data-dir (alone
## and with --data-live, plus a restart after the live copy is gone) after SIGTERM and after kill -9 against
## memcached -e (graceful only, SIGUSR1), for 1M and 10M items of 100 B, and RSS after the fill with and
## without; BENCH_QUICK=1 for 1M only (see bench/README.md).
.PHONY: bench-restart
bench-restart: bench-deps build bench-tool
	GO=$(GO) ./bench/restart.sh

## bench-instr: what --data-dir adds, in the server's user-space instructions a request (callgrind: repeats
## within a few percent where CPU time does not), on three rows; about 10 minutes (see bench/README.md).
.PHONY: bench-instr
bench-instr: bench-tool
	@command -v valgrind >/dev/null 2>&1 || { echo "installing benchmark dependency: valgrind"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; }
	GO=$(GO) ./bench/instr.sh

## pgo: regenerate cmd/leasecached/default.pgo, the profile `go build` optimises the daemon with, from a
## run of the daemon under a mix of the benchmark workloads (about 40 s); then make build.
.PHONY: pgo
pgo: bench-tool
	GO=$(GO) ./bench/pgo.sh

## bench-tool: the load tool, bin/leasecached-bench, built from its own module ($(BENCH_MOD); see bench/README.md).
bench-tool:
	cd $(BENCH_MOD) && $(GO) build -o $(CURDIR)/bin/leasecached-bench ./cmd/leasecached-bench

# bench-deps: the benchmarks need only the real memcached (installed the way test-deps does).
bench-deps:
	@command -v memcached >/dev/null 2>&1 || [ -x /usr/bin/memcached ] || { 		echo "installing benchmark dependency: memcached"; 		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq memcached; }
