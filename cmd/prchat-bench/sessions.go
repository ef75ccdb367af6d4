package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prchat/prchat/agentsession/claude"
	"github.com/prchat/prchat/chat"
)

// sessionSizes are the session file sizes the sessions phase measures, and
// how many times it times each step of each.
var sessionSizes = []struct {
	label string
	bytes int
	reps  int
}{
	{"100 KB", 100 << 10, 20},
	{"1 MB", 1 << 20, 10},
	{"10 MB", 10 << 20, 3},
}

// restoreGoal is what a restore of a 1 MB session may add to a turn.
const restoreGoal = 50 * time.Millisecond

// sessions measures what sessions travelling cost (DESIGN §5, Sessions
// travel), for Claude Code session files of sessionSizes:
//
//   - upload: PUT of a review's session file to the serve daemon's API
//     (checked, compressed, sealed and stored by the daemon);
//   - store: what a worker does after a turn, here in the bench's process
//     on the daemons' database: read the CLI's file, seal it, write it;
//   - restore: what a worker without a warm copy does before the turn:
//     load the stored file, open it, check it, write it into the CLI's
//     state for a run directory of its own (paths mapped), find it. This
//     is the time a restore adds to the turn.
//
// Each is timed as the median of a few repetitions, with the bench
// process's CPU time per repetition for store and restore (the wall time
// depends on the machine's load) and the sealed size.
func (b *bencher) sessions(ctx context.Context, serve *benchDaemon) error {
	dir := filepath.Join(b.dir, "sessions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var key [32]byte
	_, _ = rand.Read(key[:])
	sealer, err := chat.NewSealer(key[:])
	if err != nil {
		return err
	}
	cli, err := claude.New(claude.Config{ConfigDir: filepath.Join(dir, "claude")})
	if err != nil {
		return err
	}
	laptop := filepath.Join(dir, "laptop", "checkout")
	for i, size := range sessionSizes {
		id := fmt.Sprintf("5b0c53c4-3f52-4f5e-9a55-0d8d3c1f6f%02d", i)
		version, err := b.recordSessionReview(ctx, serve.url, id, laptop)
		if err != nil {
			return err
		}
		data := claudeSessionFile(id, laptop, size.bytes)

		upload := make(durations, 0, size.reps)
		path := fmt.Sprintf("%s/api/v1/repos/bench/repo/pulls/2/reviews/%d/session", serve.url, version)
		for range size.reps {
			start := time.Now()
			if err := b.putSession(ctx, path, data); err != nil {
				return fmt.Errorf("sessions: upload %s: %w", size.label, err)
			}
			upload = append(upload, time.Since(start))
		}
		upload = upload.sorted()
		b.rep.add("sessions", fmt.Sprintf("upload %s (PUT; serve checks, seals, stores), p50", size.label), ms(upload.percentile(50)), "", "")

		rev, err := b.db.Review(ctx, "bench/repo", 2, version)
		if err != nil {
			return err
		}
		owner := chat.SessionOwner{ReviewID: rev.ID}
		cliFile := filepath.Join(dir, id+".jsonl")
		if err := os.WriteFile(cliFile, data, 0o600); err != nil {
			return err
		}
		var sealedBytes int
		store, storeCPU, err := timed(size.reps, func(int) error {
			raw, err := os.ReadFile(cliFile)
			if err != nil {
				return err
			}
			sealed, err := sealer.SealSessionFile(owner, chat.SessionFile{Backend: chat.BackendClaudeCode, SessionID: id, Cwd: laptop, Data: raw})
			if err != nil {
				return err
			}
			sealedBytes = len(sealed.Sealed)
			return b.db.PutReviewSessionFile(ctx, sealed)
		})
		if err != nil {
			return fmt.Errorf("sessions: store %s: %w", size.label, err)
		}
		b.rep.add("sessions", fmt.Sprintf("store %s (read, seal, write), p50", size.label), ms(store.percentile(50)), "", "")
		b.rep.add("sessions", fmt.Sprintf("  store %s: CPU of the bench process", size.label), ms(storeCPU), "", "")
		b.rep.add("sessions", fmt.Sprintf("  store %s: sealed (compressed) size", size.label), kbOrMB(sealedBytes), "", "")

		restore, restoreCPU, err := timed(size.reps, func(rep int) error {
			sf, err := b.db.SessionFile(ctx, owner)
			if err != nil {
				return err
			}
			f, err := sealer.OpenSessionFile(sf)
			if err != nil {
				return err
			}
			if _, err := cli.CheckSessionFile(f.Data, f.SessionID); err != nil {
				return err
			}
			run := filepath.Join(dir, "runs", fmt.Sprintf("%d-%d", i, rep))
			if err := os.MkdirAll(run, 0o700); err != nil {
				return err
			}
			if err := cli.RestoreSession(ctx, run, []chat.SessionFile{f}); err != nil {
				return err
			}
			return cli.HasSession(ctx, chat.SessionRef{ID: id, Dir: run})
		})
		if err != nil {
			return fmt.Errorf("sessions: restore %s: %w", size.label, err)
		}
		p50 := restore.percentile(50)
		goal, met := "", ""
		if size.bytes == 1<<20 {
			goal, met = "< "+ms(restoreGoal), verdict(p50 < restoreGoal)
		}
		b.rep.add("sessions", fmt.Sprintf("restore %s (load, open, check, write, find) = added to a turn, p50", size.label), ms(p50), goal, met)
		b.rep.add("sessions", fmt.Sprintf("  restore %s: CPU of the bench process", size.label), ms(restoreCPU), "", "")
	}
	b.rep.note("sessions: Claude Code session files of JSON lines like a review's (text, tool calls, file reads naming the checkout); store and restore run in the bench's process on the daemons' database, CPU per repetition; load average " + loadAverage())
	return nil
}

// kbOrMB formats a byte count in kilobytes below a megabyte, else in
// megabytes.
func kbOrMB(n int) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.0f KB", float64(n)/(1<<10))
	}
	return mb(int64(n))
}

