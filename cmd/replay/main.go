// Command replay re-reads a window of a Kafka topic and writes the records
// to a sink, driven by a reviewed YAML plan. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
)

// Exit codes (DESIGN.md §6).
const (
	exitOK      = 0
	exitFailed  = 1
	exitInvalid = 2
	exitRefused = 3
)

func main() {
	ctx, stop := signalContext()
	defer stop()
	app := newApp(os.Stdout, os.Stderr)
	err := app.root().ExecuteContext(ctx)
	os.Exit(app.exitCode(err))
}

// signalContext is cancelled by the first SIGINT/SIGTERM (finish the
// in-flight batch, commit, stop); a second one exits at once.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-ch
		fmt.Fprintf(os.Stderr, "\n%s: finishing the in-flight batch and committing (press Ctrl-C again to quit at once)\n", sig)
		cancel()
		<-ch
		fmt.Fprintln(os.Stderr, "quitting at once: the last batch may be written but not committed; a re-run re-delivers it (idempotent)")
		os.Exit(130)
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

// app holds what every command shares: streams and the logger.
type app struct {
	stdout, stderr io.Writer
	log            zerolog.Logger
	logLevel       string
	// exit is set by commands that decide their own exit code.
	exit *int
}

func newApp(stdout, stderr io.Writer) *app {
	return &app{stdout: stdout, stderr: stderr, log: zerolog.Nop()}
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:           "replay",
		Short:         "Re-read a window of a Kafka topic into a sink, exactly and resumably",
		Long:          "replay re-reads a chosen time or offset window of a Kafka topic and writes the records to a sink with an idempotent key,\ncheckpointing in a dedicated consumer group, driven by a reviewed YAML plan.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.setupLog()
		},
	}
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(a.validateCmd(), a.planCmd(), a.runCmd(), a.demoCmd(), a.sandboxCmd())
	return root
}

// setupLog writes zerolog to stderr: readable console lines on a terminal,
// JSON lines otherwise (schedulers, log shippers).
func (a *app) setupLog() error {
	lvl, err := zerolog.ParseLevel(a.logLevel)
	if err != nil || a.logLevel == "" {
		return usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", a.logLevel)}
	}
	var w io.Writer = a.stderr
	if f, ok := a.stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		w = zerolog.ConsoleWriter{Out: f, TimeFormat: time.TimeOnly}
	}
	a.log = zerolog.New(w).Level(lvl).With().Timestamp().Logger()
	return nil
}

// usageError marks a mistake on the command line (exit 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// exitCode maps an error to the exit code and prints it once.
func (a *app) exitCode(err error) int {
	if err == nil {
		if a.exit != nil {
			return *a.exit
		}
		return exitOK
	}
	var invalid *plan.InvalidError
	var refused *runner.SafetyError
	var usage usageError
	if strings.HasPrefix(err.Error(), "unknown command") {
		err = usageError{err}
	}
	switch {
	case errors.As(err, &invalid):
		fmt.Fprintf(a.stderr, "invalid plan:\n%s\n", err)
		return exitInvalid
	case errors.As(err, &usage):
		fmt.Fprintf(a.stderr, "error: %s\nRun 'replay --help' for usage.\n", err)
		return exitInvalid
	case errors.As(err, &refused):
		fmt.Fprintf(a.stderr, "refused: %s\n", err)
		return exitRefused
	}
	fmt.Fprintf(a.stderr, "error: %s\n", err)
	return exitFailed
}

// args wraps cobra's argument checks as usage errors.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}
