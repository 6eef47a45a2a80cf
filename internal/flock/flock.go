// Package flock keeps a second replay process off an output or a staging
// directory: an exclusive flock(2) on a lock file, which records the
// holder (process ID, host, when it took the lock) for the message the
// other process prints. The kernel releases the lock when the holder
// dies, so a crash never leaves a stale lock behind.
package flock

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrHeld is returned by Acquire for a lock another open file holds
// (another process, or another sink of this one: flock locks belong to
// open file descriptions).
var ErrHeld = errors.New("lock held")

// Holder is what a lock file records of the process holding it.
type Holder struct {
	PID   int
	Host  string
	Since time.Time
}

// String reads "host h, pid 123, since 2026-12-07T03:33:02Z", as the
// group's hold names its holder.
func (h Holder) String() string {
	var parts []string
	if h.Host != "" {
		parts = append(parts, "host "+h.Host)
	}
	parts = append(parts, "pid "+strconv.Itoa(h.PID))
	if !h.Since.IsZero() {
		parts = append(parts, "since "+h.Since.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, ", ")
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// self is this process as a lock file records it.
func self() []byte {
	host, _ := os.Hostname()
	return fmt.Appendf(nil, "pid %d\nhost %s\nsince %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
}

// ReadHolder reads the holder the lock file at path records; ok is false
// when it records none (no file, or one its holder has not written yet).
func ReadHolder(path string) (h Holder, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Holder{}, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			h.PID, _ = strconv.Atoi(v)
		case "host":
			h.Host = v
		case "since":
			h.Since, _ = time.Parse(time.RFC3339, v)
		}
	}
	return h, h.PID > 0
}
