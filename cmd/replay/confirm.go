package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/replay-tool/replay/runner"
)

// errDeclined ends a run the user did not confirm (exit 1, as terraform
// apply does when its prompt is answered with anything but yes).
var errDeclined = errors.New("cancelled: nothing was written and no checkpoint changed")

// confirmRun asks on the terminal whether to go ahead with the job whose
// table was just printed: when it has work to do, or discards another
// run's checkpoints (--restart). A job with nothing to do is not asked about.
func (a *app) confirmRun(ctx context.Context, in io.Reader, jobs ...*runner.Job) error {
	var q strings.Builder
	remaining := int64(0)
	var topics []string
	for _, job := range jobs {
		if d := job.Discarded(); len(d) > 0 {
			what := "partitions"
			if len(jobs) > 1 {
				what = job.Resolution.Topic + " partitions"
			}
			fmt.Fprintf(&q, "--restart discards the checkpoints of an earlier run in group %s (%s %v). ", job.Plan.Group, what, d)
		}
		for _, r := range job.Resolution.Ranges {
			remaining += max(r.End-resumeFrom(job, r), 0)
		}
		topics = append(topics, job.Resolution.Topic)
	}
	if remaining == 0 && q.Len() == 0 {
		return nil
	}
	// y or yes (any case) is a yes, anything else a no.
	fmt.Fprintf(a.stderr, "%sReplay %d offsets of %s into %s? [y/N] ", q.String(), remaining, strings.Join(topics, ", "), sinkWhere(jobs[0].Plan.Sink))
	line, err := readAnswer(ctx, in)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		fmt.Fprintln(a.stderr)
	}
	if s := strings.ToLower(strings.TrimSpace(line)); s != "y" && s != "yes" {
		return errDeclined
	}
	return nil
}

// readAnswer reads one line from in, or returns ctx's error as soon as ctx
// is done (a signal at the prompt; the reading goroutine ends with the
// process). io.EOF only when the input ended before any answer.
func readAnswer(ctx context.Context, in io.Reader) (string, error) {
	type answer struct {
		line string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(in).ReadString('\n')
		if errors.Is(err, io.EOF) && line != "" {
			err = nil
		}
		ch <- answer{line, err}
	}()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case a := <-ch:
		return a.line, a.err
	}
}
