package worker

import (
	"net/http"

	"github.com/hibiken/asynqmon"
	"github.com/redis/go-redis/v9"
)

// sharedClient hands asynq an existing client instead of a new connection
// (asynq.RedisConnOpt), so the monitor works on the embedded Redis too.
type sharedClient struct{ c redis.UniversalClient }

func (s sharedClient) MakeRedisClient() any { return s.c }

// NewQueueMonitor returns asynqmon's web UI of the queues in rdb, served
// under root (e.g. /admin/queues). It reads and changes the queues through
// asynq's Inspector: retrying, archiving or deleting jobs, which the
// reconciler then settles as it would any lost job. It never closes rdb.
func NewQueueMonitor(rdb redis.UniversalClient, root string) http.Handler {
	return asynqmon.New(asynqmon.Options{
		RootPath:     root,
		RedisConnOpt: sharedClient{rdb},
	})
}
