package testenv

import (
	"runtime"
	"slices"
	"strings"
)

// Goroutines counts the goroutines whose stack (the header line with
// their state, such as [select] or [sleep], and every frame) holds each
// of parts: a test waits on what it means (two Writes queued for the
// writer, a write waiting for a database lock inside the driver's busy
// handler) with Eventually, where no channel or counter shows it.
func Goroutines(parts ...string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(g, p) }) {
			count++
		}
	}
	return count
}
