package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// addProfileFlag adds the hidden --cpu-profile flag: a pprof CPU profile of
// the whole command, for performance reports (go tool pprof FILE).
func (a *app) addProfileFlag(root *cobra.Command) {
	var path string
	root.PersistentFlags().StringVar(&path, "cpu-profile", "", "write a pprof CPU profile of the command to this file")
	_ = root.PersistentFlags().MarkHidden("cpu-profile")
	pre := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if path != "" {
			f, err := os.Create(path)
			if err != nil {
				return usageError{fmt.Errorf("--cpu-profile: %w", err)}
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
				return fmt.Errorf("--cpu-profile: %w", err)
			}
			a.stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
		}
		return pre(cmd, args)
	}
}
