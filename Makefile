# prchat — build and test.

GO ?= go

.PHONY: test test-bench test-chaos test-pgbouncer build bench-build lint serve

# test runs every test: the embedded SQLite and Redis by default, the real
# Postgres and Redis when PRCHAT_TEST_DATABASE_URL / PRCHAT_TEST_REDIS_URL are set.
# A test waits for what it awaits up to 30 s; PRCHAT_TEST_TIMEOUT_SCALE=3
# triples that (and every scaled deadline) on a slow machine.
test:
	$(GO) test -count=1 -timeout 30m ./...

# test-bench runs the whole bench (cmd/prchat-bench) in a tiny
# configuration, and its running phase (kill and takeover) on the real
# Postgres and Redis when set, on a prchat built with -tags prchatbench (it
# boots daemons for a while; .ci/run runs it after test); and the tests of
# that build's bench agent; and the webhook latency measurement (200
# deliveries through a serve daemon, figures printed).
test-bench:
	PRCHAT_TEST_BENCH=1 $(GO) test -count=1 -timeout 10m -run '^TestBench(Running)?$$' ./cmd/prchat-bench
	$(GO) test -tags prchatbench -count=1 -run '^Test(No)?BenchAgent$$' ./cmd/prchat
	PRCHAT_TEST_BENCH=1 $(GO) test -count=1 -timeout 15m -v -run '^TestWebhookLatency$$' ./cmd/prchat

# test-pgbouncer runs the store's suite through a PgBouncer (transaction
# pooling) in front of PRCHAT_TEST_DATABASE_URL's Postgres.
test-pgbouncer:
	.ci/with-pgbouncer $(GO) test -count=1 -timeout 10m ./store/...

# test-chaos runs the fault-injection suite (cmd/prchat/chaos): its own
# Postgres and Redis, prchat processes it kills, stalls, stops and flushes.
test-chaos:
	$(GO) test -tags chaos -count=1 -timeout 15m -v ./cmd/prchat/chaos/...

build:
	$(GO) build -o bin/prchat ./cmd/prchat

# bench-build builds the bench and the daemon it drives: prchat with its
# zero-latency agent (-tags prchatbench), which a production build lacks.
bench-build:
	$(GO) build -o bin/prchat-bench ./cmd/prchat-bench
	$(GO) build -tags prchatbench -o bin/prchat-benchd ./cmd/prchat

lint:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	$(GO) vet ./...
	$(GO) vet -tags chaos ./cmd/prchat/chaos/...
	$(GO) vet -tags prchatbench ./cmd/prchat
	staticcheck ./...
	staticcheck -tags chaos ./cmd/prchat/chaos/...
	staticcheck -tags prchatbench ./cmd/prchat

serve:
	$(GO) run ./cmd/prchat serve
