# Herald's developer commands. `make help` lists them.
SHELL := /bin/bash
GO    ?= go
PKGS  ?= ./...

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets with a line each
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## Run Herald locally on 127.0.0.1:8080 over in-memory drivers (HERALD_* variables override)
	$(GO) run ./local/cmd/herald

.PHONY: test
test: ## Run every test (in-memory and real-server suites) with the race detector
	$(GO) test -race -count=1 -timeout 40m $(PKGS)

.PHONY: bench
bench: ## Run the end-to-end HTTP benchmark and the backend benchmarks; prints events/s and latencies
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x ./bench/...

.PHONY: lint
lint: ## gofmt, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

.PHONY: build
build: ## Build the local adapter into bin/
	CGO_ENABLED=0 $(GO) build -o bin/herald ./local/cmd/herald
