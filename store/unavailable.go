package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/prchat/prchat/chat"
)

// messageUnavailable is what a client is told while the database cannot be
// reached; the cause goes to the log.
const messageUnavailable = "The database is unreachable; try again shortly."

// unavailable returns err as a chat error with CodeUnavailable when it says
// that the database cannot be reached (refused or broken connections,
// network errors, a server shutting down or refusing connections), and err
// as it is otherwise. The cause stays in the chain for the log.
func unavailable(err error) error {
	if err == nil || !connectionError(err) || chat.ErrorCode(err) == chat.CodeUnavailable {
		return err
	}
	return &chat.Error{Code: chat.CodeUnavailable, Message: messageUnavailable, Err: err}
}

// connectionError reports whether err is one of a database connection
// rather than of a statement.
func connectionError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The caller's context ended: not an outage. (pgx's own connect
		// timeout is a ConnectError, below.)
		var ce *pgconn.ConnectError
		return errors.As(err, &ce)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection exception
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // admin/crash shutdown, cannot connect now
			return true
		case pgErr.Code == "53300": // too many connections
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne):
		return true
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone), errors.Is(err, pgconn.ErrConnClosed):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	}
	return strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "failed to connect")
}

// registerUnavailable makes every statement of db report a lost database
// as chat's CodeUnavailable.
func registerUnavailable(db *gorm.DB) error {
	cb := db.Callback()
	classify := func(tx *gorm.DB) {
		if tx.Error != nil {
			tx.Error = unavailable(tx.Error)
		}
	}
	for name, err := range map[string]error{
		"create": cb.Create().After("*").Register("prchat:unavailable", classify),
		"query":  cb.Query().After("*").Register("prchat:unavailable", classify),
		"update": cb.Update().After("*").Register("prchat:unavailable", classify),
		"delete": cb.Delete().After("*").Register("prchat:unavailable", classify),
		"row":    cb.Row().After("*").Register("prchat:unavailable", classify),
		"raw":    cb.Raw().After("*").Register("prchat:unavailable", classify),
	} {
		if err != nil {
			return errors.New("register unavailable callback on " + name + ": " + err.Error())
		}
	}
	return nil
}

// transaction runs fn in a transaction of the write connection, with a lost
// database (also at begin and commit) reported as unavailable.
func (s *Store) transaction(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return unavailable(s.write.WithContext(ctx).Transaction(fn))
}
