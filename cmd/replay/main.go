// Command replay re-reads a window of a Kafka topic and writes the records
// to a sink, driven by a reviewed YAML plan. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/replay-tool/replay/internal/memlimit"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/sinks"
)

// Exit codes: 0 done, 1 failed, 2 invalid plan or usage, 3 refused (a
// *fault.SafetyError, a sink's refusal, a sink that lost records it had
// made durable).
const (
	exitOK      = 0
	exitFailed  = 1
	exitInvalid = 2
	exitRefused = 3
)

func main() {
	// The soft limit (runner.SoftMemoryLimit) keeps garbage from growing
	// the heap past the bounded live set; the guard raises it while a run
	// keeps more alive. GOMEMLIMIT overrides it.
	guard := os.Getenv("GOMEMLIMIT") == ""
	if guard {
		debug.SetMemoryLimit(runner.SoftMemoryLimit())
	}
	app := newApp(os.Stdout, os.Stderr)
	ctx, stop := app.signalContext()
	defer stop()
	if guard {
		go memlimit.Guard(ctx, 250*time.Millisecond, runner.SoftMemoryLimit(), nil)
	}
	err := app.root().ExecuteContext(ctx)
	if app.stopProfile != nil {
		app.stopProfile()
	}
	os.Exit(app.exitCode(err))
}

// liftSoftMemoryLimit removes main's soft heap limit (unless GOMEMLIMIT
// set one) for a command that runs the embedded broker, which keeps every
// record in memory: under the run's limit its collector ran back to back.
func liftSoftMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(math.MaxInt64)
	}
}

// signalContext is cancelled by the first SIGINT/SIGTERM (a run finishes
// the in-flight batch, commits and stops); a second one exits at once.
// Each tells the user what it does (signalMessage), if anything.
func (a *app) signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-ch
		a.notify(a.signalMessage(sig))
		cancel()
		<-ch
		if msg := a.signalMessage(nil); msg != "" {
			a.notify(msg)
		}
		os.Exit(130)
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

// signalMessage says what a signal does: during a run, the first one
// finishes the in-flight batch and commits; before it, the command is just
// cancelled. A nil sig asks about the second signal.
func (a *app) signalMessage(sig os.Signal) string {
	running := a.running.Load()
	switch {
	case sig == nil && running:
		return "quitting at once: the last batch may be written but not committed; a re-run re-delivers it (idempotent)"
	case sig == nil:
		return ""
	case running:
		return fmt.Sprintf("%s: finishing the in-flight batch and committing (press Ctrl-C again to quit at once)", sig)
	}
	return fmt.Sprintf("%s: cancelled", sig)
}

// app holds what every command shares: streams and the logger.
type app struct {
	// stdout and stderr redact the secrets of the loaded plan (redact.go);
	// rawStdout carries the records of a stdout sink as they are.
	stdout, stderr       io.Writer
	rawStdout, rawStderr io.Writer
	secrets              *redactor
	log                  zerolog.Logger
	logLevel             string
	// stopProfile ends the profiles of --cpu-profile and --mem-profile.
	stopProfile func()
	// jsonLogs is set when stderr is not a terminal: every stderr line of a
	// command is then JSON, notices and the final error too.
	jsonLogs atomic.Bool
	// console is where log lines go on a terminal (nil otherwise): stderr,
	// or above the bars of the progress display (progress.go).
	console *consoleWriter
	// exit is set by commands that decide their own exit code.
	exit *int
	// detailedExit is plan's --detailed-exitcode: 2 then means work to do,
	// so an invalid plan or a usage mistake exits 1 instead.
	detailedExit bool
	// running is set once a run reads and writes records (after the
	// confirmation): a signal then finishes the in-flight batch.
	running atomic.Bool
	// probeTimeout bounds the first exchange with the source cluster
	// (runner.DefaultProbeTimeout when zero).
	probeTimeout time.Duration
	// args are the command-line arguments when not os.Args[1:] (tests).
	args []string
	// at is --at: the logical now of relative windows and schedules (zero:
	// the clock).
	at time.Time
}

