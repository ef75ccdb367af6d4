// Package tokens is the `prchat token` command: it makes, lists and
// revokes API tokens directly in the database, so that the first admin
// token can be made before any API accepts one.
package tokens

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/cmd/internal/cliflag"
)

const tokenUsage = `Usage:
  prchat token create --name NAME --scope read|ask|admin [--repo owner/name]...
  prchat token list
  prchat token revoke ID

Works on the database directly (PRCHAT_DATABASE_URL, or the embedded SQLite
in PRCHAT_DATA_DIR), so the first admin token can be made before the daemon
runs or while it runs; a running daemon enforces it within a second.
create prints the token once, on standard output; only its hash is stored.
Clients send it as PRCHAT_TOKEN (prchat ask, prchat review) or as
Authorization: Bearer <token>.
`

// repoFlags collects repeated --repo values.
type repoFlags []string

func (r *repoFlags) String() string     { return strings.Join(*r, ",") }
func (r *repoFlags) Set(v string) error { *r = append(*r, v); return nil }

// Defaults are where the database is unless flags say otherwise: the
// daemon's PRCHAT_DATA_DIR and PRCHAT_DATABASE_URL.
type Defaults struct {
	DataDir, DatabaseURL string
}

// Opener opens the token store of a database (dbURL, or the embedded SQLite
// in dataDir) and returns its close.
type Opener func(ctx context.Context, dbURL, dataDir string) (chat.TokenStore, func(), error)

// UsageError is a mistake in the command line.
type UsageError = cliflag.UsageError

// Run is `prchat token`: it makes, lists and revokes API tokens. Asked for
// help it prints it to stdout and returns flag.ErrHelp; a mistake in the
// command line is a UsageError of one line.
func Run(ctx context.Context, args []string, def Defaults, open Opener, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return UsageError{Msg: "a token subcommand is required: create, list or revoke"}
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "create", "list", "revoke":
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, tokenUsage)
		return flag.ErrHelp
	default:
		return UsageError{Msg: fmt.Sprintf("unknown token subcommand %q: create, list or revoke", sub)}
	}
	fs := flag.NewFlagSet("prchat token "+sub, flag.ContinueOnError)
	dataDir := fs.String("data-dir", def.DataDir, "data directory of the embedded database (PRCHAT_DATA_DIR)")
	dbURL := fs.String("database-url", def.DatabaseURL, "Postgres URL; empty: the embedded SQLite (PRCHAT_DATABASE_URL)")
	var name, scope string
	var repos repoFlags
	if sub == "create" {
		fs.StringVar(&name, "name", "", "what the token is for (required)")
		fs.StringVar(&scope, "scope", "", "read, ask or admin (required)")
		fs.Var(&repos, "repo", "limit the token to this repository (`owner/name`); repeat for more")
	}
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.Usage = func() {
		fmt.Fprintf(&help, "%s\nFlags of prchat token %s:\n", tokenUsage, sub)
		cliflag.Print(&help, fs)
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, _ = stdout.Write(help.Bytes())
			return err
		}
		return UsageError{Msg: err.Error()}
	}
	var id string
	switch {
	case sub == "create" && (name == "" || scope == ""):
		return UsageError{Msg: "--name and --scope are required"}
	case sub == "create" && !chat.Scope(scope).Valid():
		return UsageError{Msg: fmt.Sprintf("--scope must be read, ask or admin, not %q", scope)}
	case sub == "revoke" && fs.NArg() != 1:
		return UsageError{Msg: "give the id of the token to revoke (prchat token list shows them)"}
	case sub == "revoke":
		id = fs.Arg(0)
	case fs.NArg() > 0:
		return UsageError{Msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}

	st, closeStore, err := open(ctx, *dbURL, *dataDir)
	if err != nil {
		return err
	}
	defer closeStore()
	access, err := chat.NewAccess(chat.AccessConfig{}, st)
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		t, value, err := access.CreateToken(ctx, name, chat.Scope(scope), repos)
		if chat.ErrorCode(err) == chat.CodeInvalid {
			// A bad name or repository is a mistake in the command line.
			return UsageError{Msg: chat.ErrorMessage(err)}
		}
		if err != nil {
			return fmt.Errorf("%s", chat.ErrorMessage(err))
		}
		fmt.Fprintln(stdout, value)
		fmt.Fprintf(stderr, "made token %s (%s, scope %s%s); it is shown this once: keep it now\n", t.ID, t.Name, t.Scope, repoNote(t.Repos))
	case "list":
		ts, err := access.Tokens(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tNAME\tSCOPE\tREPOSITORIES\tCREATED\tLAST USED\tREVOKED")
		for _, t := range ts {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Scope, cmp.Or(strings.Join(t.Repos, ","), "all"),
				t.CreatedAt.Format(time.RFC3339), when(t.LastUsedAt), when(t.RevokedAt))
		}
		return w.Flush()
	case "revoke":
		t, err := access.RevokeToken(ctx, id)
		if err != nil {
			return fmt.Errorf("%s", chat.ErrorMessage(err))
		}
		fmt.Fprintf(stdout, "revoked token %s (%s)\n", t.ID, t.Name)
	}
	return nil
}

func repoNote(repos []string) string {
	if len(repos) == 0 {
		return ", every repository"
	}
	return ", only " + strings.Join(repos, ", ")
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}
