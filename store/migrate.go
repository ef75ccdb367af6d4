package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// migrations holds the SQL migrations, one directory per dialect.
//
//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrations embed.FS

// Migrate applies the migrations the database has not seen yet. It is safe
// to call on an up-to-date database, and on Postgres from several processes
// at once: they take turns on a lock row in the table prchat_migrate_lock of
// the current schema.
func (s *Store) Migrate(ctx context.Context) error {
	fsys, err := fs.Sub(migrations, "migrations/"+s.dialect)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", s.dialect, err)
	}
	pool, err := s.write.DB()
	if err != nil {
		return fmt.Errorf("migrate %s: %w", s.dialect, err)
	}
	opts := []goose.ProviderOption{
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(s.log),
	}
	dialect := goose.DialectSQLite3
	if s.dialect == dialectPostgres {
		dialect = goose.DialectPostgres
		var schema *string
		if err := s.write.WithContext(ctx).Raw("SELECT current_schema()").Scan(&schema).Error; err != nil {
			return fmt.Errorf("migrate postgres: find the current schema: %w", err)
		}
		if schema == nil {
			return fmt.Errorf("migrate postgres: no schema of the search_path exists")
		}
		// A lock row in a table of the schema rather than a session's
		// advisory lock: behind PgBouncer in transaction pooling a session
		// lock is taken on one server connection and released on another
		// (or never). Migrators of different schemas (tests run each in its
		// own) do not wait for each other; one that dies frees the lock when
		// its lease (30s) runs out.
		locker, err := lock.NewPostgresTableLocker(
			lock.WithTableName("prchat_migrate_lock"),
			lock.WithTableLockTimeout(100*time.Millisecond, 3000), // 5 minutes
			lock.WithTableLogger(s.log),
		)
		if err != nil {
			return fmt.Errorf("migrate postgres: %w", err)
		}
		opts = append(opts, goose.WithLocker(locker))
	}
	p, err := goose.NewProvider(dialect, pool, fsys, opts...)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", s.dialect, err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", s.dialect, err)
	}
	if len(results) > 0 {
		s.log.InfoContext(ctx, "database migrated",
			slog.String("dialect", s.dialect),
			slog.Int64("version", results[len(results)-1].Source.Version),
			slog.Int("applied", len(results)))
	}
	return nil
}
