// Package cmdutil holds what dcdit's commands share: the usage-error type
// that selects exit code 2 and argument validators that produce it.
package cmdutil

import (
	"fmt"

	"github.com/spf13/cobra"
)

// UsageError marks a mistake in how a command was called (wrong flags or
// arguments), as opposed to a failure while doing the work.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef formats a UsageError that points at the command's help.
func Usagef(cmd *cobra.Command, format string, args ...any) error {
	return &UsageError{fmt.Errorf("%s (see '%s --help')", fmt.Sprintf(format, args...), cmd.CommandPath())}
}

// ExactArgs requires exactly n positional arguments, naming them in the error.
func ExactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return Usagef(cmd, "%s takes %d argument(s), %s; got %d", cmd.Name(), n, names, len(args))
		}
		return nil
	}
}
