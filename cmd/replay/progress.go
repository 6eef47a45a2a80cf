package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/sinks/registry"
)

const (
	// progressRefresh is how often the progress display reads the job's
	// progress and redraws.
	progressRefresh = 200 * time.Millisecond
	// maxPartitionBars: a run with more partitions to read shows the total
	// bar only (a bar each would not fit a terminal).
	maxPartitionBars = 12
	// rateSpan is the time over which rates (and so ETAs) are averaged.
	rateSpan = 10 * time.Second
	// maxETA: a longer ETA shows as "-" (the rate is about zero).
	maxETA = 100 * 24 * time.Hour
)

// showsProgress reports whether run draws the progress display: stderr is
// a terminal, and the records do not stream to the same terminal.
func (a *app) showsProgress(s plan.Sink) bool {
	if a.jsonLogs.Load() || a.console == nil {
		return false
	}
	f, ok := a.rawStdout.(*os.File)
	return !registry.Describe(s).WritesStdout || !ok || !isatty.IsTerminal(f.Fd())
}

// showProgress draws job's progress on stderr while it runs, from a
// goroutine it owns; log lines print above the bars, redacted. The returned
// func draws the final state and waits: call it when Run returned.
func (a *app) showProgress(job *runner.Job) func() {
	d := newProgressDisplay(a.rawStderr, job.Resolution.Topic, job.Progress(), progressOptions{})
	a.console.divert(redactWriter{d.p, a.secrets})
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(progressRefresh)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				d.update(job.Progress())
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		a.console.restore(func() { d.finish(job.Progress()) })
	}
}

// progressOptions adjust the display; the zero value suits a terminal.
type progressOptions struct {
	// now is the clock of the rates; default time.Now.
	now func() time.Time
	// width is the lines' width off a terminal (mpb's default: 80).
	width int
}

// progressDisplay draws a run's progress with mpb: a bar per partition with
// work to do (maxPartitionBars at most) and a total bar, each with the
// offsets done of the range, the records written, the rate and the ETA.
// It redraws only when update or finish call for it.
type progressDisplay struct {
	p       *mpb.Progress
	refresh chan any
	// stopped is closed when mpb stopped (after finish, or on a failed
	// redraw: the run goes on without the display).
	stopped chan any
	now     func() time.Time
	parts   map[int32]*progressBar
	total   *progressBar
}

// progressBar is one bar and what its decorators print; update writes the
// text, mpb's goroutine reads it.
type progressBar struct {
	bar              *mpb.Bar
	written, offsets rateWindow
	text             atomic.Pointer[barText]
}

type barText struct {
	written, rate, eta string
	done               bool
}

func newProgressDisplay(w io.Writer, topic string, s runner.Snapshot, o progressOptions) *progressDisplay {
	if o.now == nil {
		o.now = time.Now
	}
	d := &progressDisplay{refresh: make(chan any), stopped: make(chan any), now: o.now, parts: map[int32]*progressBar{}}
	opts := []mpb.ContainerOption{mpb.WithOutput(w), mpb.WithManualRefresh(d.refresh), mpb.WithShutdownNotifier(d.stopped)}
	if o.width > 0 {
		opts = append(opts, mpb.WithWidth(o.width))
	}
	d.p = mpb.New(opts...)
	work := slices.DeleteFunc(slices.Clone(s.Partitions), func(ps runner.PartitionSnapshot) bool { return ps.From >= ps.End })
	if len(work) <= maxPartitionBars {
		for _, ps := range work {
			d.parts[ps.Partition] = d.addBar(fmt.Sprintf("%s/%d", topic, ps.Partition), ps.Offsets())
		}
	}
	d.total = d.addBar("total", s.Offsets)
	d.update(s)
	return d
}

