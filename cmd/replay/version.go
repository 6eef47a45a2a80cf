package main

import (
	"cmp"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print replay's version and the Go version that built it",
		Long: "version prints the module version of this build of replay (\"(devel)\" for a build from a checkout, then the\n" +
			"commit it was built from and whether the tree had changes, when the build recorded them) and the Go version.\n" +
			"replay --version prints the same.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(a.stdout, version())
			return err
		},
	}
}

// version says which build of replay this is, from the build information
// the Go toolchain embeds in the binary.
func version() string {
	info, _ := debug.ReadBuildInfo() // nil when the binary carries none
	return versionOf(info)
}

// versionOf words info (nil: the binary carries none) on one line: the
// main module's version, or "(devel)" and the build's vcs.revision and
// vcs.modified settings when it has them, then the Go version, e.g.
// "replay v1.4.0 go1.26.8" or "replay (devel) vcs.revision=296de38
// vcs.modified=true go1.26.8".
func versionOf(info *debug.BuildInfo) string {
	if info == nil {
		return "replay (unknown: the binary carries no build information)"
	}
	v := cmp.Or(info.Main.Version, "(devel)")
	fields := []string{"replay", v}
	if v == "(devel)" {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				fields = append(fields, s.Key+"="+s.Value)
			}
		}
	}
	if info.GoVersion != "" {
		fields = append(fields, info.GoVersion)
	}
	return strings.Join(fields, " ")
}
