package atomicfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// LockName is the lock file Lock keeps in a folder.
const LockName = ".dcdit.lock"

// Holder says who holds a folder's lock.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
}

func (h Holder) String() string {
	return fmt.Sprintf("process %d on host %s since %s", h.PID, h.Host, h.Started.Format(time.RFC3339))
}

// BusyError is Lock's answer when another process holds the folder.
type BusyError struct {
	Dir    string
	Holder Holder // zero when the lock file could not be read
}

func (e *BusyError) Error() string {
	who := "another process (its lock file is unreadable)"
	if e.Holder.PID != 0 {
		who = e.Holder.String()
	}
	return fmt.Sprintf("%s is in use by %s (lock file %s); wait for it to finish, or choose another folder",
		e.Dir, who, filepath.Join(e.Dir, LockName))
}

// Folder is a held folder lock.
type Folder struct {
	path string
	f    *os.File
}

// Lock keeps other processes out of dir (which must exist) until Unlock:
// a second Lock on the same folder, from this process or another, fails
// with a *BusyError naming the holder's pid, host and start time. The lock
// is the operating system's (flock where there is one), so it dies with
// its process: a lock file left by a process that was killed is taken
// over, and rewritten with the new holder.
func Lock(dir string) (*Folder, error) {
	path := filepath.Join(dir, LockName)
	// A holder that unlocks removes the file; one that opened it just
	// before then holds a lock on a file no longer there. Retrying on the
	// file now at the path closes that gap.
	for range 10 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		busy, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		if busy {
			h, _ := readHolder(path)
			f.Close()
			return nil, &BusyError{Dir: dir, Holder: h}
		}
		if same, err := samePath(f, path); err != nil || !same {
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("lock %s: %w", dir, err)
			}
			continue
		}
		if err := writeHolder(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		return &Folder{path: path, f: f}, nil
	}
	return nil, fmt.Errorf("lock %s: the lock file keeps changing under us", dir)
}

// Unlock removes the lock file and releases the lock. It is safe on a nil
// Folder and to call twice.
func (l *Folder) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	// Removed while still held, so that nobody locks the old file between.
	err := os.Remove(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

func samePath(f *os.File, path string) (bool, error) {
	a, err := f.Stat()
	if err != nil {
		return false, err
	}
	b, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(a, b), nil
}

func writeHolder(f *os.File) error {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	text, err := json.Marshal(Holder{PID: os.Getpid(), Host: host, Started: time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(append(text, '\n'), 0); err != nil {
		return err
	}
	return f.Sync()
}

func readHolder(path string) (Holder, error) {
	var h Holder
	text, err := os.ReadFile(path)
	if err != nil {
		return h, err
	}
	err = json.Unmarshal(text, &h)
	return h, err
}
