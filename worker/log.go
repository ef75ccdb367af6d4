package worker

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hibiken/asynq"
)

// asynqLogger adapts a *slog.Logger to asynq's Logger.
type asynqLogger struct{ l *slog.Logger }

var _ asynq.Logger = asynqLogger{}

func (a asynqLogger) log(level slog.Level, args []any) {
	ctx := context.Background() // asynq's logger carries no context
	if !a.l.Enabled(ctx, level) {
		return
	}
	a.l.Log(ctx, level, fmt.Sprint(args...))
}

func (a asynqLogger) Debug(args ...any) { a.log(slog.LevelDebug, args) }
func (a asynqLogger) Info(args ...any)  { a.log(slog.LevelInfo, args) }
func (a asynqLogger) Warn(args ...any)  { a.log(slog.LevelWarn, args) }
func (a asynqLogger) Error(args ...any) { a.log(slog.LevelError, args) }

// Fatal logs at error level. asynq itself never calls it; a library has no
// business ending the process, so it does not exit.
func (a asynqLogger) Fatal(args ...any) { a.log(slog.LevelError, args) }

// asynqLevel is the asynq level matching the lowest level l logs, but at
// least info: asynq's debug messages ("All queues are empty") come every
// TaskCheckInterval.
func asynqLevel(l *slog.Logger) asynq.LogLevel {
	ctx := context.Background()
	switch {
	case l.Enabled(ctx, slog.LevelInfo):
		return asynq.InfoLevel
	case l.Enabled(ctx, slog.LevelWarn):
		return asynq.WarnLevel
	default:
		return asynq.ErrorLevel
	}
}
