// Package chaos holds prchat's fault-injection suite. It is built only with
// the chaos tag and kept out of `make test`:
//
//	go test -tags chaos -count=1 -v ./cmd/prchat/chaos/...
//
// The suite builds the prchat binary, starts a Postgres of its own (initdb
// into a temporary directory, on a free port; as an unprivileged user when
// it runs as root) and a redis-server of its own for each cluster, then runs
// `prchat api` and two `prchat worker` processes against them. The workers
// use the real openai backend, pointed at a fake chat-completions endpoint in
// the test process that answers every turn with a valid answer after a
// delay, so that turns are running when a fault hits. The fake is the
// suite's own (model_test.go), a few lines of the streaming protocol, so
// that it depends on nothing but the protocol go-openai speaks.
//
// One cluster's workers run the real Claude Code and Codex CLIs instead
// (PRCHAT_TEST_CLAUDE_BIN / PRCHAT_TEST_CODEX_BIN or their CI install
// place; missing CLIs skip that trial unless CI is set), against the fake
// model APIs of agentsession/fakeapi, holding conversations about reviews
// written on "laptops" that are gone: the worker holding them is killed in
// the middle of a turn, and every turn must resume on the other worker
// from its stored session file, with the whole history, never seeded.
//
// Its trials kill (SIGKILL), stall (SIGSTOP/SIGCONT) and stop (SIGTERM)
// workers, stop the API under its SSE subscribers, flush Redis with turns
// queued and running, stop Postgres for 10 s under 20 asks a second, and
// delete conversations whose turns run.
// After each one it checks that every accepted question was settled once
// (one done event, one stored answer, succeeded), that none is stuck, that
// no request got a 500, and that no client-visible text (turn notes and
// reasons, SSE events, transcripts, API errors) names the database, its
// host and port, the Redis address, the binary's path or a key. It logs the
// distributions it measured (kill → re-run, kill → settled, outage →
// recovered, asks refused while down).
//
// It never touches another Postgres or Redis than the ones it started.
package chaos
