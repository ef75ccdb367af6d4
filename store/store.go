package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/prchat/prchat/chat"
)

// The store interfaces of chat's roles, each declared by its user.
var (
	_ chat.CatalogStore     = (*Store)(nil)
	_ chat.AdminStore       = (*Store)(nil)
	_ chat.TurnStore        = (*Store)(nil)
	_ chat.RunStore         = (*Store)(nil)
	_ chat.EventStore       = (*Store)(nil)
	_ chat.WebhookTurnStore = (*Store)(nil)
	_ chat.Pinger           = (*Store)(nil)
)

// Dialects of the databases a Store can use.
const (
	dialectPostgres = "postgres"
	dialectSQLite   = "sqlite"
)

const (
	defaultMaxOpenConns = 10
	// sqliteBusyTimeout is how long a SQLite connection waits for a lock
	// held by another process (the bench tool, `prchat migrate`) before it
	// fails with SQLITE_BUSY.
	sqliteBusyTimeout = 5 * time.Second
)

// Config configures a Store.
type Config struct {
	// DatabaseURL is the postgres:// (or postgresql://) URL of the Postgres
	// database. Connection parameters go in the query, e.g.
	// ?sslmode=disable&search_path=prchat. Empty means the embedded SQLite
	// database at SQLitePath.
	DatabaseURL string
	// SQLitePath is the file of the embedded SQLite database, created when
	// missing. Required when DatabaseURL is empty, ignored otherwise.
	SQLitePath string
	// MaxOpenConns caps the open connections to Postgres, or SQLite's read
	// connections (SQLite writes always go through one connection).
	// Default 10.
	MaxOpenConns int
	// Logger receives the store's own logs (applied migrations). gorm's
	// statement log is off. Default: discard.
	Logger *slog.Logger
	// CommitEachAsk commits every new conversation in a transaction of its
	// own instead of with those asked for at the same time (see
	// CreateConversation): the bench's floor.
	CommitEachAsk bool
}

func (c Config) validate() error {
	switch {
	case c.DatabaseURL != "":
		if !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
			return errors.New("database URL must start with postgres:// or postgresql://")
		}
	case c.SQLitePath == "":
		return errors.New("no database: set a database URL or a SQLite path")
	case strings.ContainsRune(c.SQLitePath, '?') || c.SQLitePath == ":memory:" || strings.HasPrefix(c.SQLitePath, "file:"):
		return fmt.Errorf("SQLite path %q must be a plain file path", c.SQLitePath)
	}
	if c.MaxOpenConns < 0 {
		return fmt.Errorf("max open connections %d is negative", c.MaxOpenConns)
	}
	return nil
}

// Store is prchat's database. It implements the store interfaces of chat's
// roles (CatalogStore, AdminStore, TurnStore, RunStore, EventStore, and the
// webhook, report, settings and token stores) and is safe for concurrent
// use.
type Store struct {
	dialect string
	// read serves queries outside transactions; write serves writes and
	// transactions. They are the same pool on Postgres. On SQLite, write is
	// one connection and read a pool of read-only connections.
	read, write *gorm.DB
	pools       []*sql.DB
	log         *slog.Logger
	asks        *askBatcher // nil with Config.CommitEachAsk
	// runs is the lane of the runs' statements on Postgres (see lane): their
	// claims, events and finishes; nil on SQLite.
	runs *lane
}

// Open connects to the database that cfg names. It does not apply
// migrations; call Migrate.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	cfg.MaxOpenConns = cmp.Or(cfg.MaxOpenConns, defaultMaxOpenConns)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{log: log}
	var err error
	if cfg.DatabaseURL != "" {
		err = s.openPostgres(ctx, cfg)
	} else {
		err = s.openSQLite(ctx, cfg)
	}
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if !cfg.CommitEachAsk {
		// SQLite writes through one connection: one writer. On Postgres a
		// few batches commit side by side.
		writers := 1
		if s.dialect == dialectPostgres {
			writers = max(1, cfg.MaxOpenConns/2)
		}
		s.asks = startAskBatcher(s, writers)
	}
	if s.dialect == dialectPostgres {
		s.runs = newLane(s.pools[0])
	}
	return s, nil
}

