# Sekali: `make run` serves the app with demo data, `make test` runs every
# test. Both work on a fresh machine with PostgreSQL and Redis running.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO        ?= go
BIN       := bin/sekali
# The local defaults match docker-compose.yml; override any variable, e.g.
#   make run DATABASE_URL=postgres://me@localhost/sekali
export DATABASE_URL ?= postgres://postgres:postgres@127.0.0.1:5432/sekali?sslmode=disable

.PHONY: help
help: ## list the targets
	@grep -hE '^[A-Za-z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{ name[NR] = $$1; text[NR] = $$2; if (length($$1) > w) w = length($$1) } END { for (i = 1; i <= NR; i++) printf "  make %-" w "s  %s\n", name[i], text[i] }'

.PHONY: build
build: ## build bin/sekali (go build -v lists each package it compiles: the first build compiles them all)
	@test -x $(BIN) || echo "first build of $(BIN): downloading modules, then compiling every package, each listed as it compiles (about a minute on 2 idle cores)"
	$(GO) build -v -trimpath -o $(BIN) ./cmd/sekali

.PHONY: run
run: build ## migrate, seed and serve on :8080
	$(BIN) migrate up
	$(BIN) seed
	SANDBOX_GATEWAY=$${SANDBOX_GATEWAY:-on} $(BIN) serve

# How many test binaries run at once (go test -p; its default is the
# number of cores). The slow ones mostly wait (Asynq's leases, a browser,
# a killed process), so one more than two cores keeps them busy.
TEST_P ?= 3

.PHONY: test
test: test-deps loadtest-typecheck ## every Go test of both modules (the app's and loadtest/'s) with the race detector (needs PostgreSQL and Redis running; the k6 scripts' smoke run, make k6-smoke, is one of them), and the k6 type-check; installs what it needs first (make test-deps)
	@echo "compiling with the race detector: each package is listed as it compiles (the first time, all of them: a few minutes on 2 cores)"
	$(GO) build -race -v ./...
	$(GO) -C loadtest build -race -v ./...
	@echo "testing: each package's result is printed when it finishes; the slowest (the browser and the processes killed mid-work in cmd/sekali, the chaos rounds) take 2-4 minutes"
	@# go test -json streams each package's events as they come (plain go
	@# test holds a package's lines back until those listed before it are
	@# done); testreport turns them back into go test's lines. The
	@# timeout is a backstop for a hang, well above a busy machine's run:
	@# tests take their waits from it (testenv.Budget) and fail on
	@# conditions, not on the clock. testclean then drops the template
	@# database the test binaries shared (app/testenv). The QA rig is a
	@# module of its own (loadtest/go.mod): its tests run second, in the
	@# same report, and either module's failure fails the target.
	@set -o pipefail; \
	{ $(GO) test -race -count=1 -timeout 60m -p $(TEST_P) -json ./...; a=$$?; \
	  $(GO) -C loadtest test -race -count=1 -timeout 60m -p $(TEST_P) -json ./...; l=$$?; \
	  [ $$a -eq 0 ] && [ $$l -eq 0 ]; } | $(GO) run ./tools/testreport; status=$$?; \
	$(GO) run ./tools/testclean || echo "make test-clean failed: test databases may be left behind"; \
	exit $$status

.PHONY: test-quick
test-quick: ## the daily loop: go test -short (no race detector), without the browser, the killed processes, the failovers, the fork and deletion proofs, the chaos rounds and the k6 scripts (make test runs them all); needs PostgreSQL and redis-server
	@set -o pipefail; \
	$(GO) test -short -count=1 -timeout 20m -p $(TEST_P) -json ./... | $(GO) run ./tools/testreport; status=$$?; \
	$(GO) run ./tools/testclean || echo "make test-clean failed: test databases may be left behind"; \
	exit $$status

.PHONY: test-deps
test-deps: ## install what the tests run besides Go when it is missing: Chromium, PgBouncer, Node.js with npm, redis-server, promtool (Debian's prometheus) (apt-get, with sudo when not root; TEST_DEPS=check only says what to run)
	@./tools/testdeps.sh

.PHONY: loadtest-typecheck
loadtest-typecheck: ## type-check the k6 scripts against @types/k6 (needs Node.js and npm)
	cd loadtest && npm ci --no-audit --no-fund --loglevel=error && npm run --silent typecheck

# The k6 scripts run in Go (loadtest/k6smoke): make test runs them with
# every other package of the QA module, so k6-smoke is not one of its
# prerequisites; it is for running them alone.
.PHONY: k6-smoke
k6-smoke: ## run every k6 script at smoke scale without k6 (loadtest/k6smoke: goja and esbuild) against a server it starts on a fresh database, or K6_SMOKE_TARGET: their logic, signing and checks, not load; make test runs it too
	$(GO) -C loadtest test -race -count=1 ./k6smoke/...

