// Package store keeps prchat's data — repositories, reviews, conversations,
// turns and their transcripts — in Postgres or in an embedded SQLite file,
// and implements the store interfaces of chat's roles on top of them.
//
// Open picks the database from Config: a postgres:// URL for production, or
// a SQLite file (pure Go, no cgo) for the single-process default. Migrate
// applies the versioned SQL migrations embedded in the binary, one set per
// dialect, so both databases hold the same tables and rules.
//
// The database enforces the rules that must hold across processes:
//
//   - the busy rule: a partial unique index allows at most one queued or
//     running turn per conversation; AddTurn reports its violation as
//     chat.CodeBusy;
//   - review versions are unique per pull request and numbered 1, 2, ...;
//   - fencing: ClaimTurn takes a fresh token on the turn row with a
//     compare-and-swap, and AppendEvents, FinishTurn and SettleTurn only
//     change a turn whose token is the caller's (or take a new one), so a
//     stale run of a redelivered job can store nothing.
//
// On SQLite all writes go through a single connection in WAL mode, so
// concurrent writers queue in the connection pool instead of failing with
// SQLITE_BUSY, while reads use a pool of read-only connections. The driver
// is modernc's; each connection keeps the statements it ran prepared (SQLite
// compiles a statement for longer than a turn's statements take to run),
// and gorm speaks to it through a small dialect of the store's own.
//
// New conversations asked for at the same time are committed together (see
// CreateConversation), since under load the commit, not the inserts, is
// what an ask costs the database.
//
// On Postgres the statements of the runs of turns (claims, appends of
// events, finishes) go through one lane: what the runs of a process submit
// while the lane's last batch is at the database goes together in the next
// batch, pipelined in one round trip and committed in one transaction (see
// lane, on a handoff.Line). A lone statement goes at once; under load the
// runs share a round trip and a flush of the write-ahead log, and each
// process keeps one connection busy instead of one a run. Each statement
// changes only its own turn and what belongs to it, so a batch whose
// transaction a statement's error aborted is sent again statement by
// statement, and each caller hears its own outcome.
//
// On Postgres a claim commits without waiting for its write-ahead log to
// reach the disk (synchronous_commit off for the claim's own transaction,
// set by its statement) when its batch holds only claims; every other write
// waits as usual, and so does a claim that shares a batch with one. A claim
// is a lease, not a result: a crash of Postgres can lose only a claim after
// which nobody committed anything (any later commit's flush carries it, the
// run's own events included), which puts that turn back to queued at its
// old fence; the run that made it is fenced off at its next write and the
// turn is enqueued again. On the VM the bench ran on each flush cost a
// backend ~0.3 ms of CPU, and a run's claim and finish each waited for one
// before the claim became a lease.
//
// A turn's events go with their turn. On SQLite a foreign key does it; on
// Postgres a trigger on turns deletes the events of the turns a statement
// deleted (migration 00011), because the key checked every event row as it
// was inserted: a nested query and a row lock each, four of the six
// statements Postgres ran per turn of the bench. Nothing is lost by it:
// events are only inserted by the statement or transaction whose fenced
// update of the turn matched, and that update holds the turn's row until
// commit, so a delete either waits for the events and takes them or goes
// first and leaves the update nothing to match.
//
// Choices where the contract of chat's store interfaces is silent: listing the reviews or
// conversations of a PR that has none returns an empty list, of an unknown
// repository CodeRepositoryNotFound; a conversation is created on
// Conversation.ReviewID; CreatedAt, when the caller sets it, is kept (else
// the store's clock decides); an appended event whose Seq is already stored
// is skipped, so a retried append stores nothing twice; ClaimTurn may call
// allow more than once when the fence moves under it.
//
// Times are stored in UTC with microsecond precision (what Postgres keeps).
// JSON values — review sections, a turn's focus and answer, event data — are
// stored as TEXT; empty review sections are stored as NULL and read back as
// nil.
package store
