package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A profile flag that fails after --cpu-profile started still ends the
// CPU profile: its file holds a whole (gzipped) profile, not nothing.
func TestProfileFlagFailureEndsCPUProfile(t *testing.T) {
	dir := t.TempDir()
	cpu := filepath.Join(dir, "cpu.pprof")
	cmd, _, stderr := command(t, dir, "--cpu-profile", cpu, "--mem-profile", filepath.Join(dir, "missing", "mem.pprof"), "version")
	_ = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != exitInvalid || !strings.Contains(stderr.String(), "--mem-profile") {
		t.Fatalf("exit %d, want %d naming --mem-profile:\n%s", code, exitInvalid, stderr)
	}
	b, err := os.ReadFile(cpu)
	if err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Fatalf("the CPU profile holds %d bytes (%v), want a gzipped profile", len(b), err)
	}
}