func newApp(stdout, stderr io.Writer) *app {
	s := &redactor{}
	return &app{stdout: redactWriter{stdout, s}, stderr: redactWriter{stderr, s}, rawStdout: stdout, rawStderr: stderr,
		secrets: s, log: zerolog.Nop()}
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
	root.Version = version()
	// --version prints the line 'replay version' prints.
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(a.stdout) // help and usage go to the app's streams, not straight to os.Stdout
	root.SetErr(a.stderr)
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		// The parser stops at the first mistake: a --detailed-exitcode after
		// it must still make the usage error exit 1.
		args := a.args
		if args == nil {
			args = os.Args[1:]
		}
		if i := slices.Index(args, "--"); i >= 0 {
			args = args[:i]
		}
		if slices.Contains(args, "--detailed-exitcode") || slices.Contains(args, "--detailed-exitcode=true") {
			a.detailedExit = true
		}
		return usageError{err}
	})
	a.addProfileFlag(root)
	root.PersistentFlags().Var(timeFlag{&a.at}, "at", "behave as if it were this RFC 3339 time (a scheduler's logical date): relative windows and schedules are resolved against it")
	root.AddCommand(a.validateCmd(), a.planCmd(), a.runCmd(), a.demoCmd(), a.sandboxCmd(), a.statusCmd(), a.resetCmd(), a.schemaCmd(), a.testCmd(), a.versionCmd())
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
	f, ok := a.rawStderr.(*os.File)
	terminal := ok && isatty.IsTerminal(f.Fd())
	if terminal {
		a.console = &consoleWriter{out: a.stderr}
		w = zerolog.ConsoleWriter{Out: a.console, TimeFormat: time.TimeOnly}
	}
	a.log = zerolog.New(w).Level(lvl).With().Timestamp().Logger()
	a.jsonLogs.Store(!terminal)
	return nil
}

// notify tells the user about something outside the command's flow (a
// signal): a log line whatever --log-level says when logs are JSON, else a
// plain line. It may be called from any goroutine.
func (a *app) notify(msg string) {
	if a.jsonLogs.Load() {
		a.noticeLog().Warn().Msg(msg)
		return
	}
	if a.console != nil {
		a.console.notice(msg) // above the progress bars, if drawn
		return
	}
	fmt.Fprintf(a.stderr, "\n%s\n", msg)
}

// noticeLog is a JSON logger on stderr that ignores --log-level.
func (a *app) noticeLog() *zerolog.Logger {
	l := zerolog.New(a.stderr).With().Timestamp().Logger()
	return &l
}

// usageError marks a mistake on the command line (exit 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// exitCode maps an error to the exit code and prints it once: as a JSON
// log line (with the exit code) when logs are JSON, else as text between
// the verdict's prefix and help; a hinted verdict's help is the runner's
// hint, worded for the command line (in a JSON line, after the message).
func (a *app) exitCode(err error) int {
	v := a.verdictOf(err)
	if err == nil {
		return v.code
	}
	jsonLogs := a.jsonLogs.Load()
	if hint := hints[fault.HintOf(err)]; v.hinted && hint != "" && jsonLogs {
		err = fmt.Errorf("%w. %s", err, hint)
	} else if v.hinted && hint != "" {
		v.help = hint + "\n"
	}
	if jsonLogs {
		a.noticeLog().Error().Int("exit_code", v.code).Msg(strings.TrimPrefix(v.prefix, "error: ") + err.Error())
	} else {
		fmt.Fprintf(a.stderr, "%s%s\n%s", v.prefix, err, v.help)
	}
	return v.code
}

// verdict is how an error ends the process: exit code, the prefix before
// it, and the help after it (or, when hinted, the runner's hint).
type verdict struct {
	code   int
	prefix string
	help   string
	hinted bool
}

