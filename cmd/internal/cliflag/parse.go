package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
)

// UsageError is a mistake in a command line: the command exits 2 and
// points to --help instead of printing its usage.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// Usagef is a UsageError of a formatted message.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Sprintf(format, args...)}
}

// Parse parses args with fs. Asked for help, it prints fs's usage to help
// and returns flag.ErrHelp; a mistake is a UsageError.
func Parse(fs *flag.FlagSet, args []string, help io.Writer) error {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = help.Write(out.Bytes())
		return err
	case err != nil:
		return UsageError{err.Error()}
	}
	return nil
}
