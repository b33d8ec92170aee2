# ingress-reactor: build, run and test. `make run` and `make test` are the two commands a newcomer needs.
SHELL := /bin/bash
.DEFAULT_GOAL := build

GO        ?= go
BIN       := $(CURDIR)/bin
CACHE     := $(CURDIR)/.cache
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
STATICCHECK_VERSION := v0.8.2
export GOTOOLCHAIN := local

# Local demo ports (unprivileged).
RUN_DIR        ?= $(CACHE)/run
RUN_HTTP_PORT  ?= 8080
RUN_HTTPS_PORT ?= 8443

# make scale: how many Ingresses, and whether each has its own TLS Secret (docs/benchmarks.md).
SCALE_INGRESSES ?= 1000
SCALE_TLS       ?= false
SCALE_ANNOTATED ?= false

.PHONY: deps deps-test build run test test-unit test-integration test-monitoring soak scale fuzz bench manifests fmt lint clean

## deps: install NGINX with the Lua and stream modules from Debian (only what is missing) and download Go modules.
deps:
	hack/install-nginx.sh
	$(GO) mod download

## deps-test: also build kube-apiserver, etcd and helm for the integration tests (about 8 minutes cold, cached after).
deps-test: deps
	@command -v ip >/dev/null || command -v /usr/sbin/ip >/dev/null || apt-get install -y --no-install-recommends --no-upgrade iproute2
	hack/build-kube-binaries.sh
	hack/build-helm.sh

## build: the controller and the echo backend into ./bin.
build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ingress-reactor ./cmd/ingress-reactor
	$(GO) build -trimpath -o $(BIN)/echoserver ./cmd/echoserver

## run: the controller in local mode on examples/local, serving through real NGINX on :$(RUN_HTTP_PORT). Ctrl-C stops everything.
run: deps build
	hack/run-local.sh $(BIN) $(RUN_DIR) $(RUN_HTTP_PORT) $(RUN_HTTPS_PORT)

## test: everything CI runs: lint, unit tests with -race, short fuzzing, integration tests on real kube-apiserver, etcd and NGINX, and the monitoring test.
test: deps-test lint test-unit fuzz test-integration test-monitoring

## test-unit: fast unit tests with the race detector.
test-unit:
	$(GO) test -race -count=1 ./...

## soak: faults and churn under steady load, about 4 minutes (not part of test; docs/benchmarks-faults.md).
soak: deps-test
	hack/in-netns.sh $(GO) test -tags integration -count=1 -timeout 20m -run TestFaultSoak -v ./test/integration/ -args -soak

## scale: the data plane at SCALE_INGRESSES Ingresses (1000; SCALE_TLS=true for a Secret each; SCALE_ANNOTATED=true for routing annotations on every other one) through a real API server: start, change latency, reloads, memory, throughput (not part of test; docs/benchmarks.md).
scale: deps-test
	hack/in-netns.sh $(GO) test -tags integration -count=1 -timeout 3h -run TestDataPlaneAtScale -v ./test/integration/ -args -scale-ingresses=$(SCALE_INGRESSES) -scale-tls=$(SCALE_TLS) -scale-annotated=$(SCALE_ANNOTATED)

## fuzz: a short run of every fuzz target (seed corpora always run as part of test-unit).
fuzz:
	hack/fuzz.sh 10s

## test-integration: end-to-end tests inside a private network namespace.
test-integration: deps-test
	hack/in-netns.sh $(GO) test -tags integration -count=1 -timeout 30m -v ./test/integration/...

## test-monitoring: the Grafana dashboard's queries and the alerting rules (deploy/) evaluated by Prometheus's query engine on metrics scraped from a controller that served traffic. test/monitoring is a Go module of its own, so the Prometheus server's dependencies stay out of the controller's go.mod.
test-monitoring: deps-test
	cd test/monitoring && ../../hack/in-netns.sh $(GO) test -tags integration -count=1 -timeout 20m -v ./...

## bench: every Go benchmark once with memory statistics (see docs/benchmarks.md for the documented runs).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./...

## manifests: regenerate deploy/ingress-reactor.yaml from the Helm chart's defaults (needs helm: hack/build-helm.sh).
manifests:
	hack/build-helm.sh
	hack/gen-manifest.sh > deploy/ingress-reactor.yaml

## fmt: format the code.
fmt:
	gofmt -s -w $$(git ls-files '*.go')

## lint: gofmt, go vet (unit and integration code) and staticcheck.
lint:
	@out=$$(gofmt -s -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./test/...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags integration ./...
	cd test/monitoring && $(GO) vet ./... && $(GO) vet -tags integration ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags integration ./...

## clean: remove build output and local run state (keeps the kube binaries cache; `rm -rf .cache` removes it).
clean:
	rm -rf $(BIN) $(RUN_DIR)
