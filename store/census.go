package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/prchat/prchat/chat"
)

// The reads of this file are for tools that watch many turns at once (the
// bench counts and times the turns of its daemons): none is on a turn's
// path.

// CountTurns returns how many turns are in each state; a state no turn is
// in is absent.
func (s *Store) CountTurns(ctx context.Context) (map[chat.State]int64, error) {
	var rows []struct {
		State string `gorm:"column:state"`
		N     int64  `gorm:"column:n"`
	}
	if err := s.read.WithContext(ctx).Raw(`SELECT state, count(*) AS n FROM turns GROUP BY state`).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("count turns by state: %w", err)
	}
	counts := make(map[chat.State]int64, len(rows))
	for _, r := range rows {
		counts[chat.State(r.State)] = r.N
	}
	return counts, nil
}

// TurnsByID returns the turns of ids that exist, in no particular order.
func (s *Store) TurnsByID(ctx context.Context, ids []string) ([]chat.Turn, error) {
	var turns []chat.Turn
	for chunk := range slices.Chunk(ids, 500) {
		var rows []turnRow
		if err := s.read.WithContext(ctx).Where("id IN ?", chunk).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("read %d turns: %w", len(chunk), err)
		}
		t, err := turnsFromRows(rows)
		if err != nil {
			return nil, err
		}
		turns = append(turns, t...)
	}
	return turns, nil
}

// FirstTurns returns the first turns of the conversations of ids that
// exist, in no particular order.
func (s *Store) FirstTurns(ctx context.Context, conversationIDs []string) ([]chat.Turn, error) {
	var turns []chat.Turn
	for chunk := range slices.Chunk(conversationIDs, 500) {
		var rows []turnRow
		if err := s.read.WithContext(ctx).Where("conversation_id IN ? AND number = 1", chunk).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("read the first turns of %d conversations: %w", len(chunk), err)
		}
		t, err := turnsFromRows(rows)
		if err != nil {
			return nil, err
		}
		turns = append(turns, t...)
	}
	return turns, nil
}

// FinishedTurns returns the limit turns that finished last, the last one
// first.
func (s *Store) FinishedTurns(ctx context.Context, limit int) ([]chat.Turn, error) {
	var rows []turnRow
	if err := s.read.WithContext(ctx).Where("finished_at IS NOT NULL").Order("finished_at DESC, id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read the last %d finished turns: %w", limit, err)
	}
	return turnsFromRows(rows)
}
