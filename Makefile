# Herald's developer commands. `make help` lists them.
SHELL := /bin/bash
GO    ?= go
PKGS  ?= ./...

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets with a line each
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# run and install print each package as it compiles (go build -v): the
# first build compiles every broker's and store's SDK, which takes minutes
# on a small machine, and silence then looks like a hang.
.PHONY: run
run: ## Build bin/herald (listing packages as they compile), then run Herald on 127.0.0.1:8080 over in-memory drivers (HERALD_* variables override)
	@echo "==> building bin/herald (the first build compiles every dependency; later ones take seconds)"
	CGO_ENABLED=0 $(GO) build -v -ldflags "$(VERSION_LDFLAGS)" -o bin/herald ./cmd/herald
	@echo "==> starting Herald: bin/herald serve"
	bin/herald serve

.PHONY: install
install: ## Install the herald command into $(go env GOPATH)/bin (or GOBIN), version-stamped, listing packages as they compile
	@echo "==> installing herald into $$(d=$$($(GO) env GOBIN); echo $${d:-$$($(GO) env GOPATH)/bin})"
	CGO_ENABLED=0 $(GO) install -v -ldflags "$(VERSION_LDFLAGS)" ./cmd/herald
	@d=$$($(GO) env GOBIN); d=$${d:-$$($(GO) env GOPATH)/bin}; \
	case ":$$PATH:" in *":$$d:"*) echo "==> herald is on your PATH: $$(command -v herald)";; \
	*) echo "==> $$d is not on your PATH: add it, e.g. export PATH=\"$$d:\$$PATH\"";; esac

# make test needs the real servers: PostgreSQL, RabbitMQ and NATS
# JetStream listening on 127.0.0.1 (5432, 5672, 4222), and moto_server,
# Google's Pub/Sub and Firestore emulators, aws-lambda-rie and Chromium
# installed (CONTRIBUTING.md, "Test"). A missing one skips its suite with
# the reason, or fails it with HERALD_REQUIRE_SERVERS=1 (CI).
.PHONY: test
test: ## Run every test: the Go suites (in-memory and real-server) with the race detector, then the TypeScript client's (make test-ts); needs PostgreSQL, RabbitMQ, NATS, the emulators, Node and Chromium (CONTRIBUTING.md)
	$(GO) test -race -count=1 -timeout 40m $(PKGS)
	$(MAKE) test-ts

# The TypeScript client (clients/typescript, docs/typescript.md) is tested
# against a herald built from this tree, in Node and in headless Chromium
# (/usr/bin/chromium, which .ci/run installs). npm ci installs exactly its
# lockfile from the npm registry.
TS_DIR := clients/typescript

.PHONY: test-ts
test-ts: ## Test the TypeScript client in Node and headless Chromium against a herald built from this tree (npm ci from its lockfile)
	mkdir -p $(TS_DIR)/build
	$(GO) build -o $(TS_DIR)/build/herald ./cmd/herald
	cd $(TS_DIR) && npm ci --no-audit --no-fund --loglevel=error && HERALD_BIN=$(CURDIR)/$(TS_DIR)/build/herald npm test

# The packages that hold only real-server suites (moto, the Google
# emulators, RabbitMQ, NATS, aws-lambda-rie, the lease store's URL
# harness) are not even built here; in the others, -short skips every test
# that needs a real server (package internal/emulators) or kills processes.
SHORT_SKIP := /pubsubx/(awssnssqs|gcppubsub|nats|rabbit)$$|/leasestore/storeurl(/conformance/[a-z]+)?$$|/functions/cmd/lambda$$

.PHONY: test-short
test-short: ## Run the in-memory tests only (-short: no real server, no kill test), with the race detector: the inner loop
	$(GO) test -race -short -count=1 -timeout 10m $$($(GO) list ./... | grep -v -E '$(SHORT_SKIP)')

.PHONY: bench
bench: ## Run the end-to-end benchmarks in bench/ (publish, pull+acknowledge, SSE/gRPC/WebSocket streams over local.Start, in memory); prints events/s, latencies, allocs/event
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x ./bench/...

