//go:build unix

package atomicfile

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive flock without waiting; busy says another
// open file holds it. The kernel drops the lock when its holder dies.
func tryLock(f *os.File) (busy bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}
