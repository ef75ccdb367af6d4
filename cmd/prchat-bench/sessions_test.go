package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/prchat/prchat/agentsession/claude"
	"github.com/prchat/prchat/chat"
)

// BenchmarkSessionFile times, without the database, what a worker does
// with a Claude Code session file of each of sessionSizes: seal it after a
// turn (store), and before a turn open, check and write it into the CLI's
// state for a run directory of its own and find it (restore).
func BenchmarkSessionFile(b *testing.B) {
	sealer, err := chat.NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		b.Fatal(err)
	}
	for i, size := range sessionSizes {
		id := fmt.Sprintf("5b0c53c4-3f52-4f5e-9a55-0d8d3c1f6f%02d", i)
		cwd := "/laptop/checkout"
		data := claudeSessionFile(id, cwd, size.bytes)
		owner := chat.SessionOwner{ReviewID: 1}
		file := chat.SessionFile{Backend: chat.BackendClaudeCode, SessionID: id, Cwd: cwd, Data: data}
		b.Run("store/"+size.label, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := sealer.SealSessionFile(owner, file); err != nil {
					b.Fatal(err)
				}
			}
		})
		sealed, err := sealer.SealSessionFile(owner, file)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("restore/"+size.label, func(b *testing.B) {
			dir := b.TempDir()
			cli, err := claude.New(claude.Config{ConfigDir: filepath.Join(dir, "claude")})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			n := 0
			for b.Loop() {
				n++
				f, err := sealer.OpenSessionFile(sealed)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := cli.CheckSessionFile(f.Data, id); err != nil {
					b.Fatal(err)
				}
				run := filepath.Join(dir, "runs", fmt.Sprint(n))
				if err := os.MkdirAll(run, 0o700); err != nil {
					b.Fatal(err)
				}
				if err := cli.RestoreSession(b.Context(), run, []chat.SessionFile{f}); err != nil {
					b.Fatal(err)
				}
				if err := cli.HasSession(b.Context(), chat.SessionRef{ID: id, Dir: run}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
