// Command gentestdata writes the tiny checkpoints and the corpus of broken
// inputs under testdata/ that the loader and CLI tests read. Its output is
// deterministic; a test regenerates it into a temporary folder and compares,
// so the committed files cannot drift from this program.
//
//	go generate ./loaders/   (runs: go run ./internal/cmd/gentestdata -out testdata)
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dcdit/dcdit/internal/testckpt"
)

func main() {
	out := flag.String("out", "testdata", "folder to write checkpoints/ and bad/ into")
	flag.Parse()
	if err := testckpt.Generate(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gentestdata:", err)
		os.Exit(1)
	}
}
