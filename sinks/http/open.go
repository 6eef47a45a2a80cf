package http

import (
	"context"
	"time"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// Open builds the http sink sp describes (a validated plan section of type
// http); without max_retries it retries DefaultMaxRetries times. On
// error the Sink is nil.
func Open(_ context.Context, sp sinks.Spec) (sinks.Sink, error) {
	c := section(&sp.Plan)
	retries := DefaultMaxRetries
	if c.MaxRetries != nil {
		retries = *c.MaxRetries
	}
	s, err := New(Config{URL: c.URL, Headers: c.Headers, BatchSize: sp.Plan.BatchSize, MaxRetries: retries,
		MaxRetryWait: time.Duration(c.MaxRetryWait), RequestTimeout: time.Duration(c.RequestTimeout), ValueFormat: encode.ValueFormat(c.ValueFormat), Connections: c.Connections, Log: sp.Options.Log})
	if err != nil {
		return nil, err
	}
	return s, nil
}
