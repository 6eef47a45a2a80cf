package main

import (
	"os"
	"path/filepath"
)

// stateEnv overrides where replay keeps its local run records.
const stateEnv = "REPLAY_STATE_DIR"

// stateDir is where plain runs keep their local run records (the runs/
// folder below it): $REPLAY_STATE_DIR, else $XDG_STATE_HOME/replay, else
// ~/.local/state/replay; "" when none can be told (no record is kept).
func stateDir() string {
	if d := os.Getenv(stateEnv); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "replay")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".local", "state", "replay")
}
