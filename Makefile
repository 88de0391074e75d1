# Canopy — one Makefile for building, running and testing.
#
#   make run    build and start a local root relay, write an admin kubeconfig
#   make test   all tests (unit, race, end-to-end with real kubectl, deploy/)
#   make bench  benchmarks side by side with kube-apiserver; docs/benchmarks.md
#   make bench-10k  flat vs tree at 10 000 virtual clusters (about 15 minutes)
#   make bench-ocm  Canopy beside Open Cluster Management on 3 and 10 real clusters
#   make dist   relay for linux/amd64, linux/arm64, darwin/arm64 and SHA256SUMS in bin/dist
#   make image  a multi-platform OCI image of relay, as an OCI layout in bin/image

GO        ?= go
BIN       := $(CURDIR)/bin
DATA      ?= $(CURDIR)/.data
# Use the kubectl on PATH when there is one; otherwise build it into bin/.
KUBECTL   ?= $(shell command -v kubectl 2>/dev/null || echo $(BIN)/kubectl)

.PHONY: all build run test test-deploy test-unit test-race test-e2e bench bench-10k bench-ocm bench-console vet fmt clean kubectl kube-bins ocm-bins dist image FORCE

all: build

build: $(BIN)/relay

# Every file of this module that goes into the binary (go list -deps): an
# edit in any package linked into relay rebuilds it.
RELAY_SRCS = $(shell $(GO) list -deps -f '{{with .Module}}{{if eq .Path "github.com/canopy-dev/canopy"}}{{range $$.GoFiles}}{{$$.Dir}}/{{.}} {{end}}{{range $$.EmbedFiles}}{{$$.Dir}}/{{.}} {{end}}{{end}}{{end}}' ./cmd/relay)

# What relay binaries say they were built from (`relay version`, the root's
# /version; relay/buildinfo): the nearest tag or the commit, -dirty when
# tracked files have changes. Outside a git checkout, pass VERSION, COMMIT
# and CREATED. Evaluated once per make run.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
VERSION := $(VERSION)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)$(if $(filter %-dirty,$(VERSION)),-dirty)
COMMIT  := $(COMMIT)
# The commit time: every timestamp in the image, so that it is reproducible.
CREATED ?= $(shell git show -s --format=%cI HEAD 2>/dev/null)
CREATED := $(CREATED)
SOURCE  ?= https://github.com/canopy-dev/canopy
BUILDINFO := github.com/canopy-dev/canopy/relay/buildinfo
RELAY_LDFLAGS = -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT)

# The stamp the binaries were linked with, rewritten only when it changes:
# a new commit relinks them once, a make run with nothing new relinks
# nothing.
STAMP := $(BIN)/.buildinfo
$(STAMP): FORCE
	@mkdir -p $(BIN)
	@echo '$(VERSION) $(COMMIT)' | cmp -s - $@ || echo '$(VERSION) $(COMMIT)' > $@

# Static (no cgo) and without local paths (-trimpath), as released: bin/relay
# runs on any Linux host of its architecture and shares the build cache
# with make dist and make image.
RELAY_BUILD = CGO_ENABLED=0 $(GO) build -trimpath

$(BIN)/relay: $(RELAY_SRCS) go.mod go.sum $(STAMP)
	@mkdir -p $(BIN)
	$(RELAY_BUILD) -ldflags '$(RELAY_LDFLAGS)' -o $@ ./cmd/relay

# Releases: relay cross-compiled for each of DIST_PLATFORMS into
# bin/dist/relay-OS-ARCH, with their checksums in bin/dist/SHA256SUMS
# (`sha256sum -c SHA256SUMS`).
DIST_PLATFORMS  ?= linux/amd64 linux/arm64 darwin/arm64
dist_bin = $(addprefix $(BIN)/dist/relay-,$(subst /,-,$(1)))

# Released binaries are linked without symbol table and DWARF (-s -w): 83
# instead of 115 MB, 26 instead of 49 MB compressed; panics still name
# functions and lines. bin/relay keeps them for debuggers.
$(BIN)/dist/relay-%: $(RELAY_SRCS) go.mod go.sum $(STAMP)
	@mkdir -p $(@D)
	GOOS=$(word 1,$(subst -, ,$*)) GOARCH=$(word 2,$(subst -, ,$*)) $(RELAY_BUILD) -ldflags '-s -w $(RELAY_LDFLAGS)' -o $@ ./cmd/relay

