package api

import (
	"runtime"
	"testing"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// TestFramesRenderASharedEventOnce: every subscriber handed the same live
// event (one pointer, as the Follower shares it) gets one rendering of it;
// another event, even with the same fields, its own; an error event
// without a trace id of its own takes each request's; and a frame is
// dropped with its event.
func TestFramesRenderASharedEventOnce(t *testing.T) {
	var f frames
	e := &chat.Event{Seq: 1, Type: chat.EventTextDelta, Text: "a"}
	first, second := f.turnFrame(e, "req-1"), f.turnFrame(e, "req-2")
	if string(first) != string(turnFrame(*e, "")) {
		t.Fatalf("frame = %q, want %q", first, turnFrame(*e, ""))
	}
	if &first[0] != &second[0] {
		t.Error("the same event was rendered twice")
	}
	same := *e
	if third := f.turnFrame(&same, ""); &third[0] == &first[0] {
		t.Error("another event got the first one's frame")
	}
	fail := &chat.Event{Seq: 2, Type: chat.EventError, Message: "no", Reason: chat.ReasonCancelled}
	a, b := f.turnFrame(fail, "req-1"), f.turnFrame(fail, "req-2")
	if string(a) == string(b) || string(a) != string(turnFrame(*fail, "req-1")) {
		t.Errorf("an error event without a trace id: %q and %q, want each request's trace id", a, b)
	}
	runtime.KeepAlive(e)
	e, fail = nil, nil
	chattest.Eventually(t, "no frame kept after its events are gone", func() bool {
		runtime.GC()
		return countFrames(&f) == 0
	})
}

func countFrames(f *frames) int {
	n := 0
	f.m.Range(func(any, any) bool { n++; return true })
	return n
}