func (d *progressDisplay) addBar(name string, total int64) *progressBar {
	b := &progressBar{}
	b.text.Store(&barText{})
	text := func(f func(*barText) string, wc decor.WC) decor.Decorator {
		return decor.Any(func(decor.Statistics) string { return f(b.text.Load()) }, wc)
	}
	b.bar = d.p.AddBar(total,
		mpb.PrependDecorators(decor.Name(name, decor.WCSyncWidthR)),
		mpb.AppendDecorators(
			decor.CountersNoUnit("%d/%d offsets", decor.WCSyncSpace),
			decor.NewPercentage("%d", decor.WCSyncSpace),
			text(func(t *barText) string { return t.written }, decor.WCSyncSpace),
			text(func(t *barText) string { return t.rate }, decor.WCSyncSpace),
			// Left-aligned, after a space.
			decor.OnAbort(decor.OnComplete(text(func(t *barText) string { return t.eta }, decor.WCSyncWidthR), " done"), " stopped"),
		),
	)
	return b
}

// update moves the bars to s and redraws.
func (d *progressDisplay) update(s runner.Snapshot) {
	now := d.now()
	for _, ps := range s.Partitions {
		if b := d.parts[ps.Partition]; b != nil {
			b.set(now, ps.Written, ps.Replayed(), ps.Remaining())
		}
	}
	d.total.set(now, s.Written, s.Replayed, s.Remaining)
	select {
	case d.refresh <- now:
	case <-d.stopped:
	}
}

// finish draws s, the run's end, and stops: bars short of their end are
// left as they are, marked stopped. mpb draws the bars' last frame.
func (d *progressDisplay) finish(s runner.Snapshot) {
	d.update(s)
	for _, b := range d.parts {
		b.bar.Abort(false) // no-op on a complete bar
	}
	d.total.bar.Abort(false)
	d.p.Wait()
}

func (b *progressBar) set(now time.Time, written, replayed, remaining int64) {
	if b.text.Load().done {
		return // the rate it ended with stays
	}
	t := &barText{written: fmt.Sprintf("%d written", written), rate: rateString(b.written.add(now, written)) + " rec/s", done: remaining == 0}
	t.eta = " ETA -"
	if r := b.offsets.add(now, replayed); r > 0 && float64(remaining)/r < maxETA.Seconds() {
		t.eta = " ETA " + time.Duration(float64(remaining)/r*float64(time.Second)).Round(time.Second).String()
	}
	b.text.Store(t)
	b.bar.SetCurrent(replayed)
}

func rateString(r float64) string {
	if r >= 10000 {
		return fmt.Sprintf("%.1fk", r/1000)
	}
	return fmt.Sprintf("%.0f", r)
}

// rateWindow is the rate of a growing count over the last rateSpan.
type rateWindow struct {
	samples []rateSample
}

type rateSample struct {
	t time.Time
	v int64
}

// add records v at t and returns the rate per second since the oldest
// sample of the span (0 until two samples are apart).
func (w *rateWindow) add(t time.Time, v int64) float64 {
	w.samples = append(w.samples, rateSample{t, v})
	for len(w.samples) > 2 && t.Sub(w.samples[1].t) >= rateSpan {
		w.samples = w.samples[1:]
	}
	first := w.samples[0]
	dt := t.Sub(first.t).Seconds()
	if dt <= 0 {
		return 0
	}
	return float64(v-first.v) / dt
}

// consoleWriter is where the console logger writes on a terminal: stderr,
// or while the progress display is drawn, above its bars.
type consoleWriter struct {
	mu       sync.Mutex
	out      io.Writer
	diverted io.Writer
}

func (w *consoleWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.diverted != nil {
		if n, err := w.diverted.Write(b); err == nil {
			return n, nil
		}
	}
	return w.out.Write(b)
}

// notice prints msg on a line of its own after the terminal's echo of ^C,
// or over it above the bars (a carriage return first: mpb redraws from the
// cursor's column).
func (w *consoleWriter) notice(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.diverted != nil {
		if _, err := fmt.Fprintf(w.diverted, "\r%s\n", msg); err == nil {
			return
		}
	}
	fmt.Fprintf(w.out, "\n%s\n", msg)
}

// divert sends what is written to to (the display's mpb container: it
// prints it above the bars at the next redraw).
func (w *consoleWriter) divert(to io.Writer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.diverted = to
}

// restore runs last (the display's final draw) with writes held, then
// writes go to stderr again.
func (w *consoleWriter) restore(last func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	last()
	w.diverted = nil
}
