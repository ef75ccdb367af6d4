package store

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// migrations holds the SQL migrations, one directory per dialect.
//
//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrations embed.FS

// Migrate applies the migrations the database has not seen yet. It is safe
// to call on an up-to-date database, and on Postgres from several processes
// at once: they take turns on an advisory lock of the current schema.
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
		// One lock per schema, so that migrators of different schemas (tests
		// run each in its own) do not wait for each other.
		h := fnv.New64a()
		h.Write([]byte("prchat migrate " + *schema))
		locker, err := lock.NewPostgresSessionLocker(
			lock.WithLockID(int64(h.Sum64())),
			lock.WithLockTimeout(1, 300),
		)
		if err != nil {
			return fmt.Errorf("migrate postgres: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
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
