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
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

.PHONY: build
build: ## build bin/sekali
	$(GO) build -trimpath -o $(BIN) ./cmd/sekali

.PHONY: run
run: build ## migrate, seed and serve on :8080
	$(BIN) migrate up
	$(BIN) seed
	$(BIN) serve

.PHONY: test
test: loadtest-typecheck ## every Go test with the race detector (needs PostgreSQL and Redis), and the k6 type-check
	$(GO) test -race -count=1 -timeout 20m ./...

.PHONY: loadtest-typecheck
loadtest-typecheck: ## type-check the k6 scripts against @types/k6 (needs Node.js and npm)
	cd loadtest && npm ci --no-audit --no-fund --loglevel=error && npm run --silent typecheck

.PHONY: check
check: ## vet, staticcheck, and check that gofmt leaves the tree alone
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt would change the files above"; exit 1; }

.PHONY: migrate-new
migrate-new: ## create the next migration: make migrate-new name=add_things
	@test -n "$(name)" || { echo "usage: make migrate-new name=what_it_does"; exit 2; }
	@last=$$(ls migrations/*.sql | sed -E 's|.*/0*([0-9]+)_.*|\1|' | sort -n | tail -1); \
	 file=$$(printf "migrations/%05d_%s.sql" $$((last + 1)) "$(name)"); \
	 printf -- '-- +goose Up\n\n-- +goose Down\n' > $$file; echo "created $$file"

.PHONY: fuzz
fuzz: ## fuzz the callback parser and the canonicaliser for 30s each
	$(GO) test -run='^$$' -fuzz=FuzzSandboxParse -fuzztime=30s ./app/payments/
	$(GO) test -run='^$$' -fuzz=FuzzCanonicalize -fuzztime=30s ./app/canonjson/

.PHONY: bench
bench: build ## ratios against the /healthz and pgbench ceilings (loadtest/results/), then the Go benchmarks
	$(GO) run ./loadtest/bench -bin $(BIN)
	$(GO) test -run='^$$' -bench=. -benchmem ./web/

.PHONY: test-clean
test-clean: ## drop every test database and template left on the local server
	@psql "$${SEKALI_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}" -Atc \
	  "SELECT datname FROM pg_database WHERE datname LIKE 'sekali\_test\_%' OR datname LIKE 'sekali\_tmpl\_%'" | \
	  while read -r db; do psql "$${SEKALI_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}" -qc "DROP DATABASE \"$$db\" WITH (FORCE)"; echo "dropped $$db"; done
