package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
)

// The daemons through PgBouncer (--pgbouncer-url): a PgBouncer in
// transaction pooling mode in front of --database-url's Postgres, which
// looks roles up with auth_query (as .ci/with-pgbouncer starts one). A
// PgBouncer before 1.20 refuses search_path among the startup parameters,
// so the daemons connect as a role of the bench's own whose default
// search_path is the bench's schema; the bench's own reads go to Postgres
// directly.

// checkPgBouncerURL reports a --pgbouncer-url the bench cannot use.
func checkPgBouncerURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return fmt.Errorf("--pgbouncer-url %q is not a postgres:// URL with a host", raw)
	}
	if u.Query().Has("search_path") {
		return fmt.Errorf("--pgbouncer-url must not set search_path (the bench gives its role a default)")
	}
	return nil
}

// makeBouncerRole makes the role the daemons connect through PgBouncer as:
// it owns schema, whose name it takes, and searches it by default. It sets
// b.daemonURL to the PgBouncer URL as that role.
func (b *bencher) makeBouncerRole(ctx context.Context, admin *sql.DB, schema string) error {
	var r [16]byte
	_, _ = rand.Read(r[:])
	password := hex.EncodeToString(r[:])
	for _, stmt := range []string{
		`CREATE ROLE ` + schema + ` LOGIN PASSWORD '` + password + `'`,
		`ALTER SCHEMA ` + schema + ` OWNER TO ` + schema,
		`ALTER ROLE ` + schema + ` SET search_path = ` + schema,
	} {
		if _, err := admin.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("pgbouncer: %s: %w", strings.Join(strings.Fields(stmt)[:2], " "), err)
		}
		if strings.HasPrefix(stmt, "CREATE ROLE") {
			b.roles = append(b.roles, schema)
		}
	}
	u, err := url.Parse(b.cfg.PgBouncerURL)
	if err != nil {
		return err
	}
	u.User = url.UserPassword(schema, password)
	q := u.Query()
	// A transaction pooler hands a connection's named prepared statements
	// to other clients: run each statement unnamed (see the README).
	q.Set("default_query_exec_mode", cmp.Or(q.Get("default_query_exec_mode"), "exec"))
	u.RawQuery = q.Encode()
	b.daemonURL = u.String()
	return nil
}

// dropBouncerRoles drops the roles makeBouncerRole made (after their
// schemas).
func (b *bencher) dropBouncerRoles(ctx context.Context, admin *sql.DB) {
	for _, role := range b.roles {
		if _, err := admin.ExecContext(ctx, "DROP ROLE "+role); err != nil {
			fmt.Fprintf(b.stderr, "prchat-bench: drop role %s: %v\n", role, err)
		}
	}
}

// daemonDatabaseURL is the PRCHAT_DATABASE_URL of the daemons under test:
// through PgBouncer when the bench was given one, their connections named
// by the application_name of the bench's own (b.daemonApp), so that the
// bench tells their backends from other clients' ("" on SQLite).
func (b *bencher) daemonDatabaseURL() string {
	raw := cmp.Or(b.daemonURL, b.databaseURL)
	if raw == "" || b.daemonApp == "" {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Set("application_name", b.daemonApp)
	u.RawQuery = q.Encode()
	return u.String()
}
