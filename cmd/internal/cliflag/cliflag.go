// Package cliflag is what the command lines of prchat's commands (prchat
// and prchat-bench) share: Parse reads flags, telling a request for help
// from a mistake (UsageError, exit status 2), and Print writes the flags
// as their help shows them: double-dash names, as the README and the error
// messages spell them.
package cliflag

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// Print writes each flag of fs: "--name VALUE", then its help and default.
func Print(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		value, help := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if value != "" {
			line += " " + value
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(help, "\n", "\n    \t"))
		switch {
		case f.DefValue == "" || f.DefValue == "false" || f.DefValue == "0" || f.DefValue == "[]":
		default:
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}
