# prchat — build and test.

GO ?= go

.PHONY: test build lint serve

# test runs every test: the embedded SQLite and Redis by default, the real
# Postgres and Redis when PRCHAT_TEST_DATABASE_URL / PRCHAT_TEST_REDIS_URL are set.
test:
	$(GO) test -count=1 -timeout 30m ./...

build:
	$(GO) build -o bin/prchat ./cmd/prchat

lint:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	$(GO) vet ./...
	staticcheck ./...

serve:
	$(GO) run ./cmd/prchat serve
