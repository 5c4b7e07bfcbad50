// Package cli builds dcdit's cobra command tree. Commands are thin: they
// parse flags into an options struct, call the packages that do the work,
// and print a table or, with --json, one JSON object.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/internal/cli/bench"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/convert"
	"github.com/dcdit/dcdit/internal/cli/data"
	"github.com/dcdit/dcdit/internal/cli/decode"
	"github.com/dcdit/dcdit/internal/cli/evaluate"
	"github.com/dcdit/dcdit/internal/cli/familiescmd"
	"github.com/dcdit/dcdit/internal/cli/featnet"
	"github.com/dcdit/dcdit/internal/cli/fidcmd"
	"github.com/dcdit/dcdit/internal/cli/flops"
	"github.com/dcdit/dcdit/internal/cli/inspect"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/cli/prompts"
	"github.com/dcdit/dcdit/internal/cli/recipe"
	"github.com/dcdit/dcdit/internal/cli/sample"
	"github.com/dcdit/dcdit/internal/cli/teacachecmd"
	"github.com/dcdit/dcdit/internal/cli/train"
)

// Std returns the process's standard streams.
func Std() *iostreams.IO { return &iostreams.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr} }

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// Main runs dcdit with args and returns the process exit code. Every error
// ends as one line on stderr; nothing panics out of a command.
func Main(args []string, io *iostreams.IO) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(io.Err, "dcdit: internal error: %v (please report this with the command you ran)\n", r)
			code = exitError
		}
	}()
	root := NewRootCmd(io)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(io.Err, "dcdit: %v\n", err)
	var usage *cmdutil.UsageError
	if errors.As(err, &usage) {
		return exitUsage
	}
	return exitError
}

// NewRootCmd builds the dcdit command tree writing to io.
func NewRootCmd(io *iostreams.IO) *cobra.Command {
	root := &cobra.Command{
		Use:   "dcdit",
		Short: "Upcycle pretrained diffusion transformers into DC-DiT models with elastic compute",
		Long: `dcdit loads pretrained DiT and Z-Image checkpoints, inspects them, and grafts
a learned encoder-router-decoder onto them so that one checkpoint runs at any
compute budget chosen at inference time.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(io.Out)
	root.SetErr(io.Err)
	root.SetIn(io.In)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return cmdutil.Usagef(c, "%v", err)
	})
	// With Args set, cobra hands unknown subcommands to this check instead
	// of failing with a plain error.
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return cmdutil.Usagef(cmd, "unknown command %q", args[0])
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
	root.AddCommand(inspect.NewCmd(io, nil), sample.NewCmd(io, nil), bench.NewCmd(io, nil), newVersionCmd(io))
	root.AddCommand(data.NewCmd(io, nil))
	root.AddCommand(decode.NewCmd(io, nil), fidcmd.NewCmd(io, nil), prompts.NewCmd(io, nil))
	root.AddCommand(evaluate.NewCmd(io, nil))
	root.AddCommand(featnet.NewCmd(io, nil, nil))
	root.AddCommand(flops.NewCmd(io, nil))
	root.AddCommand(familiescmd.NewCmd(io, nil))
	root.AddCommand(teacachecmd.NewCmd(io, nil))
	root.AddCommand(convert.NewCmd(io, nil))
	root.AddCommand(recipe.NewCmd(io, nil))
	root.AddCommand(train.NewUpcycleCmd(io, nil), train.NewTrainCmd(io, nil))
	return root
}

// Version is set at link time (-ldflags "-X .../internal/cli.Version=v1.2.3");
// otherwise the module version or VCS revision from the build info is shown.
var Version = ""

func newVersionCmd(ios *iostreams.IO) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the dcdit version",
		Args:  cmdutil.ExactArgs(0, "none"),
		RunE: func(cmd *cobra.Command, args []string) error {
			writeVersion(ios.Out)
			return nil
		},
	}
}

func writeVersion(w io.Writer) {
	v, rev := Version, ""
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = s.Value[:12]
			}
			if s.Key == "vcs.modified" && s.Value == "true" && rev != "" {
				rev += "+dirty"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(w, "dcdit %s", v)
	if rev != "" {
		fmt.Fprintf(w, " (%s)", rev)
	}
	fmt.Fprintf(w, " %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