.PHONY: generate
generate: ## regenerate the templ components (web/**/*_templ.go) and docs/debugging.md; commit what changes
	$(GO) tool templ generate -path web/views
	$(GO) tool templ generate -path web/sandboxgw
	$(GO) test ./web/views -run '^TestDebuggingGuideDoc$$' -update >/dev/null

.PHONY: check
check: ## vet, staticcheck, and check that gofmt and go mod tidy leave the tree alone (make test checks the generated code)
	$(GO) vet ./...
	$(GO) -C loadtest vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	$(GO) -C loadtest run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt would change the files above"; exit 1; }
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }
	@$(GO) -C loadtest mod tidy -diff || { echo "loadtest/go.mod or loadtest/go.sum is not tidy: run go mod tidy in loadtest/"; exit 1; }

.PHONY: migrate-new
migrate-new: ## create the next migration: make migrate-new name=add_things
	@test -n "$(name)" || { echo "usage: make migrate-new name=what_it_does"; exit 2; }
	@last=$$(ls migrations/*.sql | sed -E 's|.*/0*([0-9]+)_.*|\1|' | sort -n | tail -1); \
	 file=$$(printf "migrations/%05d_%s.sql" $$((last + 1)) "$(name)"); \
	 printf -- '-- +goose Up\n\n-- +goose Down\n' > $$file; echo "created $$file"

.PHONY: fuzz
fuzz: ## fuzz each gateway's callback parser, the canonicaliser and the amount parser for 30s each
	$(GO) test -run='^$$' -fuzz=FuzzSandboxParse -fuzztime=30s ./app/gateways/sandbox/
	$(GO) test -run='^$$' -fuzz=FuzzStripeParse -fuzztime=30s ./app/gateways/stripe/
	$(GO) test -run='^$$' -fuzz=FuzzMidtransParse -fuzztime=30s ./app/gateways/midtrans/
	$(GO) test -run='^$$' -fuzz=FuzzXenditParse -fuzztime=30s ./app/gateways/xendit/
	$(GO) test -run='^$$' -fuzz=FuzzCanonicalize -fuzztime=30s ./app/canonjson/
	$(GO) test -run='^$$' -fuzz=FuzzParseAmount -fuzztime=30s ./app/payments/

.PHONY: bench
bench: build ## the goals of docs/performance.md: server CPU per callback ÷ per /healthz, the pipeline ÷ the callbacks, a guarded job ÷ a bare one, paid → email latency; the pgbench ceiling, a pool sweep, the admin console on 200k orders (loadtest/results/), then the Go benchmarks; BENCH_FLAGS=-only=callbacks|admin|pipeline, -profile
	$(GO) -C loadtest run ./bench -bin ../$(BIN) $(BENCH_FLAGS)
	$(GO) test -run='^$$' -bench=. -benchmem ./web/

BOOKS_CHECKS ?= 2000
CHAOS_ROUNDS ?= 20

.PHONY: chaos
chaos: build ## under duplicate storms, Pay presses and refunds, kill processes, empty Redis, cut PostgreSQL and fail the calls to an emulated Stripe; the audit and the gateway judge each round (CHAOS_ROUNDS=20, CHAOS_FLAGS=-seed=N -v); then the books test, BOOKS_CHECKS runs of the model (2000; make test runs 100)
	$(GO) -C loadtest run ./chaos -bin ../$(BIN) -rounds $(CHAOS_ROUNDS) $(CHAOS_FLAGS)
	$(GO) test -count=1 -timeout 0 -run '^TestBooks$$' ./app/audit -rapid.checks=$(BOOKS_CHECKS)

.PHONY: test-clean
test-clean: ## drop what test runs of this checkout left: its template databases and its test databases nobody is connected to, over 1h old (tools/testclean; make test runs it when done)
	$(GO) run ./tools/testclean

.PHONY: rename
rename: ## make this checkout your fork: MODULE=github.com/acme/tokoku [NAME=tokoku [TITLE=TokoKu]] rewrites the module path and, with NAME, the binary, metrics, databases, image and product name (tools/rename)
	@test -n "$(MODULE)" || { echo "usage: make rename MODULE=github.com/acme/tokoku [NAME=tokoku [TITLE=TokoKu]]"; exit 2; }
	$(GO) run ./tools/rename -module '$(MODULE)' $(if $(NAME),-name '$(NAME)') $(if $(TITLE),-title '$(TITLE)')
