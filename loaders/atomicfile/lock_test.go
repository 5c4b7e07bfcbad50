//go:build unix

package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLock(t *testing.T) {
	dir := t.TempDir()
	l, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to open files, so this process's second Lock
	// meets the first as another process's would.
	_, err = Lock(dir)
	var busy *BusyError
	if !errors.As(err, &busy) {
		t.Fatalf("second Lock: err = %v, want a BusyError", err)
	}
	host, _ := os.Hostname()
	if busy.Holder.PID != os.Getpid() || busy.Holder.Host != host || busy.Holder.Started.IsZero() {
		t.Fatalf("holder %+v, want pid %d on %s with a start time", busy.Holder, os.Getpid(), host)
	}
	for _, want := range []string{dir, fmt.Sprintf("process %d on host %s since ", os.Getpid(), host), LockName} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, LockName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Unlock left the lock file: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatalf("second Unlock: %v", err)
	}
	l, err = Lock(dir)
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	l.Unlock()
}

// A lock file left by a killed process (its pid dead, no lock held) is
// taken over and names the new holder.
func TestLockTakesOverAStaleLock(t *testing.T) {
	dir := t.TempDir()
	stale := `{"pid": 999999999, "host": "elsewhere", "started": "2026-01-01T00:00:00Z"}`
	os.WriteFile(filepath.Join(dir, LockName), []byte(stale), 0o644)
	l, err := Lock(dir)
	if err != nil {
		t.Fatalf("a stale lock was not taken over: %v", err)
	}
	defer l.Unlock()
	h, err := readHolder(filepath.Join(dir, LockName))
	if err != nil || h.PID != os.Getpid() {
		t.Fatalf("lock file holder %+v (%v), want this process", h, err)
	}
}

// TestLockHelper is not a test: TestLockAcrossProcesses runs this binary
// with LOCK_HELPER_DIR set to hold that folder's lock until killed.
func TestLockHelper(t *testing.T) {
	dir := os.Getenv("LOCK_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	if _, err := Lock(dir); err != nil {
		fmt.Println("lock:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	time.Sleep(time.Minute)
}

// Another process's lock keeps us out and names it; once it is killed
// (kill -9: no chance to unlock) its lock file is taken over.
func TestLockAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelper$")
	cmd.Env = append(os.Environ(), "LOCK_HELPER_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("helper said %q (%v)", line, err)
	}
	_, err = Lock(dir)
	var busy *BusyError
	if !errors.As(err, &busy) || busy.Holder.PID != cmd.Process.Pid {
		t.Fatalf("err = %v, want the helper (pid %d) named", err, cmd.Process.Pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := Lock(dir)
	if err != nil {
		t.Fatalf("the killed helper's lock was not taken over: %v", err)
	}
	l.Unlock()
}
