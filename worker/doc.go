// Package worker is prchat's Redis adapter, for API and worker processes
// alike: everything prchat keeps in Redis or does through asynq is here.
//
// Every process (an API too) uses:
//
//   - Queue (chat.Queue): enqueues, routes and cancels turn jobs on asynq;
//     Hosts (chat.Hosts): which workers are alive and where a session is
//     warm;
//   - Events (chat's Publisher and Follower): a turn's live events on Redis
//     streams, read by one reader per process;
//   - RateLimiter (chat.RateLimiter): the deployment-wide question limits;
//   - Metrics and ReplyMetrics (chat's observers, on Prometheus), and
//     NewQueueMonitor (asynqmon's dashboard, mounted by the API);
//   - NewRedisClient, OpenRedis and StartEmbeddedRedis (the embedded Redis
//     of prchat serve);
//   - DefaultConcurrency (capacity.go): the turns a worker host runs at
//     once unless told, from its memory and cores.
//
// A worker process also runs the long-lived parts (each with Start and
// Stop, see lifecycle.go):
//
//   - Server consumes the shared queue "turns" and the worker's own queue
//     "host:<id>" (preferred), and hands each "turn:run" task to a TurnRunner
//     (chat's Service) with the worker's runner id. The sole worker of an
//     embedded Redis consumes the shared queue alone.
//   - Heartbeat tells the other processes that this worker run is alive: a
//     Redis key prchat:worker:<id> holding the run's instance id, with a TTL.
//   - Reconciler compares the pending turns (the database is the source of
//     truth) with the jobs in Redis and repairs the difference: it enqueues
//     jobs that Redis lost, settles turns whose job failed for good, moves
//     jobs out of dead hosts' queues, and hands the turns of dead workers to
//     live ones sooner than asynq's own recovery (60-120 s). Every worker
//     process runs one; the one holding the lease prchat:reconciler:lease
//     makes the deployment's passes.
//   - Outbox posts the answers of webhook questions back to their forge.
//
// # Jobs
//
// A turn's job is an asynq task of type "turn:run" whose payload is
// {"turn_id": "..."} and whose TaskID is the turn id, on the queue "turns"
// or "host:<id>". asynq refuses a second task with the same id in the same
// queue, which makes enqueueing idempotent. Completed tasks are not kept.
//
// A rescue job, enqueued by the Reconciler for a turn whose worker died
// while asynq still counts the old task as active, has the TaskID
// "<turn id>~<fence>" (RescueTaskID) so that it does not conflict with the
// stale task, and always goes to the shared queue. The fence makes it
// idempotent per run: one rescue per takeover. When asynq later re-delivers
// the stale task, chat refuses the claim (a live run holds the turn) and the
// task ends as a no-op. The ids of a turn's rescue jobs are kept in the
// Redis set prchat:rescues:<turn id> so that Cancel and the Reconciler find
// them.
//
// # Polling and wake-ups
//
// asynq polls a worker's queues, one Redis script call per queue, and
// cannot be woken. The Server gives asynq a client (idlePoller) that holds
// the first poll of a round that follows an empty one: for
// ServerConfig.TaskCheckInterval (PRCHAT_POLL_INTERVAL, 5ms) while the
// queues have been empty for less than a second, then for
// IdlePollInterval (PRCHAT_IDLE_POLL_INTERVAL, 1s). A wake-up ends the
// wait at once: a job that a Queue enqueues on an empty queue is announced
// on the Redis pub/sub channel WakeChannel (prchat:wake:<db>:<queue>;
// published by a background goroutine, coalesced, off the caller's path;
// a queue with jobs waiting has no worker waiting, so under load nothing
// is published), to which each Server subscribes on one connection; a
// retry or scheduled job that asynq's forwarder makes pending wakes its
// own worker. A lost wake-up costs at most one idle interval; Stop ends a
// wait under way.
//
// The same client answers the first poll of each round from all of the
// worker's queues in one script of its own (asynq's dequeue over the
// queues in asynq's order: the host queue, then the shared one), so that
// taking a job of the shared queue, or finding both empty, costs one round
// trip to Redis instead of two; asynq reads a job's queue from the job, so
// a job of the shared queue can answer the poll of the host queue, and the
// poll of the shared queue that follows an empty answer is answered empty
// without asking again. The script declares every key it names but the
// jobs' own (as asynq's does), and its queues' keys have different hash
// tags, which is one more reason Redis Cluster is not a supported target.
//
// # Round trips
//
// A turn costs Redis few round trips: an enqueue's registration of its
// queue and the feed's news ride in the pipeline of asynq's enqueue script
// (Queue talks to asynq's client through a client that sends a script
// call's riders ahead of it, and enqueues made while another's pipeline is
// out share the next one: the asks of one batch enqueue in one round trip;
// riders.go, on a handoff.Line); a worker's round of polls is one script
// call (above); and the publish of a turn's final events in its job's
// handler waits for asynq's script call that ends the job (done, retry,
// archive or requeue) and goes ahead of it in one pipeline
// (ServerConfig.Events; finals.go), or by itself if no such call comes
// within a quarter of a second or the Server stops first. The same pipeline
// takes the next job of the worker's queues ahead (prefetch.go) while the
// queues had one at the last poll, and asynq's next poll, which comes as
// soon as the ended job frees its slot, is answered with it without asking
// Redis: a worker draining a backlog costs Redis one round trip a job. A
// job taken ahead that no poll takes within two seconds, or that the Server
// holds when it stops, goes back to the head of its queue; one a crashed
// process held stays active under asynq's lease, as a job it was running
// does, until asynq's recoverer ends the lease.
//
// # Identity
//
// Each worker process has an id (PRCHAT_WORKER_ID, by default its host name)
// and a random instance id chosen at start; its runner id is
// "<id>/<instance>" (Identity.Runner). A turn records the runner that holds
// it, and a restarted worker, having a new instance id, does not count as the
// run that held its turns before.
//
// # Wiring
//
// One go-redis client (NewRedisClient or OpenRedis; with no URL configured,
// StartEmbeddedRedis and its Client, which connects in memory) serves every
// part of a process. A worker process
// starts, in this order: Heartbeat (so that its runner counts as alive
// before it claims turns), Server, Reconciler.Start (which tries the
// deployment's reconciler lease and, if it took it, makes its first pass
// in the background, so that the process serves while a backlog is
// reconciled); it stops in the reverse order, the Heartbeat last.
// An API-only process needs Queue, Hosts, Events and RateLimiter.
package worker
