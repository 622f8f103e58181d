# gobtl build. `make run` sets up and runs the main job; `make test` is what
# CI runs (.ci/run).
GO      ?= go
BIN     := bin
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: all build plugins install test test-short race fuzz-smoke lint bench bench-osu compare-ompi run clean rdmacore pmix-dev ofi-dev engines bench-engines

all: build plugins

# gobtl and the examples join jobs that mpirun and srun --mpi=pmix start
# (PMIx, through libpmix: build tag pmix); srun --mpi=pmi2, mpiexec.hydra and
# gobtl run need no tag. `go build ./...` without the tag still works.
# btl "ofi" compiles against libfabric's headers (build tag ofi) and loads
# libfabric.so.1 when a job first uses it; without the tag the component
# registers and says how to rebuild. Headers outside the default include
# path are found by libfabric's pkg-config file.
GOTAGS ?= pmix,ofi
OFI_CFLAGS := $(shell pkg-config --cflags libfabric 2>/dev/null)
ifneq ($(strip $(OFI_CFLAGS)),)
export CGO_CFLAGS := -O2 -g $(OFI_CFLAGS)
endif
# -buildvcs=auto: the binaries carry the revision they were built from
# (gobtl version, bench --json) even where GOFLAGS turns stamping off.
build: pmix-dev ofi-dev
	$(GO) build -buildvcs=auto -tags '$(GOTAGS)' -o $(BIN)/gobtl ./cmd/gobtl
	$(GO) build -tags '$(GOTAGS)' -o $(BIN)/ring ./examples/ring
	$(GO) build -tags '$(GOTAGS)' -o $(BIN)/heat ./examples/heat

# OpenPMIx's headers and pkg-config file, for the pmix build tag: installed
# when missing, as rdmacore installs libibverbs-dev.
pmix-dev:
	@pkg-config --exists pmix 2>/dev/null || { \
		command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] || { echo "pmix-dev: install libpmix-dev and pkg-config (or build with GOTAGS=)"; exit 1; }; \
		apt-get update -qq && apt-get install -y -qq libpmix-dev pkg-config >/dev/null; }

# libfabric's headers and pkg-config file, for the ofi build tag (btl/ofi),
# installed when missing as pmix-dev installs PMIx's.
ofi-dev:
	@pkg-config --exists libfabric 2>/dev/null || { \
		command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] || { echo "ofi-dev: install libfabric-dev and pkg-config (or build with GOTAGS=pmix, without btl ofi)"; exit 1; }; \
		apt-get update -qq && apt-get install -y -qq libfabric-dev libfabric-bin pkg-config >/dev/null; }

