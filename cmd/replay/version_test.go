package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionCommand: 'replay version' and 'replay --version' print the
// same line, naming the Go version, on stdout, and exit 0.
func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := replay(t, args...)
		if r.code != exitOK || !strings.HasPrefix(r.stdout, "replay ") || !strings.HasSuffix(r.stdout, " "+runtime.Version()+"\n") ||
			strings.Count(r.stdout, "\n") != 1 || r.stderr != "" {
			t.Errorf("replay %s: want one line 'replay VERSION ... %s', got %s", args[0], runtime.Version(), r)
		}
		if r.stdout != version()+"\n" {
			t.Errorf("replay %s printed %q, want %q", args[0], r.stdout, version())
		}
	}
	if r := replay(t, "version", "extra"); r.code != exitInvalid {
		t.Errorf("replay version extra: want exit %d, got %s", exitInvalid, r)
	}
}

// TestVersionOf: a released build shows its module version; a build from
// a checkout shows (devel) with the commit and whether the tree was
// modified, when the build recorded them.
func TestVersionOf(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}, {Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "296de38c0ffee"}, {Key: "vcs.time", Value: "2026-12-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}, Settings: vcs}, "replay v1.4.0 go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			"replay (devel) vcs.revision=296de38c0ffee vcs.modified=true go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "replay (devel) go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8"}, "replay (devel) go1.26.8"}, // a test binary's
		{nil, "replay (unknown: the binary carries no build information)"},
	} {
		if got := versionOf(tc.info); got != tc.want {
			t.Errorf("versionOf(%+v) = %q, want %q", tc.info, got, tc.want)
		}
	}
}
