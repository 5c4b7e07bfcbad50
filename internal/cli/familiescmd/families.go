// Package familiescmd implements `dcdit families`: the model families this
// build registers (the kinds a DC checkpoint's backbone may be).
package familiescmd

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"

	// The built-in families; a build with a family of its own imports its
	// package beside this.
	_ "github.com/dcdit/dcdit/families"
)

// Options are the flags of `dcdit families`.
type Options struct {
	IO   *iostreams.IO
	JSON bool
}

// NewCmd returns the families command. runF replaces the action in tests
// that only check flag parsing; nil lists.
func NewCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: ios}
	cmd := &cobra.Command{
		Use:   "families",
		Short: "List the model families (backbone kinds) this build knows",
		Long: `Families lists the model families registered in this build: the backbone
kinds a DC checkpoint may hold ("backbone.kind" in its dcdit.config), each
with one line on what it is. A family is one Go package that registers
itself (package family); see docs/families.md for adding one.`,
		Args: cmdutil.ExactArgs(0, "none"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return Run(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON object {kind: description}")
	return cmd
}

// Run prints the registered families.
func Run(opts *Options) error {
	kinds := family.Kinds()
	if opts.JSON {
		out := map[string]string{}
		for _, k := range kinds {
			f, err := family.Lookup(k)
			if err != nil {
				return err
			}
			out[k] = f.Describe()
		}
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, k := range kinds {
		f, err := family.Lookup(k)
		if err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "%-8s %s\n", k, f.Describe())
	}
	return nil
}
