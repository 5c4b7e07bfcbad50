package loaders

// The tiny checkpoints and the broken-input corpus under testdata/ are
// written by a program, so that they can be rebuilt and checked.
//go:generate go run ../internal/cmd/gentestdata -out ../testdata
