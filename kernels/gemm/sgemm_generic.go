//go:build !amd64 || !gc || purego

package gemm

// registerPlatform has nothing to add without the amd64 assembly: the
// portable kernel serves float32 too.
func registerPlatform() {}
