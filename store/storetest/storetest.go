// Package storetest gives tests a migrated, isolated store.Store on the
// databases the environment offers: always an SQLite file in the test's
// temporary directory, and Postgres when PRCHAT_TEST_DATABASE_URL names one
// (each test then gets a schema of its own, dropped when it ends).
//
// When PRCHAT_TEST_PGBOUNCER_URL also names a PgBouncer in front of that
// Postgres server, the tests reach Postgres through it: each test then
// gets a role of its own too, whose default search_path is its schema (a
// PgBouncer before 1.20 refuses search_path among the startup parameters,
// and a SET would not outlive a transaction in transaction pooling). That
// PgBouncer looks the roles up with auth_query (SCRAM), as
// .ci/pgbouncer.ini sets it up.
//
// Use New in the tests of packages that just need a store, and Each to run
// a test against every available database, as the store's own suite does.
package storetest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/prchat/prchat/store"
)

// EnvDatabaseURL is the environment variable naming the Postgres database
// tests may use, e.g.
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
const EnvDatabaseURL = "PRCHAT_TEST_DATABASE_URL"

// EnvPgBouncerURL is the environment variable naming a PgBouncer in front
// of the Postgres server of EnvDatabaseURL, with the database to use and
// the options of prchat's connections through it, e.g.
// postgres://127.0.0.1:6432/test?sslmode=disable&default_query_exec_mode=exec;
// the user and password are each test's own.
const EnvPgBouncerURL = "PRCHAT_TEST_PGBOUNCER_URL"

// maxOpenConns keeps each test's pool small: many tests run at once
// against one Postgres server.
const maxOpenConns = 8

// Database is a kind of database a test can run against.
type Database struct {
	// Name is "sqlite" or "postgres", fit for a subtest name.
	Name string
	// New returns a fresh migrated store of this kind, closed (and, on
	// Postgres, dropped) when the test ends.
	New func(t testing.TB) *store.Store
}

// Databases returns the databases available to tests: SQLite, and Postgres
// when PRCHAT_TEST_DATABASE_URL is set.
func Databases() []Database {
	dbs := []Database{{Name: "sqlite", New: NewSQLite}}
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		dbs = append(dbs, Database{Name: "postgres", New: func(t testing.TB) *store.Store { return NewPostgres(t, u) }})
	}
	return dbs
}

// Each runs f as a parallel subtest on a fresh store of each database that
// Databases returns.
func Each(t *testing.T, f func(t *testing.T, s *store.Store)) {
	t.Helper()
	for _, db := range Databases() {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			f(t, db.New(t))
		})
	}
}

// New returns a fresh migrated store: on Postgres when
// PRCHAT_TEST_DATABASE_URL is set, else on SQLite.
func New(t testing.TB) *store.Store {
	t.Helper()
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return NewPostgres(t, u)
	}
	return NewSQLite(t)
}

// NewSQLite returns a migrated store on an SQLite file in t.TempDir().
func NewSQLite(t testing.TB) *store.Store {
	t.Helper()
	return open(t, store.Config{SQLitePath: filepath.Join(t.TempDir(), "prchat.db"), MaxOpenConns: maxOpenConns})
}

// NewPostgres returns a migrated store on the Postgres database at
// databaseURL, in a new schema of its own that is dropped when the test
// ends.
func NewPostgres(t testing.TB, databaseURL string) *store.Store {
	t.Helper()
	return open(t, store.Config{DatabaseURL: PostgresURL(t, databaseURL), MaxOpenConns: maxOpenConns})
}

// NewPostgresBehindProxy is NewPostgres on the Postgres of EnvDatabaseURL
// reached through a Proxy the test can cut, returned with it; it skips the
// test when EnvDatabaseURL is not set.
func NewPostgresBehindProxy(t testing.TB) (*store.Store, *Proxy) {
	t.Helper()
	raw := os.Getenv(EnvDatabaseURL)
	if raw == "" {
		t.Skip("needs Postgres: set " + EnvDatabaseURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("storetest: %s: %v", EnvDatabaseURL, err)
	}
	proxy := NewProxy(t, u.Host)
	return NewPostgres(t, proxy.URL(raw)), proxy
}

// PostgresURL returns databaseURL with its search_path set to a new, empty
// schema of the test's own, dropped when the test ends: for a test that
// hands a database to a whole daemon, which migrates it itself. When
// databaseURL is PRCHAT_TEST_DATABASE_URL's and PRCHAT_TEST_PGBOUNCER_URL
// is set, it returns a URL through that PgBouncer instead, as a role of the
// test's own whose default search_path is the schema.
func PostgresURL(t testing.TB, databaseURL string) string {
	t.Helper()
	u, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatalf("storetest: parse %s: %v", EnvDatabaseURL, err)
	}
	schema := "prchat_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	bouncer := os.Getenv(EnvPgBouncerURL)
	if bouncer == "" || databaseURL != os.Getenv(EnvDatabaseURL) {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		// The schema is made and dropped on a connection whose search_path
		// names it before it exists, which Postgres allows.
		setup(t, u.String(), []string{`CREATE SCHEMA ` + schema}, []string{`DROP SCHEMA ` + schema + ` CASCADE`})
		return u.String()
	}
	b, err := url.Parse(bouncer)
	if err != nil {
		t.Fatalf("storetest: parse %s: %v", EnvPgBouncerURL, err)
	}
	password := strings.ReplaceAll(uuid.NewString(), "-", "")
	setup(t, databaseURL, []string{
		`CREATE ROLE ` + schema + ` LOGIN PASSWORD '` + password + `'`,
		`CREATE SCHEMA ` + schema + ` AUTHORIZATION ` + schema,
		`ALTER ROLE ` + schema + ` SET search_path = ` + schema,
	}, []string{`DROP SCHEMA ` + schema + ` CASCADE`, `DROP ROLE ` + schema})
	b.User = url.UserPassword(schema, password)
	return b.String()
}

// setup runs the statements up on the database at databaseURL now, and
// down when the test ends.
func setup(t testing.TB, databaseURL string, up, down []string) {
	t.Helper()
	exec := func(stmts []string) error {
		ctx := context.Background()
		s, err := store.Open(ctx, store.Config{DatabaseURL: databaseURL, MaxOpenConns: 1})
		if err != nil {
			return err
		}
		defer s.Close()
		for _, stmt := range stmts {
			if err := s.DB().WithContext(ctx).Exec(stmt).Error; err != nil {
				return fmt.Errorf("%s: %w", strings.Fields(stmt)[0]+" "+strings.Fields(stmt)[1], err)
			}
		}
		return nil
	}
	if err := exec(up); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		if err := exec(down); err != nil {
			t.Errorf("storetest: %v", err)
		}
	})
}

func open(t testing.TB, cfg store.Config) *store.Store {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("storetest: close store: %v", err)
		}
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return s
}
