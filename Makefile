# Pin promotion module. `make` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO            ?= go
# go.mod's toolchain line names the patched Go every target builds with. Some Go
# installs (golang images, distribution packages) default to GOTOOLCHAIN=local,
# which ignores it; auto honours it. A GOTOOLCHAIN set in the environment wins.
export GOTOOLCHAIN ?= auto
BIN           := bin/pin
PIN_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
export PIN_TEST_DATABASE_URL
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The vulnerability gate: govulncheck, and the golang.org/x/vulndb snapshot its
# database is built from (scripts/vulndb.sh). `make vuln-refresh` raises
# VULNDB_VERSION to the newest on the module proxy. The limits on the
# database's age are set here and nowhere else: past VULNDB_WARN_AGE_DAYS a
# warning; past VULNDB_MAX_AGE_DAYS the database is stale, which `make vuln`
# (CI) prints as a loud warning and `make vuln-release` (the release step)
# refuses (docs/adr/0011-toolchain-and-vulnerability-gate.md).
GOVULNCHECK    := golang.org/x/vuln/cmd/govulncheck@v1.9.0
VULNDB_VERSION := v0.0.0-20261105234957-e22db6528018
VULNDB_WARN_AGE_DAYS ?= 7
VULNDB_MAX_AGE_DAYS  ?= 45
VULN_STALE_DB        ?= warn
# The version and commit a binary reports (pin version, pin_build_info): linked
# here, so that GOFLAGS=-buildvcs=false cannot take them away (docs/releasing.md).
VERSION       ?= $(shell scripts/version.sh 2>/dev/null || echo dev)
REVISION      ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILDINFO     := github.com/pinmarket/pin/platform/buildinfo
GOFLAGS_BUILD := -trimpath -ldflags "-s -w -X $(BUILDINFO).linkedVersion=$(VERSION) -X $(BUILDINFO).linkedRevision=$(REVISION)"

.PHONY: help dev test test-short fuzz bench lint vuln vuln-release vuln-refresh build build-production image migrate clean check-postgres

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-17s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/pin
	@echo "Compiling $(BIN). The first build on a machine downloads the modules and compiles every dependency:"
	@echo "a few minutes with no output. Later builds take seconds."
	$(GO) build $(GOFLAGS_BUILD) -o $(BIN) ./cmd/pin

build-production: ## build bin/pin-production as the image does (-tags production: no pin dev, no test broker)
	$(GO) build -tags production $(GOFLAGS_BUILD) -o $(BIN)-production ./cmd/pin

image: ## build the container image pin:$(scripts/version.sh), with that version inside
	docker build --build-arg VERSION="$(VERSION)" --build-arg REVISION="$(REVISION)" -t pin:"$(VERSION)" .

dev: ## run the module on this machine: API, expiry job, outbox relay and an embedded Kafka-protocol broker
	@./scripts/check-postgres.sh "$${PIN_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/pin?sslmode=disable}"
	@$(MAKE) --no-print-directory build
	./$(BIN) dev

# Go modules of their own inside the repository, which ./... does not descend
# into: the event contract and its conformance kit (docs/adr/0022), and the
# schema compatibility gate every module's contract may take (ADR 0030).
NESTED_MODULES := modules/promotion/contract platform/schemacompat

# The test-only modules (cmd/pin/testdata/modules), registered in a build with
# this tag: make test and make lint run with them, no shipped binary has them.
TEST_TAGS    := pintestmodules
TEST_MODULES := ./cmd/pin/testdata/modules/reviews

test: check-postgres ## run every test with the race detector against PIN_TEST_DATABASE_URL (the contract's own module too, and the test-only modules registered)
	$(GO) test -race -count=1 -timeout 20m -tags $(TEST_TAGS) ./...
	@set -e; for m in $(NESTED_MODULES); do echo "== $$m"; (cd $$m && $(GO) test -race -count=1 -timeout 20m ./...); done

bench: check-postgres ## run the benchmarks and write the raw figures to .bench/
	./scripts/bench.sh

# The fuzz targets, as package:Target: the event contract's decoder, the list
# cursor, bearer tokens, request-body binding (docs/adr/0005-hostile-input.md)
# and any record's bytes through the consumer kit, on PostgreSQL (ADR 0006).
# FUZZTIME is a duration, or a count of inputs (5000x) as .ci/run uses.
FUZZTIME     ?= 10s
FUZZ_TARGETS := ./modules/promotion/contract:FuzzDecode ./modules/promotion/internal/app:FuzzDecodeCursor \
                ./platform/auth:FuzzAuthenticate ./platform/httpserver:FuzzDecodeJSON \
                ./platform/consumer:FuzzAnyRecordIsAppliedOrDeadLetteredAndTheNextApplied

fuzz: ## run each fuzz target for FUZZTIME (default 10s): contract decoder, list cursor, tokens, request binding, consumer records
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; echo "== $$name ($$pkg, $(FUZZTIME))"; \
	  dir=.; if [ -f $$pkg/go.mod ]; then dir=$$pkg; pkg=.; fi; \
	  (cd $$dir && $(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) $$pkg); \
	done

lint: ## gofmt, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags $(TEST_TAGS) ./cmd/pin $(TEST_MODULES)
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags $(TEST_TAGS) ./cmd/pin $(TEST_MODULES)
	@set -e; for m in $(NESTED_MODULES); do echo "== $$m"; (cd $$m && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...); done

vuln: ## govulncheck on the module: fails on a reachable vulnerability not in docs/vuln-exceptions.txt or an exception past its review-by date; a database older than VULNDB_MAX_AGE_DAYS is a loud warning
	@db=$$(./scripts/vulndb.sh $(VULNDB_VERSION)) && set -o pipefail && \
	  $(GO) run $(GOVULNCHECK) -db "file://$$PWD/$$db" -format json ./... | $(GO) run ./scripts/vulngate -exceptions docs/vuln-exceptions.txt \
	    -db-version $(VULNDB_VERSION) -warn-age-days $(VULNDB_WARN_AGE_DAYS) -max-age-days $(VULNDB_MAX_AGE_DAYS) -stale-db $(VULN_STALE_DB)

vuln-release: ## the release step's gate: make vuln, and a database older than VULNDB_MAX_AGE_DAYS fails it
	@$(MAKE) --no-print-directory vuln VULN_STALE_DB=fail

vuln-refresh: ## set VULNDB_VERSION to the newest golang.org/x/vulndb on the module proxy (then run make vuln)
	@v=$$(cd / && $(GO) list -m -f '{{.Version}}' golang.org/x/vulndb@latest) && \
	  sed -i.bak "s/^VULNDB_VERSION := .*/VULNDB_VERSION := $$v/" Makefile && rm -f Makefile.bak && \
	  echo "VULNDB_VERSION := $$v ($$(cd / && $(GO) list -m -f '{{.Time}}' golang.org/x/vulndb@$$v))"

migrate: build ## apply the migrations to PIN_DATABASE_URL
	./$(BIN) migrate up

clean: ## remove build and benchmark output
	rm -rf bin .bench

check-postgres:
	@./scripts/check-postgres.sh
