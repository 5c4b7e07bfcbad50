// Command dcdit-tiny is dcdit with the TinyDiT example family registered:
// the same commands, which now also read DC checkpoints of kind "tinydit"
// (dcdit families lists it) and open TinyDiT teacher files (dcdit eval
// --teacher). A family of one's own is made known to the
// CLI this way, by a main package that imports it beside dcdit's.
package main

import (
	"os"

	// Registers kind "tinydit" (its init function).
	_ "github.com/dcdit/dcdit/examples/tinydit"
	"github.com/dcdit/dcdit/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Std()))
}