.PHONY: bench-peer
PEER_BIN ?= $(CURDIR)/.peer-bin
bench-peer: ## Run Herald and NATS JetStream side by side (separate processes, same workload, alternating runs); prints events/s, server CPU per event, latencies and ratios; docs/benchmarks.md
	$(GO) build -o $(PEER_BIN)/nats-server github.com/nats-io/nats-server/v2
	$(GO) build -o $(PEER_BIN)/herald ./cmd/herald
	$(GO) run ./bench/peer -herald $(PEER_BIN)/herald -nats-server $(PEER_BIN)/nats-server $(PEER_ARGS)

.PHONY: bench-streams
bench-streams: ## Open N non-durable streams on one Herald process (STREAMS_ARGS: -stack mem,nats-pg,rabbit-pg -transport sse,grpc,ws -n 1000); prints open, fan-out and idle cost per stream; docs/benchmarks.md
	$(GO) build -o $(PEER_BIN)/nats-server github.com/nats-io/nats-server/v2
	$(GO) build -o $(PEER_BIN)/herald ./cmd/herald
	$(GO) run ./bench/streams -herald $(PEER_BIN)/herald -nats-server $(PEER_BIN)/nats-server $(STREAMS_ARGS)

.PHONY: bench-telemetry
bench-telemetry: ## Run the end-to-end benchmark with telemetry off and on (OTLP to a local sink), alternating; docs/benchmarks.md
	bash bench/telemetry.sh

.PHONY: console-screenshots
console-screenshots: ## Retake the web console's screenshots in docs/console/ (runs its browser test in headless Chromium)
	HERALD_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console go test -count=1 -run 'TestConsoleE2E|TestConsoleOIDCE2E' ./local/

.PHONY: bench-cost
bench-cost: ## Print the lease store's DynamoDB/Firestore cost per delivered event (write/read units, hottest key, failed writes); docs/cost-model.md
	$(GO) test -run '^$$' -bench MemCost -benchtime 1x ./leasestore/

.PHONY: lint
lint: ## gofmt, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

# Every build stamps the version, commit and build date into the binary
# (package internal/version; GET /health reports the version). VERSION
# defaults to `git describe`: the tag, or tag-N-gHASH between tags.
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT      ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE  := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
VERSION_PKG := github.com/heraldevents/herald/internal/version
VERSION_LDFLAGS = -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT) -X $(VERSION_PKG).Date=$(BUILD_DATE)

.PHONY: build
build: ## Build the herald command (CLI and `herald serve`, the local adapter) into bin/, version-stamped
	CGO_ENABLED=0 $(GO) build -ldflags "$(VERSION_LDFLAGS)" -o bin/herald ./cmd/herald

# Deployment artifacts (docs/deploy.md). One bootstrap serves every Herald
# function; HERALD_FUNCTION picks the routes. Each cloud's build links only
# its own drivers (internal/cloudbuild): herald_aws the mem, SNS/SQS and
# DynamoDB ones, herald_gcp the mem, Pub/Sub, Firestore, RabbitMQ and NATS
# ones. `make build` (the local adapter) and `go build` without tags link
# every driver. The Dockerfile passes CLOUDRUN_TAGS too, and the RIE test
# builds with LAMBDA_TAGS.
LAMBDA_ARCHES  ?= arm64 amd64
LAMBDA_TAGS    := lambda.norpc,herald_aws
LAMBDA_FLAGS   := -tags $(LAMBDA_TAGS) -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)"
CLOUDRUN_TAGS  := herald_gcp
CLOUDRUN_FLAGS := -tags $(CLOUDRUN_TAGS) -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)"
SAM_FUNCTIONS := PublishFunction PullFunction AcknowledgeFunction DestinationsFunction JobsFunction WebSocketFunction