dist: $(call dist_bin,$(DIST_PLATFORMS))
	$(GO) run ./hack/release sums -o $(BIN)/dist/SHA256SUMS $^

# The container image, built without a container engine (hack/release):
# an OCI image index of IMAGE_PLATFORMS written as an OCI layout to
# bin/image; push it with a registry client (docs/operations.md, "Container image").
# deploy/Dockerfile builds the same image with an engine.
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64

image: $(call dist_bin,$(IMAGE_PLATFORMS))
	$(GO) run ./hack/release image -o $(BIN)/image -version '$(VERSION)' -revision '$(COMMIT)' \
		-created '$(CREATED)' -source '$(SOURCE)' $(join $(addsuffix =,$(IMAGE_PLATFORMS)),$^)

$(BIN)/kubectl:
	@mkdir -p $(BIN)
	cd hack/kubectl && $(GO) build -o $(BIN)/kubectl .

kubectl: $(KUBECTL)

# The real control plane the tests run clusters of (test/kubecluster): pinned in
# hack/kube/go.mod, rebuilt only when a binary is missing or that module changes.
KUBE_MOD  := hack/kube/go.mod hack/kube/go.sum
KUBE_BINS := $(addprefix $(BIN)/,kube-apiserver kube-controller-manager kube-scheduler etcd kwok)

kube-bins: $(KUBE_BINS)

# Linked without symbol table and DWARF (-s -w), as Kubernetes' own release
# build does: a third less to link and write. The Kubernetes commands are
# stamped with the pinned release, so /version and --version report it.
KUBE_VERSION = $(shell cd hack/kube && $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
KUBE_LDFLAGS = -s -w $(foreach v,gitVersion=$(KUBE_VERSION) gitMajor=$(word 1,$(subst ., ,$(KUBE_VERSION:v%=%))) \
	gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION))) gitTreeState=clean,-X k8s.io/component-base/version.$(v))

