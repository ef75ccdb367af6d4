package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/prchat/prchat/chat"
)

// maxVersionAttempts bounds CreateReview's retries when a concurrent call
// took the version it computed.
const maxVersionAttempts = 20

// stamp returns t as the store keeps it, or the current time when t is zero.
func stamp(t time.Time) time.Time {
	if t.IsZero() {
		return now()
	}
	return t.UTC().Truncate(time.Microsecond)
}

// UpsertRepository registers r by name, or updates the clone path and URL
// and the forge project of the repository with that name. It fills r's ID
// and CreatedAt and reports whether the repository is new. A forge project
// that another repository names is CodeConflict.
func (s *Store) UpsertRepository(ctx context.Context, r *chat.Repository) (bool, error) {
	row := repositoryRow{Name: r.Name, ClonePath: r.ClonePath, CloneURL: r.CloneURL, ForgeProject: r.ForgeProject, CreatedAt: stamp(r.CreatedAt)}
	res := s.write.WithContext(ctx).
		Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "name"}}, DoNothing: true}).
		Create(&row)
	if violates(res.Error, forgeProjectKey()) {
		return false, forgeProjectTaken(r.ForgeProject)
	}
	if res.Error != nil {
		return false, fmt.Errorf("upsert repository %s: %w", r.Name, res.Error)
	}
	if res.RowsAffected == 1 {
		*r = row.chat()
		return true, nil
	}
	var rows []repositoryRow
	err := s.write.WithContext(ctx).Raw(
		`UPDATE repositories SET clone_path = ?, clone_url = ?, forge_project = ? WHERE name = ? RETURNING *`,
		r.ClonePath, r.CloneURL, r.ForgeProject, r.Name).Scan(&rows).Error
	if violates(err, forgeProjectKey()) {
		return false, forgeProjectTaken(r.ForgeProject)
	}
	if err != nil {
		return false, fmt.Errorf("upsert repository %s: %w", r.Name, err)
	}
	if len(rows) == 0 {
		return false, fmt.Errorf("upsert repository %s: it was neither inserted nor found", r.Name)
	}
	*r = rows[0].chat()
	return false, nil
}

// Repository returns the repository named name (owner/repo).
func (s *Store) Repository(ctx context.Context, name string) (chat.Repository, error) {
	var row repositoryRow
	err := s.read.WithContext(ctx).Where("name = ?", name).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return chat.Repository{}, chat.Errorf(chat.CodeRepositoryNotFound, "repository %s is not registered", name)
	}
	if err != nil {
		return chat.Repository{}, fmt.Errorf("get repository %s: %w", name, err)
	}
	return row.chat(), nil
}

// RepositoryByForgeProject returns the repository whose forge project is
// project (CodeRepositoryNotFound when none names it).
func (s *Store) RepositoryByForgeProject(ctx context.Context, project string) (chat.Repository, error) {
	var row repositoryRow
	err := s.read.WithContext(ctx).Where("forge_project = ? AND forge_project <> ''", project).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return chat.Repository{}, chat.Errorf(chat.CodeRepositoryNotFound, "no repository is registered with forge project %s", project)
	}
	if err != nil {
		return chat.Repository{}, fmt.Errorf("get the repository of forge project %s: %w", project, err)
	}
	return row.chat(), nil
}

func forgeProjectKey() uniqueKey {
	return uniqueKey{"repositories_forge_project_key", []string{"repositories.forge_project"}}
}

func forgeProjectTaken(project string) error {
	return chat.Errorf(chat.CodeConflict, "forge project %s is already another repository's", project)
}

// Repositories lists the registered repositories by name.
func (s *Store) Repositories(ctx context.Context) ([]chat.Repository, error) {
	var rows []repositoryRow
	if err := s.read.WithContext(ctx).Order("name").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list repositories: %w", err)
	}
	repos := make([]chat.Repository, len(rows))
	for i, r := range rows {
		repos[i] = r.chat()
	}
	return repos, nil
}

// CreateReview stores r as the next version (1, 2, ...) of its PR and fills
// r's ID, Version and CreatedAt, and its RepositoryID and Repository. The
// repository is r.RepositoryID if set, else the one named r.Repository.
func (s *Store) CreateReview(ctx context.Context, r *chat.Review) error {
	_, err := s.createReview(ctx, r, false)
	return err
}

// CreateFirstReview stores r as version 1 of its PR if the PR has no
// review, and reports true; else it fills r with the PR's latest review
// and reports false. Of calls that race on one PR, from any processes,
// exactly one creates it (the unique version decides) and the others get
// its review.
func (s *Store) CreateFirstReview(ctx context.Context, r *chat.Review) (bool, error) {
	return s.createReview(ctx, r, true)
}

