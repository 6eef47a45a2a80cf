//go:build unix

package sqlite_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/replay-tool/replay/sinks/sqlite"
)

// A path that is a directory or not a regular file is refused with a
// message that says so (SQLite's own is "unable to open database file").
func TestSQLitePathNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{dir: "is a directory", fifo: "is not a regular file"} {
		_, err := sqlite.New(t.Context(), sqlite.Config{Path: path, Table: "t", CreateTable: true})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("New(%s) = %v, want an error saying it %s", path, err, want)
		}
	}
}
