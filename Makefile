# gobtl build. `make run` sets up and runs the main job; `make test` is what
# CI runs (.ci/run).
GO      ?= go
BIN     := bin
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: all build plugins test test-short race fuzz-smoke lint bench run clean

all: build plugins

build:
	$(GO) build -o $(BIN)/gobtl ./cmd/gobtl

plugins:
	@true

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...

test: build plugins lint
	$(GO) test ./...
	$(GO) test -race ./core/... ./pml/... ./conf/...
	$(GO) test -race ./btl/extoll/...
	$(MAKE) fuzz-smoke

fuzz-smoke:
	$(GO) test -run XXX -fuzz FuzzHeaderDecode -fuzztime 5s ./core/
	$(GO) test -run XXX -fuzz FuzzLoad -fuzztime 5s ./conf/
	$(GO) test -run XXX -fuzz FuzzPacketTrains -fuzztime 5s ./btl/extoll/

bench:
	$(GO) test -run XXX -bench . -benchmem ./pml/...

# The main job: the ring example on the default stack. Until a
# cross-process BTL is compiled in, its ranks are goroutines of one process
# over the in-process fabric.
run: build plugins
	$(GO) build -o $(BIN)/ring ./examples/ring
	$(BIN)/ring -local 4

clean:
	rm -rf $(BIN)

# EXTOLL flow-control experiments (seed 003 §5.3, §7): tables next to the
# paper's trends. EXTOLL_EXP="--quick" for a short run.
.PHONY: experiments experiments-extoll
experiments: experiments-extoll
experiments-extoll: build
	$(BIN)/gobtl extoll experiments $(EXTOLL_EXP)