.PHONY: lambda
lambda: ## Build the Lambda bootstrap (AWS drivers only) for arm64 and amd64 into dist/<arch>/bootstrap (+ bootstrap.zip)
	@set -e; for arch in $(LAMBDA_ARCHES); do \
	  mkdir -p dist/$$arch; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build $(LAMBDA_FLAGS) -o dist/$$arch/bootstrap ./functions/cmd/lambda; \
	  if command -v zip >/dev/null; then rm -f dist/$$arch/bootstrap.zip; (cd dist/$$arch && zip -q -X bootstrap.zip bootstrap); fi; \
	  echo "dist/$$arch/bootstrap: $$(stat -c %s dist/$$arch/bootstrap) bytes"; \
	done

.PHONY: cloudrun
cloudrun: ## Build the Cloud Run server (Google Cloud, RabbitMQ, NATS drivers) for linux/amd64 and linux/arm64 into dist/cloudrun-<arch>/herald
	@set -e; for arch in $(LAMBDA_ARCHES); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build $(CLOUDRUN_FLAGS) -o dist/cloudrun-$$arch/herald ./functions/cmd/cloudrun; \
	  echo "dist/cloudrun-$$arch/herald: $$(stat -c %s dist/cloudrun-$$arch/herald) bytes"; \
	done

# `sam build` (BuildMethod: makefile) runs build-<LogicalId> with
# ARTIFACTS_DIR set; template.yaml deploys arm64.
.PHONY: $(addprefix build-,$(SAM_FUNCTIONS))
$(addprefix build-,$(SAM_FUNCTIONS)):
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/cmd/lambda

# The gRPC API's code is generated from proto/ into gen/ and committed. buf
# is built at a pinned version into bin/tools/<version>/; the protoc
# plugins are go.mod tools (buf.gen.yaml runs `go tool protoc-gen-go`), so
# the output is the same byte for byte on every machine.
BUF_VERSION ?= v1.75.0
BUF         := bin/tools/$(BUF_VERSION)/buf

$(BUF):
	GOBIN=$(CURDIR)/bin/tools/$(BUF_VERSION) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)

.PHONY: generate
generate: $(BUF) ## Lint and format-check proto/ with buf, then regenerate gen/ from it
	$(BUF) lint
	$(BUF) format --diff --exit-code
	$(BUF) generate

# Releases are built by GoReleaser (.goreleaser.yaml), pinned like buf and
# built into bin/tools/; cyclonedx-gomod makes the SBOMs offline. On a
# commit tagged vX.Y.Z, `make release` builds that version; elsewhere, or
# with SNAPSHOT=1, a snapshot version (what CI builds). Nothing is
# published: the artifacts are in dist/release/.
GORELEASER_VERSION ?= v2.15.1
GORELEASER         := bin/tools/goreleaser-$(GORELEASER_VERSION)/goreleaser
CYCLONEDX_VERSION  ?= v1.10.0
CYCLONEDX_DIR      := bin/tools/cyclonedx-gomod-$(CYCLONEDX_VERSION)
SNAPSHOT           ?= $(if $(shell git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null),,1)

$(GORELEASER):
	GOBIN=$(CURDIR)/$(dir $(GORELEASER)) $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)

$(CYCLONEDX_DIR)/cyclonedx-gomod:
	GOBIN=$(CURDIR)/$(CYCLONEDX_DIR) $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_VERSION)

.PHONY: release
release: $(GORELEASER) $(CYCLONEDX_DIR)/cyclonedx-gomod ## Build versioned archives (local adapter, Lambda bootstrap, Cloud Run server; linux/darwin, amd64/arm64), checksums and SBOMs into dist/release/, and the TypeScript client's npm tarball
	$(GORELEASER) check
	PATH="$(CURDIR)/$(CYCLONEDX_DIR):$$PATH" $(GORELEASER) release --clean $(if $(SNAPSHOT),--snapshot) --parallelism 2
	$(MAKE) pack-ts

.PHONY: pack-ts
pack-ts: ## Pack the TypeScript client (npm pack: dist/, typings, README, CHANGELOG) into dist/release/
	mkdir -p dist/release
	cd $(TS_DIR) && npm ci --no-audit --no-fund --loglevel=error && npm pack --pack-destination $(CURDIR)/dist/release
