// Package iostreams carries a command's input and output streams, so tests
// can run commands against buffers.
package iostreams

import (
	"bytes"
	"io"
)

// IO holds the streams a command reads and writes.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Test returns streams over fresh buffers and the buffers themselves.
func Test() (ios *IO, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IO{In: in, Out: out, Err: errOut}, in, out, errOut
}