// timed runs f reps times and returns the sorted wall times and the
// bench process's CPU time per run.
func timed(reps int, f func(rep int) error) (durations, time.Duration, error) {
	cpu0, _ := processCPUFine(os.Getpid())
	out := make(durations, 0, reps)
	for rep := range reps {
		start := time.Now()
		if err := f(rep); err != nil {
			return nil, 0, err
		}
		out = append(out, time.Since(start))
	}
	cpu1, _ := processCPUFine(os.Getpid())
	return out.sorted(), (cpu1 - cpu0) / time.Duration(reps), nil
}

// recordSessionReview records a claude-code review of PR 2 whose session
// is id, run in cwd, and returns its version.
func (b *bencher) recordSessionReview(ctx context.Context, base, id, cwd string) (int, error) {
	raw, _ := json.Marshal(map[string]string{
		"head_sha": b.head, "backend": chat.BackendClaudeCode, "session_id": id, "session_cwd": cwd,
		"markdown": "The bench review of sessions travelling.",
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/repos/bench/repo/pulls/2/reviews", bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("sessions: record a review: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var rev struct{ Version int }
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &rev) != nil {
		return 0, fmt.Errorf("sessions: record a review: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return rev.Version, nil
}

// putSession uploads data as a review's session file at url.
func (b *bencher) putSession(ctx context.Context, url string, data []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}

// claudeSessionFile returns a Claude Code session file of session id run
// in cwd, of about size bytes: a review's prompt, then assistant text, tool
// calls reading files of the checkout and their results (code), as the
// CLI writes them. The text is drawn from a fixed seed, so every run
// compresses alike.
func claudeSessionFile(id, cwd string, size int) []byte {
	rng := mrand.New(mrand.NewPCG(uint64(size), 22))
	words := strings.Fields("func return err nil if for range := the session review load path file config " +
		"error context string int bool struct type package import errors fmt strings bytes time " +
		"refuses empty checks bound retries parse value default handler request response")
	text := func(n int) string {
		var sb strings.Builder
		for sb.Len() < n {
			sb.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(8) == 0 {
				fmt.Fprintf(&sb, " %x", rng.Uint32())
			}
			sb.WriteByte(' ')
		}
		return sb.String()
	}
	var buf bytes.Buffer
	line := func(typ string, message any) {
		rec := map[string]any{
			"type": typ, "sessionId": id, "cwd": cwd, "uuid": fmt.Sprintf("%08x-0000-4000-8000-%012x", rng.Uint32(), rng.Uint64()>>16),
			"timestamp": "2026-01-02T03:04:05.000Z", "message": message,
		}
		raw, _ := json.Marshal(rec)
		buf.Write(raw)
		buf.WriteByte('\n')
	}
	line("user", map[string]any{"role": "user", "content": "Review this pull request. " + text(400)})
	for n := 0; buf.Len() < size; n++ {
		file := filepath.Join(cwd, "pkg", fmt.Sprintf("file%d.go", n%50))
		line("assistant", map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": text(300)},
			map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", n), "name": "Read", "input": map[string]any{"file_path": file}},
		}})
		line("user", map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": fmt.Sprintf("toolu_%d", n), "content": file + "\n" + text(2500)},
		}})
	}
	return buf.Bytes()
}