# Every plugins/<name>/main.go serves a built-in policy as a plugin; the
# example third-party plugins (aimd, and skeleton, the one to copy) are
# modules of their own, each built on its own.
EXAMPLE_PLUGINS := aimd skeleton
PLUGIN_MAINS := $(patsubst %/main.go,./%,$(wildcard plugins/*/main.go))
plugins:
	@mkdir -p $(BIN)/plugins
	$(if $(PLUGIN_MAINS),$(GO) build -o $(BIN)/plugins/ $(PLUGIN_MAINS))
	for p in $(EXAMPLE_PLUGINS); do (cd examples/plugins/$$p && $(GO) build -o $(CURDIR)/$(BIN)/plugins/$$p .) || exit 1; done

# install puts the command in PREFIX/bin and the policy plugins in
# PREFIX/lib/gobtl/plugins, where PREFIX/bin/gobtl (and every program run
# from PREFIX/bin) finds them from any working directory; the example
# program goes to PREFIX/lib/gobtl/examples, the example stacks to
# PREFIX/share/gobtl/examples.
# DESTDIR stages the tree for a package.
PREFIX  ?= /usr/local
install: build plugins
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/gobtl/plugins $(DESTDIR)$(PREFIX)/lib/gobtl/examples $(DESTDIR)$(PREFIX)/share/gobtl/examples
	install -m 755 $(BIN)/gobtl $(DESTDIR)$(PREFIX)/bin/
	install -m 755 $(BIN)/plugins/* $(DESTDIR)$(PREFIX)/lib/gobtl/plugins/
	install -m 755 $(BIN)/ring $(DESTDIR)$(PREFIX)/lib/gobtl/examples/
	install -m 644 conf/examples/*.hcl $(DESTDIR)$(PREFIX)/share/gobtl/examples/
	install -m 644 examples/plugins/aimd/stack.hcl $(DESTDIR)$(PREFIX)/share/gobtl/examples/aimd.hcl

lint: pmix-dev ofi-dev
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	@# A 32-bit architecture: there, system structures' fields (an iovec's
	@# length, rusage's maxrss) are narrower than on this machine. 64-bit
	@# ones (arm64) build as amd64 does; 386 adds ~90 s to a cold cache.
	GOARCH=386 $(GO) vet ./...
	@# The code behind the pmix build tag, vetted with it.
	$(GO) vet -tags pmix $$(git grep -l '^//go:build.*pmix' -- '*.go' | xargs -n1 dirname | sort -u | sed 's|^|./|')
	$(GO) vet -tags ofi $$(git grep -l '^//go:build.*ofi' -- '*.go' | xargs -n1 dirname | sort -u | sed 's|^|./|')
	@# The gobtl command links no test code of ours: the only package in its
	@# closure that may import "testing" is go-plugin, whose root package
	@# carries its own test helpers (testing.go) next to the client we use.
	@bad=$$($(GO) list -deps -f '{{if not .Standard}}{{.ImportPath}} {{join .Imports " "}}{{end}}' ./cmd/gobtl | awk '/ testing( |$$)/ && $$1 != "github.com/hashicorp/go-plugin" {print $$1}'); \
	  test -z "$$bad" || { echo "lint: cmd/gobtl links testing through: $$bad"; exit 1; }
	@bad=$$($(GO) list -f '{{.ImportPath}} {{join .Imports " "}}' ./... | awk '$$1 !~ "/test(/|$$)" && / github.com\/gobtl\/gobtl\/test\//{print $$1}'); \
	  test -z "$$bad" || { echo "lint: non-test packages import test/: $$bad"; exit 1; }
	@# The plugin host and SDK link no HCL: the example plugin modules,
	@# built against them, do not require it.
	@bad=$$($(GO) list -deps ./plugins ./plugins/sdk | grep -x 'github.com/hashicorp/hcl/v2'); \
	  test -z "$$bad" || { echo "lint: plugins or plugins/sdk link HCL (github.com/gobtl/gobtl/conf?)"; exit 1; }
	@bad=$$($(GO) list -f '{{.ImportPath}} {{join .Imports " "}}' ./btl/... | awk '$$1 !~ "/btltest$$" && / github.com\/gobtl\/gobtl\/(policies|boot|launch|pml)/{print $$1}'); \
	  test -z "$$bad" || { echo "lint: transports import policies, boot, launch or pml: $$bad"; exit 1; }

# go test, with a summary of what failed after the output (the end of a
# timed-out package's output is its newest goroutines, not the test).
GOTEST = GO=$(GO) scripts/gotest.sh

test: build plugins lint rdmacore engines
	$(GOTEST) ./...
	$(GOTEST) -tags ofi ./btl/ofi/...
	$(GOTEST) -race -tags ofi ./btl/ofi/...
	$(GOTEST) -tags ofi -run OFI ./test/mp/
	$(GOTEST) -race ./core/... ./pml/... ./conf/...
	$(GOTEST) -race -short ./boot/... ./launch/... ./btl/sm/...
	$(GOTEST) -race ./btl/extoll/...
	$(GOTEST) -race ./btl/ib/...
	$(GOTEST) -race ./sim/...
	$(GOTEST) -race ./plugins/
	for p in $(EXAMPLE_PLUGINS); do (cd examples/plugins/$$p && $(GO) vet ./... && $(GO) test ./...) || exit 1; done
	$(MAKE) fuzz-smoke

# The rdma-core verbs provider (build tag rdmacore): CI installs its headers
# and compiles and vets it; it cannot run here (no InfiniBand hardware).
rdmacore:
	@test -e /usr/include/infiniband/verbs.h || { \
		command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] || { echo "rdmacore: install libibverbs-dev"; exit 1; }; \
		apt-get update -qq && apt-get install -y -qq libibverbs-dev >/dev/null; }
	$(GO) vet -tags rdmacore ./btl/ib/...
	$(GO) test -tags rdmacore ./btl/ib/rdmacore/

# The engines the tests of test/engines start jobs with (Open MPI's
# mpirun, Slurm's srun, MPICH's mpiexec.hydra) and the one-node Slurm they
# run under (scripts/slurm-up.sh: idempotent, shared by concurrent runs).
# Not root: nothing is installed, and those tests skip and say why.
ENGINE_PKGS := openmpi-bin libopenmpi-dev mpich slurmctld slurmd slurm-client munge libpmix-dev iproute2
engines:
	@if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "engines: not root on Debian: nothing installed, the engine tests will skip"; exit 0; fi; \
	missing=; for p in $(ENGINE_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "engines: installing$$missing"; apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; fi; \
	scripts/slurm-up.sh

# Launch cost (time to Init for 2, 4, 8, 16 ranks under every engine) and
# the latency between two "hosts" next to one host.
bench-engines: engines
	$(GO) test -run XXX -bench . -benchtime 3x ./test/engines/

# Budgets are execution counts, not durations: a duration -fuzztime races Go's
# fuzz coordinator at the deadline (golang/go#75804, fixed in Go 1.27) and
# fails with a bare "context deadline exceeded" on a loaded machine. Each count
# is a few seconds here.
fuzz-smoke:
	$(GO) test -run XXX -fuzz FuzzHeaderDecode -fuzztime 100000x ./core/
	$(GO) test -run XXX -fuzz FuzzLoad -fuzztime 500x ./conf/
	$(GO) test -run XXX -fuzz FuzzPacketTrains -fuzztime 20000x ./btl/extoll/
	$(GO) test -run XXX -fuzz FuzzResponse -fuzztime 100000x ./boot/pmi/
	$(GO) test -run XXX -fuzz FuzzRequest -fuzztime 20000x ./boot/
	$(GO) test -run XXX -fuzz FuzzHeaderDecode -fuzztime 20000x ./btl/ib/softrc/
	$(GO) test -run XXX -fuzz FuzzAcceptedLink -fuzztime 20000x ./btl/ib/softrc/
	$(GO) test -run XXX -fuzz FuzzRendezvousBodies -fuzztime 20000x ./pml/
	$(GO) test -run XXX -fuzz FuzzFenceReply -fuzztime 5000x ./boot/
	$(GO) test -run XXX -fuzz FuzzMessages -fuzztime 5000x ./plugins/internal/wire/

bench:
	$(GO) test -run XXX -bench . -benchmem ./pml/... ./btl/sm/...
	$(MAKE) bench-osu

# The osu-style suite over real processes (gobtl bench under gobtl run).
bench-osu: build
	gobtl run -np 2 -- gobtl bench latency
	gobtl run -np 2 -- gobtl bench bw
	gobtl run -np 2 -- gobtl bench msgrate
	gobtl run -np 4 -- gobtl bench multi-pingpong

# gobtl against Open MPI 4.1 on this host, every ratio against its target
# (issue 16) in one table: shared memory against ob1+vader (cma and none),
# ib/softrc against ob1+tcp, extoll_dynamic as a plugin against built in;
# the latency and bandwidth plots go to out/. Installs openmpi-bin and
# libopenmpi-dev if missing. COMPARE_ARGS="-reps 9"; the collectives
# (allreduce, bcast, allgather, barrier; issue 18) on 4 ranks, on the
# default stack, after the point-to-point set.
compare-ompi:
	bench/compare-ompi.sh -plots out $(COMPARE_ARGS)
	bench/compare-ompi.sh -set coll $(COMPARE_ARGS)

# The main job: the ring example on the default stack (self and shared
# memory), four processes started by the launcher.
run: build plugins
	gobtl run -np 4 -- ring

clean:
	rm -rf $(BIN)

# EXTOLL flow-control experiments (seed 003 §5.3, §7): tables next to the
# paper's trends. EXTOLL_EXP="--quick" for a short run.
.PHONY: experiments experiments-extoll
experiments: experiments-extoll
experiments-extoll: build
	$(BIN)/gobtl experiment extoll $(EXTOLL_EXP)

# InfiniBand experiments (issue 4), tables next to the papers' numbers:
# receive-buffer utilization per-peer vs B-SRQ (seed 002 §4), overlap of
# the three rendezvous protocols (seed 004 §5.1) and ib/softrc latency and
# bandwidth against Open MPI's ob1+tcp.
.PHONY: experiments experiments-ib
experiments: experiments-ib
experiments-ib: build
	$(BIN)/gobtl experiment recvbuf --ranks 8,16
	$(BIN)/gobtl experiment overlap
	$(BIN)/gobtl experiment ibperf

# Multirail experiments (issue 7, seed 001 §6) over ib/softrc rails between two
# processes: two equal rails vs one, 4x+1x rails (even/weighted/adaptive), a
# second job loading one rail, window round robin on rails of different
# latency; tables next to the paper's numbers, plots in out/multirail.
# MULTIRAIL_EXP="--quick --reps 1" for a short run.
.PHONY: experiments experiments-multirail
experiments: experiments-multirail
experiments-multirail: build
	$(BIN)/gobtl experiment multirail $(MULTIRAIL_EXP)

# Flow-control experiments (issue 5, seed 000 §6) over ib/softrc between
# processes: latency and bandwidth vs window for the hardware, static and
# dynamic schemes, and the NAS patterns on 8 ranks (Tables 1-2, Figs 9-10);
# plots in out/flowcontrol. FC_EXP="--quick" for a short run.
.PHONY: experiments experiments-flowcontrol
experiments: experiments-flowcontrol
experiments-flowcontrol: build
	$(BIN)/gobtl experiment flowcontrol $(FC_EXP)

# The mutation check over the papers' rules (scripts/mutants.sh): each
# one-line break of a rule must fail a test. Not part of `make test`: it
# runs the named tests once per mutant, a few minutes on this machine.
.PHONY: mutants
mutants:
	scripts/mutants.sh
