// Command dcdit upcycles pretrained diffusion transformers into DC-DiT
// models whose compute budget is chosen at inference time.
package main

import (
	"os"

	"github.com/dcdit/dcdit/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Std()))
}
