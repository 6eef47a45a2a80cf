// Package testenv is the shared test environment of replay's tests: an
// in-process Kafka cluster (kfake, the real protocol over TCP), a fresh
// PostgreSQL schema per test, kcat as an independent client to cross-check
// against, and the helpers to wait on an event instead of sleeping: a
// poll (Eventually, WaitFor) and, where no channel or counter shows the
// event, the goroutines' stacks (Goroutines).
//
// Only tests import it. Every resource it hands out is released in
// t.Cleanup. A dependency that is missing (PostgreSQL unreachable, kcat not
// installed) skips the test loudly, except when the environment variable
// CI is set: then the test fails, so CI never passes by skipping.
package testenv

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Eventually calls cond every tick until it returns true, and fails t
// (t.Fatalf) when timeout passes first; msgAndArgs, a format and its
// arguments, say what was awaited (or one func() string, called then, to
// say how far it got). cond runs on the calling goroutine, so it
// may call t.Fatal itself to stop early (say, when the process it waits on
// ended). It reports whether cond became true, for a t whose Fatalf returns.
func Eventually(t TB, timeout, tick time.Duration, cond func() bool, msgAndArgs ...any) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if WaitFor(ctx, tick, cond) != nil && !cond() { // a last call past the deadline
		t.Fatalf("not within %v: %s", timeout, message(msgAndArgs))
		return false
	}
	return true
}

// WaitFor calls cond every tick until it returns true (nil) or ctx ends
// (ctx.Err(), wrapped).
func WaitFor(ctx context.Context, tick time.Duration, cond func() bool) error {
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for condition: %w", ctx.Err())
		case <-ticker.C:
		}
	}
}

// TB is the part of testing.TB the helpers use; *testing.T and *testing.B
// satisfy it, and so does a fake in the helpers' own tests.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

func message(msgAndArgs []any) string {
	switch {
	case len(msgAndArgs) == 0:
		return "condition never held"
	case len(msgAndArgs) == 1:
		if f, ok := msgAndArgs[0].(func() string); ok {
			return f()
		}
		return fmt.Sprint(msgAndArgs[0])
	}
	if format, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(format, msgAndArgs[1:]...)
	}
	return fmt.Sprint(msgAndArgs...)
}

// inCI reports whether the tests run under CI, where a missing dependency
// fails a test instead of skipping it.
func inCI() bool { return os.Getenv("CI") != "" }