$(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler: $(KUBE_MOD)
	@mkdir -p $(BIN)
	cd hack/kube && $(GO) build -ldflags '$(KUBE_LDFLAGS)' -o $(abspath $@) k8s.io/kubernetes/cmd/$(notdir $@)

$(BIN)/etcd: $(KUBE_MOD)
	@mkdir -p $(BIN)
	cd hack/kube && $(GO) build -ldflags '-s -w' -o $(abspath $@) go.etcd.io/etcd/server/v3

$(BIN)/kwok: $(KUBE_MOD)
	@mkdir -p $(BIN)
	cd hack/kube && $(GO) build -ldflags '-s -w' -o $(abspath $@) sigs.k8s.io/kwok/cmd/kwok

# `make bin/etcd` and friends, whatever BIN is.
ifneq ($(BIN),bin)
$(addprefix bin/,$(notdir $(KUBE_BINS))): bin/%: $(BIN)/%
endif

# Open Cluster Management, the peer of make bench-ocm: its klusterlet agent
# (registration-operator) and hub registration controller (registration),
# pinned in hack/ocm/go.mod, rebuilt only when a binary is missing or that
# module changes.
OCM_MOD  := hack/ocm/go.mod hack/ocm/go.sum
OCM_BINS := $(addprefix $(BIN)/,registration-operator registration)

ocm-bins: $(OCM_BINS)

$(OCM_BINS): $(OCM_MOD)
	@mkdir -p $(BIN)
	cd hack/ocm && $(GO) build -ldflags '-s -w' -o $(abspath $@) open-cluster-management.io/ocm/cmd/$(notdir $@)

run: build kubectl
	@BIN=$(BIN) DATA=$(DATA) KUBECTL=$(KUBECTL) hack/run.sh

# Every package runs under the race detector: the store, the log, the API
# and the end-to-end suite are all concurrent. test/observability (the
# dashboard and alert rules against running relays) is a module of its
# own, to keep the Prometheus server's dependencies out of go.mod.
test: build kubectl kube-bins
	$(GO) vet ./...
	RELAY_BIN=$(BIN)/relay KUBECTL=$(KUBECTL) $(GO) test -race -count=1 -timeout=20m ./...
	cd test/observability && $(GO) vet ./... && RELAY_BIN=$(BIN)/relay KUBECTL=$(KUBECTL) $(GO) test -race -count=1 -timeout=5m ./...
	$(MAKE) test-deploy

# deploy/ (the Helm chart, kustomize, systemd units) is tested by a module
# of its own, test/deploy: Helm and kustomize bring a large tree of
# dependencies that the relay does not link.
test-deploy: build kubectl kube-bins
	cd test/deploy && $(GO) vet ./... && \
		RELAY_BIN=$(BIN)/relay KUBECTL=$(KUBECTL) $(GO) test -race -count=1 -timeout=10m ./...

# A simulated fleet of 500 virtual clusters (root, 10 regions, 50 edges
# each) in one process: a rollout for 30 s, measured; report.md and plots
# in $(DATA)/sim (docs/simulations.md). SIM_ARGS takes other flags.
SIM_ARGS ?= --topology=1x10x50 --scenario=rollout --duration=30s
.PHONY: simulate
simulate: build
	$(BIN)/relay simulate $(SIM_ARGS) --report=$(DATA)/sim

# Issue 10's benchmarks side by side, on this machine, in one run
# (test/bench/cmd/benchreport): the kube API load generator against
# kube-apiserver with 1 and 3 etcd members and Canopy roots of 1 and 3
# replicas (relay processes), root failover,
# Go micro-benchmarks, flat vs tree and partition catch-up in the simulator.
# Writes docs/benchmarks.md's generated region and raw outputs in docs/bench/ (about
# 24 minutes on 2 cores: three rounds of each API operation). BENCH_QUICK=1: a smaller run in under 5 minutes,
# into .data/bench/quick/ (docs/ untouched).
BENCH_QUICK ?=
bench: $(BIN)/kube-apiserver $(BIN)/etcd
	$(GO) run ./test/bench/cmd/benchreport -go=$(GO) -quick=$(if $(filter-out 0,$(BENCH_QUICK)),true,false)

# Flat vs tree at 10 000 virtual clusters: about 15 minutes and 15 GiB, so
# not part of `make bench`, whose report shows this run's last output.
bench-10k:
	$(GO) run ./test/bench/cmd/benchreport -go=$(GO) -only=sim10k

# Issue 32's comparison: the same real clusters (etcd + kube-apiserver)
# joined to an Open Cluster Management hub and to a Canopy tree, the same
# changes through both (test/bench BenchmarkOCM, test/bench/cmd/ocmreport),
# with 3 and then 10 clusters: docs/benchmarks.md's section "Canopy beside
# Open Cluster Management on the same real clusters", raw outputs in
# docs/bench/ocm-*. About 3 minutes on 2 cores, the binaries built.
bench-ocm: build kube-bins ocm-bins
	nice $(GO) run ./test/bench/cmd/ocmreport -go=$(GO)

# The console in Chromium against 10 000 destinations (100 regions of 100
# edges, in one process): about 6 minutes and 6.5 GiB, so not part of
# `make bench`; docs/benchmarks.md, The console at 10 000 destinations.
bench-console:
	$(GO) test -run '^$$' -bench '^BenchmarkConsole$$' -benchtime=1x -timeout=60m ./relay/server

# The console's assets (relay/console/dist, embedded in relay) rebuilt
# from relay/console/web with exactly the packages of its lock file.
.PHONY: console console-screenshot
console:
	cd relay/console/web && npm ci --no-audit --no-fund && npm run build

# The README's picture of the console: the browser test's tree of 500
# destinations with a region stopped, written to docs/console.png.
console-screenshot:
	CANOPY_CONSOLE_SCREENSHOT=$(CURDIR)/docs/console.png $(GO) test -count=1 -run TestConsoleInBrowser ./relay/server

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN) $(DATA)

# Regenerate the edge.canopy.dev API types' deepcopy functions and CRD
# manifests with controller-gen (version pinned in topology/api/v1alpha1/doc.go).
.PHONY: generate
generate:
	$(GO) generate ./topology/...
