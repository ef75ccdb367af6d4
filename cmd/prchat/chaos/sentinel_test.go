//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sentinelMaster is the master's name the sentinels watch.
const sentinelMaster = "chaos"

// sentinels is a Redis Sentinel deployment of the suite's own: a master, a
// replica and three redis-sentinel processes (Debian's), all on free
// loopback ports, with a password on the master and the replica.
type sentinels struct {
	password  string
	master    *redisServer
	replica   *redisServer
	sentinels []*redisServer
}

// startSentinels starts the master, its replica and three sentinels that
// watch it (quorum 2, a master down after 1 s), and waits until the replica
// has synced and every sentinel knows the replica and the other two.
func startSentinels(dir string) (*sentinels, error) {
	s := &sentinels{password: "chaos-redis-" + randomHex(12)}
	var err error
	if s.master, err = startRedisServer(dir, "redis-master", s.password); err != nil {
		return nil, err
	}
	if s.replica, err = startRedisServer(dir, "redis-replica", s.password, "--replicaof", "127.0.0.1", fmt.Sprint(s.master.port)); err != nil {
		s.close()
		return nil, err
	}
	for i := range 3 {
		name := fmt.Sprintf("sentinel%d", i+1)
		conf := filepath.Join(dir, name+".conf") // a sentinel rewrites its file
		text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\n"+
			"sentinel auth-pass %[1]s %[3]s\n"+
			"sentinel down-after-milliseconds %[1]s 1000\n"+
			"sentinel failover-timeout %[1]s 10000\n"+
			"sentinel parallel-syncs %[1]s 1\n", sentinelMaster, s.master.port, s.password)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			s.close()
			return nil, err
		}
		r, err := launchRedis(dir, name, "redis-sentinel", "", func(port string) []string {
			return []string{conf, "--port", port, "--bind", "127.0.0.1", "--dir", dir}
		})
		if err != nil {
			s.close()
			return nil, err
		}
		s.sentinels = append(s.sentinels, r)
	}
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready, why := s.ready(ctx)
		if ready {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.close()
			return nil, fmt.Errorf("sentinel deployment not ready within 30s: %s", why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ready reports whether the replica has synced with the master and every
// sentinel knows the replica and both other sentinels; else why not.
func (s *sentinels) ready(ctx context.Context) (bool, string) {
	info, err := s.replica.client.Info(ctx, "replication").Result()
	if err != nil || !strings.Contains(info, "master_link_status:up") {
		return false, fmt.Sprintf("replica not synced (%v)", err)
	}
	for i, sn := range s.sentinels {
		others, err := sn.client.Do(ctx, "SENTINEL", "sentinels", sentinelMaster).Slice()
		if err != nil || len(others) != len(s.sentinels)-1 {
			return false, fmt.Sprintf("sentinel %d knows %d other sentinels (%v)", i+1, len(others), err)
		}
		replicas, err := sn.client.Do(ctx, "SENTINEL", "replicas", sentinelMaster).Slice()
		if err != nil || len(replicas) != 1 {
			return false, fmt.Sprintf("sentinel %d knows %d replicas (%v)", i+1, len(replicas), err)
		}
	}
	return true, ""
}

// url is the PRCHAT_REDIS_URL of the deployment.
func (s *sentinels) url() string {
	addrs := make([]string, len(s.sentinels))
	for i, sn := range s.sentinels {
		addrs[i] = sn.addr()
	}
	return fmt.Sprintf("redis-sentinel://:%s@%s/0?master=%s", s.password, strings.Join(addrs, ","), sentinelMaster)
}

// masterPort is the port of the master the first sentinel that answers
// names.
func (s *sentinels) masterPort(ctx context.Context) (string, error) {
	var errs []error
	for _, sn := range s.sentinels {
		addr, err := sn.client.Do(ctx, "SENTINEL", "get-master-addr-by-name", sentinelMaster).StringSlice()
		if err == nil && len(addr) == 2 {
			return addr[1], nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

func (s *sentinels) close() {
	for _, r := range append(append([]*redisServer{}, s.sentinels...), s.replica, s.master) {
		if r != nil {
			r.close()
		}
	}
}

// TestRedisFailover kills the Redis master (SIGKILL) of a cluster that
// reaches Redis through three sentinels, while clients ask 20 questions a
// second with turns running. The sentinels promote the replica; prchat's
// clients (go-redis failover clients from its redis-sentinel:// URL) find
// it. While no master is reachable an ask may be refused, always with 503
// unavailable and a trace id; every ask accepted, before, during or after,
// is answered once.
func TestRedisFailover(t *testing.T) {
	c := newCluster(t, "failover", clusterConfig{concurrency: 16, sentinel: true})
	ctx := context.Background()
	var killedAt, promotedAt time.Time
	fault := make(chan struct{})
	go func() {
		defer close(fault)
		time.Sleep(outageBefore)
		killedAt = time.Now()
		c.sentinel.master.cmd.Process.Signal(syscall.SIGKILL)
		want := fmt.Sprint(c.sentinel.replica.port)
		for time.Since(killedAt) < time.Minute {
			if port, err := c.sentinel.masterPort(ctx); err == nil && port == want {
				promotedAt = time.Now()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("the sentinels did not promote the replica within a minute")
	}()
	log := c.askAtRate(outageRate, time.Now().Add(outageBefore+outageFor+outageAfter), 1500*time.Millisecond)
	<-fault
	if promotedAt.IsZero() {
		t.FailNow()
	}

	c.settle(log.accepted, time.Now().Add(2*time.Minute))
	c.verify(t, "Redis master killed", log.accepted)
	wasted := countWasted(t, "Redis master killed", log.accepted)

	// The asks from the kill until the first one accepted after it.
	var back time.Duration = -1
	for _, a := range log.asks {
		if a.status == http.StatusAccepted && !a.at.Before(killedAt) && (back < 0 || a.at.Sub(killedAt) < back) {
			back = a.at.Sub(killedAt)
		}
	}
	during := map[string]int{}
	hit := 0
	for _, a := range log.asks {
		if !a.at.Before(killedAt) && a.at.Before(killedAt.Add(max(back, 0))) {
			during[fmt.Sprint(a.status)]++
		}
	}
	for _, tr := range log.accepted {
		if tr.acceptedAt.Before(killedAt) && (tr.final.FinishedAt == nil || tr.final.FinishedAt.After(killedAt)) {
			hit++
		}
	}
	// When turns asked after the kill ran again, and when all had settled.
	var firstRun, lastSettled time.Duration = -1, 0
	for _, tr := range log.accepted {
		if tr.final.FinishedAt != nil {
			lastSettled = max(lastSettled, tr.final.FinishedAt.Sub(killedAt))
		}
		if calls := lab.model.Calls(tr.token); tr.acceptedAt.After(killedAt) && len(calls) > 0 && (firstRun < 0 || calls[0].At.Sub(killedAt) < firstRun) {
			firstRun = calls[0].At.Sub(killedAt)
		}
	}
	failed := len(log.accepted) - succeeded(log.accepted)
	r := func(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
	figure(t, "Redis master killed under %d asks/s (Sentinel: 1 replica, 3 sentinels, down after 1s): %d asks, %d accepted, %d of them queued or running at the kill; %d accepted turns not answered, %d wasted model calls; kill → replica promoted %s, → first ask accepted %s, → a turn asked after it first ran %s, → all settled %s; asks refused until the first accepted, by status: %s; polls by status: %s",
		outageRate, len(log.asks), len(log.accepted), hit, failed, wasted,
		r(promotedAt.Sub(killedAt)), r(back), r(firstRun), r(lastSettled), counts(during), counts(log.polls))
	if back < 0 {
		t.Errorf("no ask was accepted after the master was killed")
	}
	if hit == 0 {
		t.Errorf("no turn was queued or running when the master was killed: the trial tested nothing")
	}
}
