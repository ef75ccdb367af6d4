package store

import (
	"container/list"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"modernc.org/sqlite"
)

// statementsPerConn bounds the statements a SQLite connection keeps
// prepared; the least recently used is finalized first. The store runs a
// few dozen distinct statements, more only for unusual batch sizes.
const statementsPerConn = 128

// openSQLitePool opens a pool of SQLite connections (modernc's driver, no
// cgo) on dsn whose connections keep the statements they run prepared.
//
// SQLite compiles every statement before it runs it, and compiling costs
// more than running the small statements of a turn: without the cache,
// parsing was 14–18% of an embedded serve's CPU. gorm's own PrepareStmt mode
// does not help inside transactions, where database/sql prepares a
// statement for the transaction alone, so the cache lives with the
// connection, under database/sql, and serves transactions and single
// statements alike.
func openSQLitePool(dsn string) (*sql.DB, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(cachingConnector{c}), nil
}

// cachingConnector opens cachingConns.
type cachingConnector struct{ driver.Connector }

func (c cachingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	inner, ok := conn.(sqliteConn)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("sqlite connection %T lacks the context methods", conn)
	}
	return &cachingConn{sqliteConn: inner, stmts: map[string]*list.Element{}, lru: list.New()}, nil
}

// sqliteConn is what modernc's connections implement and a cachingConn
// passes on, so that database/sql keeps using the context-aware paths.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// cachingConn is a SQLite connection that runs statements through a cache
// of prepared ones. database/sql uses a connection from one goroutine at a
// time, so the cache needs no lock.
type cachingConn struct {
	sqliteConn
	stmts map[string]*list.Element // of *cachedStmt, by query
	lru   *list.List               // most recently used first
}

// cachedStmt is a prepared statement; busy while rows of it are open, when
// the same query runs unprepared rather than reset them.
type cachedStmt struct {
	query string
	stmt  sqliteStmt
	busy  bool
}

type sqliteStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// Unwrap returns the driver's own connection.
func (c *cachingConn) Unwrap() driver.Conn { return c.sqliteConn }

// prepared returns the statement of query, preparing it the first time;
// nil if it is in use (or cannot be cached), when the caller runs the
// query unprepared.
func (c *cachingConn) prepared(ctx context.Context, query string) (*cachedStmt, error) {
	if e, ok := c.stmts[query]; ok {
		c.lru.MoveToFront(e)
		cs := e.Value.(*cachedStmt)
		if cs.busy {
			return nil, nil
		}
		return cs, nil
	}
	st, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	s, ok := st.(sqliteStmt)
	if !ok {
		_ = st.Close()
		return nil, nil
	}
	cs := &cachedStmt{query: query, stmt: s}
	c.stmts[query] = c.lru.PushFront(cs)
	for c.lru.Len() > statementsPerConn {
		old := c.lru.Back().Value.(*cachedStmt)
		if old.busy {
			break // in use: evicted by a later prepare
		}
		c.evict(old)
	}
	return cs, nil
}

func (c *cachingConn) evict(cs *cachedStmt) {
	c.lru.Remove(c.stmts[cs.query])
	delete(c.stmts, cs.query)
	_ = cs.stmt.Close()
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cs, err := c.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		return c.sqliteConn.ExecContext(ctx, query, args)
	}
	return cs.stmt.ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cs, err := c.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		return c.sqliteConn.QueryContext(ctx, query, args)
	}
	rows, err := cs.stmt.QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	r, ok := rows.(sqliteRows)
	if !ok {
		_ = rows.Close()
		return nil, fmt.Errorf("sqlite rows %T lack the column type methods", rows)
	}
	cs.busy = true
	return &cachedRows{sqliteRows: r, release: func() { cs.busy = false }}, nil
}

// Close finalizes the cached statements, then closes the connection.
func (c *cachingConn) Close() error {
	var errs []error
	for _, e := range c.stmts {
		errs = append(errs, e.Value.(*cachedStmt).stmt.Close())
	}
	c.stmts, c.lru = nil, nil
	return errors.Join(append(errs, c.sqliteConn.Close())...)
}

// sqliteRows is what modernc's rows implement; cachedRows passes it on so
// that database/sql's ColumnTypes keep their database type names.
type sqliteRows interface {
	driver.Rows
	driver.RowsColumnTypeDatabaseTypeName
	driver.RowsColumnTypeLength
	driver.RowsColumnTypeNullable
	driver.RowsColumnTypePrecisionScale
	driver.RowsColumnTypeScanType
}

// cachedRows are rows of a cached statement, which is free again once they
// are closed.
type cachedRows struct {
	sqliteRows
	release func()
}

func (r *cachedRows) Close() error {
	err := r.sqliteRows.Close()
	if r.release != nil {
		r.release()
		r.release = nil
	}
	return err
}
