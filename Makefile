# Canopy — one Makefile for building, running and testing.
#
#   make run    build and start a local root relay, write an admin kubeconfig
#   make test   all tests (unit, race, end-to-end with real kubectl)
#   make bench  Go benchmarks (store, API)

GO        ?= go
BIN       := $(CURDIR)/bin
DATA      ?= $(CURDIR)/.data
# Use the kubectl on PATH when there is one; otherwise build it into bin/.
KUBECTL   ?= $(shell command -v kubectl 2>/dev/null || echo $(BIN)/kubectl)

.PHONY: all build run test test-unit test-race test-e2e bench vet fmt clean kubectl

all: build

build: $(BIN)/relay

$(BIN)/relay: $(shell find cmd relay topology consensus \( -name '*.go' -o -name '*.yaml' \) -not -name '*_test.go') go.mod go.sum
	@mkdir -p $(BIN)
	$(GO) build -o $@ ./cmd/relay

$(BIN)/kubectl:
	@mkdir -p $(BIN)
	cd hack/kubectl && $(GO) build -o $(BIN)/kubectl .

kubectl: $(KUBECTL)

run: build kubectl
	@BIN=$(BIN) DATA=$(DATA) KUBECTL=$(KUBECTL) hack/run.sh

# Every package runs under the race detector: the store, the log, the API
# and the end-to-end suite are all concurrent.
test: build kubectl
	$(GO) vet ./...
	RELAY_BIN=$(BIN)/relay KUBECTL=$(KUBECTL) $(GO) test -race -count=1 -timeout=20m ./...

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./relay/store/ ./consensus/ ./relay/internal/wire/ ./relay/tree/ ./test/...
	$(GO) test -run '^$$' -bench Fanout -benchtime 100x ./relay/server/

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
