package convert

import (
	"os"

	"golang.org/x/sys/unix"
)

// copyFileRange copies up to n bytes at src offset off to dst's current
// offset inside the kernel (no copy through user memory), returning how
// many it copied.
func copyFileRange(dst, src *os.File, off, n int64) (int64, error) {
	var copied int
	var copyErr, cerr error
	srcConn, err := src.SyscallConn()
	if err != nil {
		return 0, err
	}
	dstConn, err := dst.SyscallConn()
	if err != nil {
		return 0, err
	}
	err = srcConn.Control(func(sfd uintptr) {
		cerr = dstConn.Control(func(dfd uintptr) {
			copied, copyErr = unix.CopyFileRange(int(sfd), &off, int(dfd), nil, int(n), 0)
		})
	})
	if err == nil {
		err = cerr
	}
	if err == nil {
		err = copyErr
	}
	return int64(copied), err
}
