package agentsession

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prchat/prchat/chat/chattest"
)

func TestSessionLocks(t *testing.T) {
	t.Parallel()
	var l SessionLocks
	ctx := t.Context()
	r1, err := l.RLock(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.RLock(ctx, "S")
	if err != nil {
		t.Fatalf("a second reader of s waits: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(short, "s"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a writer of s while readers hold it = %v, want it to wait until its context ends", err)
	}
	other, err := l.Lock(ctx, "t")
	if err != nil {
		t.Fatalf("another session is not locked: %v", err)
	}
	other()

	got := make(chan func(), 1)
	go func() {
		w, err := l.Lock(ctx, "s")
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	r1()
	r1() // a second release is a no-op
	// A while for a wrong grant to show, not a wait for a condition.
	select {
	case <-got:
		t.Fatal("the writer got the lock while a reader still held it")
	case <-time.After(50 * time.Millisecond):
	}
	r2()
	w := chattest.Receive(t, "the writer to get the lock once the readers left", got)
	short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if _, err := l.RLock(short2, "s"); err == nil {
		t.Fatal("a reader got the lock while the writer held it")
	}
	w()
	if n := l.held(); n != 0 {
		t.Errorf("%d lock entries left after every holder left, want 0", n)
	}
}

// TestSessionLocksExclusive: writers of one session never overlap.
func TestSessionLocksExclusive(t *testing.T) {
	t.Parallel()
	var l SessionLocks
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			unlock, err := l.Lock(t.Context(), "a")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			if n > most.Load() {
				most.Store(n)
			}
			time.Sleep(time.Millisecond) // holds the lock a while, for an overlap to show
			inside.Add(-1)
			unlock()
		})
	}
	wg.Wait()
	if most.Load() != 1 || l.held() != 0 {
		t.Errorf("at most %d writers at once, %d entries left; want 1 and 0", most.Load(), l.held())
	}
}

func TestIsUUID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D"} {
		if !IsUUID(id) {
			t.Errorf("IsUUID(%q) = false", id)
		}
	}
	for _, id := range []string{"", "scripted-1", "0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d", "{0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d}",
		"urn:uuid:0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4g", "../../etc/passwd-0000-0000-0000-0000"} {
		if IsUUID(id) {
			t.Errorf("IsUUID(%q) = true", id)
		}
	}
}
