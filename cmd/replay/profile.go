package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// addProfileFlag adds the hidden --cpu-profile and --mem-profile flags: a
// pprof CPU profile of the whole command, and a heap profile written when
// it ends (go tool pprof -sample_index=alloc_space FILE shows what was
// allocated), for performance reports.
func (a *app) addProfileFlag(root *cobra.Command) {
	var cpuPath, memPath string
	root.PersistentFlags().StringVar(&cpuPath, "cpu-profile", "", "write a pprof CPU profile of the command to this file")
	root.PersistentFlags().StringVar(&memPath, "mem-profile", "", "write a pprof heap profile to this file when the command ends")
	_ = root.PersistentFlags().MarkHidden("cpu-profile")
	_ = root.PersistentFlags().MarkHidden("mem-profile")
	pre := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		var stops []func()
		a.stopProfile = func() { // also when a later flag fails
			for _, stop := range stops {
				stop()
			}
		}
		if cpuPath != "" {
			f, err := os.Create(cpuPath)
			if err != nil {
				return usageError{fmt.Errorf("--cpu-profile: %w", err)}
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
				return fmt.Errorf("--cpu-profile: %w", err)
			}
			stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
		}
		if memPath != "" {
			f, err := os.Create(memPath)
			if err != nil {
				return usageError{fmt.Errorf("--mem-profile: %w", err)}
			}
			stops = append(stops, func() {
				if err := errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close()); err != nil {
					fmt.Fprintf(os.Stderr, "--mem-profile: %v\n", err)
				}
			})
		}
		return pre(cmd, args)
	}
}
