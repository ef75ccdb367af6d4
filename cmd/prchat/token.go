package main

import (
	"cmp"
	"context"
	"io"
	"log/slog"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/cmd/prchat/tokens"
)

// runToken is `prchat token`, on the daemon's database.
func runToken(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	def := tokens.Defaults{DataDir: cmp.Or(getenv("PRCHAT_DATA_DIR"), defaultDataDir()), DatabaseURL: getenv("PRCHAT_DATABASE_URL")}
	open := func(ctx context.Context, dbURL, dataDir string) (chat.TokenStore, func(), error) {
		st, err := openStore(ctx, Config{DatabaseURL: dbURL, DataDir: dataDir}, slog.New(slog.DiscardHandler))
		if err != nil {
			return nil, nil, err
		}
		return st, func() { _ = st.Close() }, nil
	}
	return tokens.Run(ctx, args, def, open, stdout, stderr)
}