func (s *Store) openPostgres(ctx context.Context, cfg Config) error {
	s.dialect = dialectPostgres
	pcfg, err := pgx.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("parse database URL: %w", err)
	}
	pool := stdlib.OpenDB(*pcfg)
	s.pools = append(s.pools, pool)
	pool.SetMaxOpenConns(cfg.MaxOpenConns)
	pool.SetMaxIdleConns(cfg.MaxOpenConns)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	if err := pool.PingContext(ctx); err != nil {
		return fmt.Errorf("connect to postgres %s:%d: %w", pcfg.Host, pcfg.Port, err)
	}
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: pool}), gormConfig())
	if err != nil {
		return fmt.Errorf("open gorm on postgres: %w", err)
	}
	if err := registerUnavailable(db); err != nil {
		return err
	}
	s.read, s.write = db, db
	return nil
}

func (s *Store) openSQLite(ctx context.Context, cfg Config) error {
	s.dialect = dialectSQLite
	busy := fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeout.Milliseconds())

	// One write connection: writers queue for it in database/sql rather than
	// contending for SQLite's lock. Transactions begin IMMEDIATE so that one
	// never has to upgrade a read lock (which fails instead of waiting), also
	// against another process.
	w := url.Values{}
	for _, p := range []string{busy, "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)"} {
		w.Add("_pragma", p)
	}
	w.Set("_txlock", "immediate")
	w.Set("_time_format", "sqlite")
	wpool, err := openSQLitePool(cfg.SQLitePath + "?" + w.Encode())
	if err != nil {
		return fmt.Errorf("open sqlite %s: %w", cfg.SQLitePath, err)
	}
	s.pools = append(s.pools, wpool)
	wpool.SetMaxOpenConns(1)
	wpool.SetMaxIdleConns(1)
	wpool.SetConnMaxLifetime(0)
	wpool.SetConnMaxIdleTime(0)
	// The first connection switches the file to WAL before readers open it.
	if err := wpool.PingContext(ctx); err != nil {
		return fmt.Errorf("open sqlite %s: %w", cfg.SQLitePath, err)
	}

	r := url.Values{}
	for _, p := range []string{busy, "foreign_keys(1)", "query_only(1)"} {
		r.Add("_pragma", p)
	}
	r.Set("_time_format", "sqlite")
	rpool, err := openSQLitePool(cfg.SQLitePath + "?" + r.Encode())
	if err != nil {
		return fmt.Errorf("open sqlite %s: %w", cfg.SQLitePath, err)
	}
	s.pools = append(s.pools, rpool)
	rpool.SetMaxOpenConns(cfg.MaxOpenConns)
	rpool.SetMaxIdleConns(cfg.MaxOpenConns)
	rpool.SetConnMaxIdleTime(5 * time.Minute)
	if err := rpool.PingContext(ctx); err != nil {
		return fmt.Errorf("open sqlite %s for reading: %w", cfg.SQLitePath, err)
	}

	if s.write, err = gorm.Open(sqliteDialect{pool: wpool}, gormConfig()); err != nil {
		return fmt.Errorf("open gorm on sqlite: %w", err)
	}
	if s.read, err = gorm.Open(sqliteDialect{pool: rpool}, gormConfig()); err != nil {
		return fmt.Errorf("open gorm on sqlite: %w", err)
	}
	return nil
}

func gormConfig() *gorm.Config {
	return &gorm.Config{
		// Expected errors (a busy conversation, a fenced run) are not worth
		// a log line; the callers log what matters.
		Logger: logger.Discard,
		// Single statements need no transaction of their own; the methods
		// that need one open it.
		SkipDefaultTransaction: true,
		NowFunc:                now,
		DisableAutomaticPing:   true,
	}
}

// now is the time the store records: UTC, in microseconds as Postgres keeps it.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Close closes the database connections. It is safe to call twice.
func (s *Store) Close() error {
	if s.asks != nil {
		s.asks.close()
	}
	if s.runs != nil {
		s.runs.close()
	}
	var errs []error
	for _, p := range s.pools {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// DB returns the gorm handle that writes, for tools (a benchmark, test
// setup) that need a statement the Store has no method for. On SQLite it is
// the single write connection: do not hold it.
func (s *Store) DB() *gorm.DB { return s.write }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.read.WithContext(ctx).Exec("SELECT 1").Error; err != nil {
		return fmt.Errorf("ping %s: %w", s.dialect, unavailable(err))
	}
	return nil
}
