package store_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/store"
	"github.com/prchat/prchat/store/storetest"
)

// TestTurnCensus: the counts by state, the turns read by id, the first
// turns of conversations and the last finished turns are what the turns
// are.
func TestTurnCensus(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		c1, t1 := f.converse(t)
		c2, t2 := f.converse(t)
		_, t3 := f.converse(t)
		run := f.claim(t, t1.ID, "w1/1")
		if err := s.FinishTurn(ctx, t1.ID, run.Fence, chat.Outcome{State: chat.StateSucceeded}); err != nil {
			t.Fatal(err)
		}
		f.claim(t, t2.ID, "w1/1")
		if _, err := s.SettleTurn(ctx, t2.ID, chat.StateFailed, chat.ReasonBackendError, "broke", nil); err != nil {
			t.Fatal(err)
		}

		counts, err := s.CountTurns(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[chat.State]int64{chat.StateSucceeded: 1, chat.StateFailed: 1, chat.StateQueued: 1}, counts); diff != "" {
			t.Errorf("counts (-want +got):\n%s", diff)
		}

		byID, err := s.TurnsByID(ctx, []string{t1.ID, t3.ID, "missing"})
		if err != nil {
			t.Fatal(err)
		}
		states := map[string]chat.State{}
		for _, turn := range byID {
			states[turn.ID] = turn.State
		}
		if diff := cmp.Diff(map[string]chat.State{t1.ID: chat.StateSucceeded, t3.ID: chat.StateQueued}, states); diff != "" {
			t.Errorf("turns by id (-want +got):\n%s", diff)
		}

		first, err := s.FirstTurns(ctx, []string{c1.ID, c2.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(first) != 2 || first[0].Number != 1 || first[1].Number != 1 {
			t.Errorf("first turns: %+v", first)
		}

		finished, err := s.FinishedTurns(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(finished) != 2 || finished[0].ID != t2.ID || finished[1].ID != t1.ID || finished[0].Note != "broke" {
			t.Errorf("finished turns, last first: %+v", finished)
		}
		if one, err := s.FinishedTurns(ctx, 1); err != nil || len(one) != 1 || one[0].ID != t2.ID {
			t.Errorf("the last finished turn: %+v, %v", one, err)
		}
	})
}
