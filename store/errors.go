package store

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// A unique constraint as each dialect reports its violation: Postgres by
// the constraint's name, SQLite by the columns of its index.
type uniqueKey struct {
	name    string
	columns []string
}

// The unique keys whose violation a method maps to a domain answer. The
// names are those of the migrations.
func busyKey() uniqueKey {
	return uniqueKey{"turns_one_pending_idx", []string{"turns.conversation_id"}}
}

func turnNumberKey() uniqueKey {
	return uniqueKey{"turns_conversation_id_number_key", []string{"turns.conversation_id", "turns.number"}}
}

func reviewVersionKey() uniqueKey {
	return uniqueKey{"reviews_repository_id_pr_version_key", []string{"reviews.repository_id", "reviews.pr", "reviews.version"}}
}

// violates reports whether err is a violation of the unique key k.
func violates(err error, k uniqueKey) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505" && pgErr.ConstraintName == k.name
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		if liteErr.Code() != sqlite3.SQLITE_CONSTRAINT_UNIQUE && liteErr.Code() != sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
			return false
		}
		// "constraint failed: UNIQUE constraint failed: t.a, t.b (2067)"
		_, cols, ok := strings.Cut(liteErr.Error(), "UNIQUE constraint failed: ")
		if !ok {
			return false
		}
		if i := strings.LastIndex(cols, " ("); i >= 0 {
			cols = cols[:i]
		}
		got := strings.Split(cols, ",")
		if len(got) != len(k.columns) {
			return false
		}
		for i, c := range got {
			if strings.TrimSpace(c) != k.columns[i] {
				return false
			}
		}
		return true
	}
	return false
}

// violatesForeignKey reports whether err is a foreign key violation.
func violatesForeignKey(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23503"
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		return liteErr.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
	}
	return false
}
