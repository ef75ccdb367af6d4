package store

import (
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/callbacks"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
	"gorm.io/gorm/migrator"
	"gorm.io/gorm/schema"
)

// sqliteDialect is gorm's view of SQLite over a pool of our own (see
// openSQLitePool). The schema comes from the goose migrations, so it knows
// no more of DDL than gorm's interface asks; what it must get right is
// quoting, placeholders and RETURNING, which SQLite has had since 3.35.
type sqliteDialect struct {
	pool gorm.ConnPool
}

var (
	_ gorm.Dialector                     = sqliteDialect{}
	_ gorm.SavePointerDialectorInterface = sqliteDialect{}
)

func (sqliteDialect) Name() string { return "sqlite" }

func (d sqliteDialect) Initialize(db *gorm.DB) error {
	db.ConnPool = d.pool
	callbacks.RegisterDefaultCallbacks(db, &callbacks.Config{
		CreateClauses:        []string{"INSERT", "VALUES", "ON CONFLICT", "RETURNING"},
		UpdateClauses:        []string{"UPDATE", "SET", "FROM", "WHERE", "RETURNING"},
		DeleteClauses:        []string{"DELETE", "FROM", "WHERE", "RETURNING"},
		LastInsertIDReversed: true,
	})
	db.ClauseBuilders["LIMIT"] = func(c clause.Clause, b clause.Builder) {
		// SQLite has no OFFSET without a LIMIT: -1 is "no limit".
		if l, ok := c.Expression.(clause.Limit); ok && (l.Limit == nil || *l.Limit < 0) && l.Offset > 0 {
			b.WriteString("LIMIT -1 ")
		}
		c.Build(b)
	}
	db.ClauseBuilders["FOR"] = func(c clause.Clause, b clause.Builder) {
		// SQLite locks the whole database, not rows.
		if _, ok := c.Expression.(clause.Locking); !ok {
			c.Build(b)
		}
	}
	return nil
}

func (d sqliteDialect) Migrator(db *gorm.DB) gorm.Migrator {
	return migrator.Migrator{Config: migrator.Config{DB: db, Dialector: d}}
}

// DataTypeOf names SQLite's type affinities (gorm's migrator alone asks).
func (sqliteDialect) DataTypeOf(f *schema.Field) string {
	switch f.DataType {
	case schema.Bool, schema.Int, schema.Uint:
		return "integer"
	case schema.Float:
		return "real"
	case schema.Time:
		return "datetime"
	case schema.Bytes:
		return "blob"
	default:
		return "text"
	}
}

func (sqliteDialect) DefaultValueOf(f *schema.Field) clause.Expression {
	if f.AutoIncrement {
		return clause.Expr{SQL: "NULL"}
	}
	return clause.Expr{SQL: "DEFAULT"}
}

func (sqliteDialect) BindVarTo(w clause.Writer, _ *gorm.Statement, _ any) { w.WriteByte('?') }

// QuoteTo quotes each part of a dotted name in backticks, doubling any
// backtick inside.
func (sqliteDialect) QuoteTo(w clause.Writer, name string) {
	for i, part := range strings.Split(name, ".") {
		if i > 0 {
			w.WriteByte('.')
		}
		w.WriteByte('`')
		w.WriteString(strings.ReplaceAll(part, "`", "``"))
		w.WriteByte('`')
	}
}

func (sqliteDialect) Explain(sql string, vars ...any) string {
	return logger.ExplainSQL(sql, nil, `"`, vars...)
}

func (sqliteDialect) SavePoint(tx *gorm.DB, name string) error {
	return tx.Exec("SAVEPOINT " + name).Error
}

func (sqliteDialect) RollbackTo(tx *gorm.DB, name string) error {
	return tx.Exec("ROLLBACK TO SAVEPOINT " + name).Error
}
