package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/replay-tool/replay/runner/sandbox"
)

type sandboxOptions struct {
	port       int
	topic      string
	partitions int32
	records    int
	// compression is the codec of the seeded record batches ("" or none:
	// uncompressed).
	compression string
	// create are empty topics to create besides topic (a kafka sink's
	// target), with the same number of partitions.
	create []string
}

func (a *app) sandboxCmd() *cobra.Command {
	o := sandboxOptions{port: 9092, topic: "orders", partitions: 6}
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Run an embedded Kafka broker on a local port, optionally seeded, until Ctrl-C",
		Long: "sandbox starts an in-process Kafka broker (kfake, real protocol) on 127.0.0.1:PORT for trying plans and\n" +
			"other clients (kcat -b 127.0.0.1:9092 -L). With --records it seeds --topic with order events stamped over\n" +
			"the last 24 hours. Everything is in memory and gone when it stops.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.partitions < 1 || o.records < 0 {
				return usageError{fmt.Errorf("--partitions must be at least 1 and --records at least 0")}
			}
			for _, t := range o.create {
				if t == "" || t == o.topic {
					return usageError{fmt.Errorf("--create-topic %q: name a topic other than --topic %s", t, o.topic)}
				}
			}
			liftSoftMemoryLimit()
			codec, err := sandbox.Codec(o.compression)
			if err != nil {
				return usageError{err}
			}
			sb, err := sandbox.Start(o.port, o.partitions, append([]string{o.topic}, o.create...)...)
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("%w: another process listens on port %d; pick another with --port (--port 0 takes any free port)", err, o.port)
			}
			if err != nil {
				return err
			}
			defer sb.Close()
			span := ""
			if o.records > 0 {
				now := time.Now().UTC().Truncate(time.Second)
				from := now.Add(-24 * time.Hour)
				if err := sandbox.Produce(cmd.Context(), sb.Addr, sandbox.Seed{Topic: o.topic, N: o.records, From: from, To: now, Compression: codec}); err != nil {
					return err
				}
				span = fmt.Sprintf(" stamped %s to %s UTC", from.Format("2006-01-02T15:04:05"), now.Format("2006-01-02T15:04:05"))
			}
			empty := ""
			if len(o.create) > 0 {
				empty = fmt.Sprintf("; empty topics %s", strings.Join(o.create, ", "))
			}
			fmt.Fprintf(a.stdout, "Kafka sandbox on %s: topic %s (partitions 0-%d, %d records%s)%s. Ctrl-C to stop.\n", sb.Addr, o.topic, o.partitions-1, o.records, span, empty)
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().Var(portFlag{&o.port}, "port", "loopback port to listen on (0 = any free port)")
	cmd.Flags().StringVar(&o.topic, "topic", o.topic, "topic to create")
	cmd.Flags().Int32Var(&o.partitions, "partitions", o.partitions, "partitions of the topic")
	cmd.Flags().IntVar(&o.records, "records", 0, "order events to seed, stamped over the last 24 hours")
	cmd.Flags().StringVar(&o.compression, "compression", "none", "codec of the seeded record batches: none, gzip, snappy, lz4 or zstd")
	cmd.Flags().StringSliceVar(&o.create, "create-topic", nil, "also create these empty topics, with as many partitions (a kafka sink's target: replay does not create topics); repeat or separate with commas")
	return cmd
}