// verdictOf classifies the error that ends a command (nil: exit 0). The
// exit code it gives is the process's, also written in a run's --report.
func (a *app) verdictOf(err error) verdict {
	if err == nil {
		if a.exit != nil {
			return verdict{code: *a.exit}
		}
		return verdict{code: exitOK}
	}
	var invalid *plan.InvalidError
	var refused *fault.SafetyError
	var usage usageError
	invalidCode := exitInvalid
	if a.detailedExit {
		invalidCode = exitFailed
	}
	switch {
	case errors.As(err, &invalid):
		return verdict{code: invalidCode, prefix: "invalid plan:\n"}
	case errors.As(err, &usage) || strings.HasPrefix(err.Error(), "unknown command"):
		return verdict{code: invalidCode, prefix: "error: ", help: "Run 'replay --help' for usage.\n"}
	case errors.As(err, &refused), errors.Is(err, sinks.ErrRefused), errors.Is(err, sinks.ErrLost):
		// ErrLost: the sink lost records below the group's commits, so
		// neither this run nor a resume can publish a whole output.
		return verdict{code: exitRefused, prefix: "refused: ", hinted: true}
	case errors.Is(err, sinks.ErrFenced):
		// Another process of the same replay holds the transactional id:
		// this one must stop, as for a group in use.
		return verdict{code: exitRefused, prefix: "refused: ", help: "Another process runs this replay: let it finish, or stop it and re-run the same command to resume.\n"}
	}
	return verdict{code: exitFailed, prefix: "error: ", hinted: true}
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

// choiceFlag is a string flag that takes one of a few values: a wrong one
// is a flag error (exit 2), as for an unknown flag.
type choiceFlag struct {
	value   *string
	choices []string
}

func newChoiceFlag(value *string, choices ...string) *choiceFlag {
	return &choiceFlag{value: value, choices: choices}
}

func (f *choiceFlag) String() string { return *f.value }
func (f *choiceFlag) Type() string   { return "string" }

func (f *choiceFlag) Set(s string) error {
	if slices.Contains(f.choices, s) {
		*f.value = s
		return nil
	}
	return fmt.Errorf("want %s or %s", strings.Join(f.choices[:len(f.choices)-1], ", "), f.choices[len(f.choices)-1])
}

// timeFlag is an RFC 3339 time with a zone.
type timeFlag struct{ value *time.Time }

func (f timeFlag) String() string {
	if f.value.IsZero() {
		return ""
	}
	return f.value.Format(time.RFC3339)
}
func (f timeFlag) Type() string { return "time" }

func (f timeFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("want an RFC 3339 time with a zone, e.g. 2026-11-30T04:00:00Z, got %q", s)
	}
	// A future window holds no record yet but would be recorded as replayed.
	if t.After(time.Now().Add(time.Minute)) {
		return fmt.Errorf("%s is in the future: give a time that has passed (a scheduler's logical date), or leave --at out to use the clock", s)
	}
	if t.Before(time.Unix(0, 0)) {
		return fmt.Errorf("%s is before 1970-01-01T00:00:00Z, where Kafka's timestamps start", s)
	}
	*f.value = t
	return nil
}

// setExit makes the command exit with code when cond holds, whatever it
// returns.
func (a *app) setExit(code int, cond bool) {
	if cond {
		a.exit = &code
	}
}

// now is the logical now: --at, else the clock.
func (a *app) now() time.Time {
	if !a.at.IsZero() {
		return a.at
	}
	return time.Now()
}

// portFlag is a TCP port flag: 0..65535 (0: any free port).
type portFlag struct{ value *int }

func (f portFlag) String() string { return strconv.Itoa(*f.value) }
func (f portFlag) Type() string   { return "int" }

func (f portFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 65535 {
		return errors.New("want a port number 0..65535 (0: any free port)")
	}
	*f.value = n
	return nil
}
