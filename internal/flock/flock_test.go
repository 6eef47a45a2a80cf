//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package flock_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/flock"
)

// A second Acquire fails at once while the first holds the lock (flock
// locks belong to open file descriptions: two in one process conflict);
// the file names the holder; Release removes it, and the lock can be taken
// again, also after its directory was removed.
func TestAcquire(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "staging")
	path := filepath.Join(dir, "lock")
	first, err := flock.Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flock.Acquire(path); !errors.Is(err, flock.ErrHeld) {
		t.Fatalf("second Acquire: %v, want ErrHeld", err)
	}
	h, ok := flock.ReadHolder(path)
	host, _ := os.Hostname()
	if !ok || h.PID != os.Getpid() || h.Host != host || time.Since(h.Since) > time.Minute {
		t.Fatalf("holder %+v (%v), want this process on %s, now", h, ok, host)
	}
	if want := "host " + host + ", pid " + strconv.Itoa(os.Getpid()) + ", since " + h.Since.Format(time.RFC3339); h.String() != want {
		t.Fatalf("holder %q, want %q", h, want)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(); err != nil {
		t.Fatalf("a second Release: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("lock file after Release: %v", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	again, err := flock.Acquire(path)
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	again.Release()
}