func (s *Store) createReview(ctx context.Context, r *chat.Review, onlyFirst bool) (bool, error) {
	row, err := newReviewRow(r)
	if err != nil {
		return false, fmt.Errorf("create review of %s#%d: %w", r.Repository, r.PR, err)
	}
	row.ID = 0
	row.CreatedAt = stamp(r.CreatedAt)
	var repo repositoryRow
	exists := false
	for attempt := 1; ; attempt++ {
		err = s.transaction(ctx, func(tx *gorm.DB) error {
			q := tx.Where("name = ?", r.Repository)
			if r.RepositoryID != 0 {
				q = tx.Where("id = ?", r.RepositoryID)
			}
			if err := q.Take(&repo).Error; errors.Is(err, gorm.ErrRecordNotFound) {
				return chat.Errorf(chat.CodeRepositoryNotFound, "repository %s is not registered", repoName(r))
			} else if err != nil {
				return err
			}
			var latest int
			if err := tx.Raw(`SELECT COALESCE(MAX(version), 0) FROM reviews WHERE repository_id = ? AND pr = ?`,
				repo.ID, r.PR).Scan(&latest).Error; err != nil {
				return err
			}
			if exists = onlyFirst && latest > 0; exists {
				return nil
			}
			row.ID, row.RepositoryID, row.Version = 0, repo.ID, latest+1
			return tx.Create(&row).Error
		})
		if violates(err, reviewVersionKey()) && attempt < maxVersionAttempts {
			continue
		}
		break
	}
	if err != nil {
		var e *chat.Error
		if errors.As(err, &e) {
			return false, e
		}
		return false, fmt.Errorf("create review of %s#%d: %w", repoName(r), r.PR, err)
	}
	if exists {
		// Read on the write pool: the review another call just made.
		var rows []reviewWithRepo
		if err := s.write.WithContext(ctx).Raw(selectReviews+`WHERE rv.repository_id = ? AND rv.pr = ? ORDER BY rv.version DESC LIMIT 1`,
			repo.ID, r.PR).Scan(&rows).Error; err != nil {
			return false, fmt.Errorf("get the latest review of %s#%d: %w", repo.Name, r.PR, err)
		}
		if len(rows) == 0 {
			return false, fmt.Errorf("get the latest review of %s#%d: it is gone", repo.Name, r.PR)
		}
		latest, err := rows[0].chat()
		if err != nil {
			return false, err
		}
		*r = latest
		return false, nil
	}
	r.ID, r.RepositoryID, r.Repository = row.ID, repo.ID, repo.Name
	r.Version, r.CreatedAt = row.Version, row.CreatedAt
	return true, nil
}

// repoName names r's repository for a message.
func repoName(r *chat.Review) string {
	if r.Repository != "" {
		return r.Repository
	}
	return fmt.Sprintf("with id %d", r.RepositoryID)
}

// selectReviews selects reviews with their repository's name.
const selectReviews = `SELECT rv.*, rp.name AS repository
FROM reviews rv JOIN repositories rp ON rp.id = rv.repository_id `

// Review returns a version of a PR's review; version 0 is the latest.
func (s *Store) Review(ctx context.Context, repo string, pr, version int) (chat.Review, error) {
	var rows []reviewWithRepo
	q := s.read.WithContext(ctx)
	if version == 0 {
		q = q.Raw(selectReviews+`WHERE rp.name = ? AND rv.pr = ? ORDER BY rv.version DESC LIMIT 1`, repo, pr)
	} else {
		q = q.Raw(selectReviews+`WHERE rp.name = ? AND rv.pr = ? AND rv.version = ?`, repo, pr, version)
	}
	if err := q.Scan(&rows).Error; err != nil {
		return chat.Review{}, fmt.Errorf("get review %d of %s#%d: %w", version, repo, pr, err)
	}
	if len(rows) == 0 {
		if _, err := s.Repository(ctx, repo); err != nil {
			return chat.Review{}, err
		}
		if version == 0 {
			return chat.Review{}, chat.Errorf(chat.CodeNoReview, "%s#%d has no review", repo, pr)
		}
		return chat.Review{}, chat.Errorf(chat.CodeNoReview, "%s#%d has no review version %d", repo, pr, version)
	}
	return rows[0].chat()
}

// ReviewByID returns the review with id.
func (s *Store) ReviewByID(ctx context.Context, id int64) (chat.Review, error) {
	var rows []reviewWithRepo
	if err := s.read.WithContext(ctx).Raw(selectReviews+`WHERE rv.id = ?`, id).Scan(&rows).Error; err != nil {
		return chat.Review{}, fmt.Errorf("get review %d: %w", id, err)
	}
	if len(rows) == 0 {
		return chat.Review{}, chat.Errorf(chat.CodeNoReview, "no review with id %d", id)
	}
	return rows[0].chat()
}

// Reviews lists a PR's review versions, oldest first: none for a PR with
// no review, CodeRepositoryNotFound for an unknown repository.
func (s *Store) Reviews(ctx context.Context, repo string, pr int) ([]chat.Review, error) {
	var rows []reviewWithRepo
	if err := s.read.WithContext(ctx).Raw(selectReviews+`WHERE rp.name = ? AND rv.pr = ? ORDER BY rv.version`,
		repo, pr).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list reviews of %s#%d: %w", repo, pr, err)
	}
	if len(rows) == 0 {
		if _, err := s.Repository(ctx, repo); err != nil {
			return nil, err
		}
	}
	reviews := make([]chat.Review, len(rows))
	for i, r := range rows {
		rv, err := r.chat()
		if err != nil {
			return nil, err
		}
		reviews[i] = rv
	}
	return reviews, nil
}
