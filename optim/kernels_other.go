//go:build !amd64 || !gc || purego

package optim

func init() { selectKernels() }
