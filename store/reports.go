package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prchat/prchat/chat"
)

var _ chat.ReportStore = (*Store)(nil)

// PullRequests lists the pull requests of repo that have a recorded review,
// the most recently active first. It reads the repository's reviews and
// conversations and folds them here rather than in SQL, so that both
// databases compare times the same way; a dashboard's repository holds
// hundreds of them, not millions.
func (s *Store) PullRequests(ctx context.Context, repo string) ([]chat.PullRequest, error) {
	r, err := s.Repository(ctx, repo)
	if err != nil {
		return nil, err
	}
	db := s.read.WithContext(ctx)
	var reviews []struct {
		PR        int       `gorm:"column:pr"`
		Version   int       `gorm:"column:version"`
		HeadSHA   string    `gorm:"column:head_sha"`
		CreatedAt time.Time `gorm:"column:created_at"`
	}
	if err := db.Raw(`SELECT pr, version, head_sha, created_at FROM reviews WHERE repository_id = ?`, r.ID).
		Scan(&reviews).Error; err != nil {
		return nil, fmt.Errorf("list reviews of %s: %w", repo, err)
	}
	var convs []struct {
		PR        int       `gorm:"column:pr"`
		UpdatedAt time.Time `gorm:"column:updated_at"`
	}
	if err := db.Raw(`SELECT rv.pr AS pr, c.updated_at AS updated_at FROM conversations c
JOIN reviews rv ON rv.id = c.review_id WHERE rv.repository_id = ?`, r.ID).Scan(&convs).Error; err != nil {
		return nil, fmt.Errorf("list conversations of %s: %w", repo, err)
	}
	prs := map[int]*chat.PullRequest{}
	for _, rv := range reviews {
		p := prs[rv.PR]
		if p == nil {
			p = &chat.PullRequest{Repository: repo, PR: rv.PR}
			prs[rv.PR] = p
		}
		if rv.Version > p.LatestVersion {
			p.LatestVersion, p.HeadSHA = rv.Version, rv.HeadSHA
		}
		if at := rv.CreatedAt.UTC(); at.After(p.UpdatedAt) {
			p.UpdatedAt = at
		}
	}
	for _, c := range convs {
		if p := prs[c.PR]; p != nil {
			p.Conversations++
			if at := c.UpdatedAt.UTC(); at.After(p.UpdatedAt) {
				p.UpdatedAt = at
			}
		}
	}
	out := make([]chat.PullRequest, 0, len(prs))
	for _, p := range prs {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b chat.PullRequest) int {
		return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), cmp.Compare(b.PR, a.PR))
	})
	return out, nil
}

// TurnFacts returns the facts of the turns created at or after since, and
// of every queued or running turn, of repo ("" = every repository).
func (s *Store) TurnFacts(ctx context.Context, since time.Time, repo string) ([]chat.TurnFact, error) {
	q := `SELECT rp.name AS repository, t.backend, t.state, t.reason, t.session, t.repairs, t.cost_usd,
       t.created_at, t.finished_at
FROM turns t
JOIN conversations c ON c.id = t.conversation_id
JOIN reviews rv ON rv.id = c.review_id
JOIN repositories rp ON rp.id = rv.repository_id
WHERE (t.created_at >= ? OR t.state IN ('queued', 'running'))`
	args := []any{since.UTC().Truncate(time.Microsecond)}
	if repo != "" {
		q += ` AND rp.name = ?`
		args = append(args, repo)
	}
	var rows []struct {
		Repository string     `gorm:"column:repository"`
		Backend    string     `gorm:"column:backend"`
		State      string     `gorm:"column:state"`
		Reason     string     `gorm:"column:reason"`
		Session    string     `gorm:"column:session"`
		Repairs    int        `gorm:"column:repairs"`
		CostUSD    *float64   `gorm:"column:cost_usd"`
		CreatedAt  time.Time  `gorm:"column:created_at"`
		FinishedAt *time.Time `gorm:"column:finished_at"`
	}
	if err := s.read.WithContext(ctx).Raw(q, args...).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read turn facts since %s: %w", since.Format(time.RFC3339), err)
	}
	facts := make([]chat.TurnFact, len(rows))
	for i, r := range rows {
		facts[i] = chat.TurnFact{
			Repository: r.Repository,
			Backend:    r.Backend,
			State:      chat.State(r.State),
			Reason:     chat.Reason(r.Reason),
			Session:    chat.SessionMode(r.Session),
			Repairs:    r.Repairs,
			CostUSD:    r.CostUSD,
			CreatedAt:  r.CreatedAt.UTC(),
			FinishedAt: utcPtr(r.FinishedAt),
		}
	}
	return facts, nil
}
