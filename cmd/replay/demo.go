package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/plans"
	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/sinks/registry"
)

const defaultDemoPlan = "plans/demo.yaml"

type demoOptions struct {
	plan        string
	records     int
	partitions  int32
	metricsAddr string
}

func (a *app) demoCmd() *cobra.Command {
	o := demoOptions{plan: defaultDemoPlan, records: 200000, partitions: 6}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole job on an embedded Kafka broker: seed a day of orders, replay a 2-hour window to a file",
		Long: "demo starts an in-process Kafka broker on a free loopback port, seeds the topic \"orders\" with a day of order\n" +
			"events (CreateTime spread over the last 24 hours), runs plans/demo.yaml against it, and checks that the output\n" +
			"file holds exactly the records of the window. With --plan and a sink whose output is not one JSON lines file\n" +
			"(a directory of Parquet objects, a CSV file, a database), it checks what the run reports instead: it read\n" +
			"exactly the records of the window, and wrote or counted each one. Nothing to install.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.demo(cmd.Context(), o) },
	}
	cmd.Flags().StringVar(&o.plan, "plan", o.plan, "plan to run against the embedded broker")
	cmd.Flags().IntVar(&o.records, "records", o.records, "number of order events to seed")
	cmd.Flags().Int32Var(&o.partitions, "partitions", o.partitions, fmt.Sprintf("partitions of the orders topic (1 to %d)", maxDemoPartitions))
	cmd.Flags().StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics of the run at http://HOST:PORT/metrics while it runs")
	return cmd
}

// maxDemoPartitions bounds demo's --partitions: the embedded broker
// creates every partition before it seeds, so a typo (100000) stalls the
// demo instead of showing it.
const maxDemoPartitions = 1000

func (a *app) demo(ctx context.Context, o demoOptions) error {
	if o.records < 1 || o.partitions < 1 {
		return usageError{fmt.Errorf("--records and --partitions must be at least 1")}
	}
	if o.partitions > maxDemoPartitions {
		return usageError{fmt.Errorf("--partitions %d: the demo takes 1 to %d; for more, seed 'replay sandbox --partitions N' and run a plan against it", o.partitions, maxDemoPartitions)}
	}
	liftSoftMemoryLimit() // the embedded broker holds every seeded record
	if _, err := os.Stat(o.plan); err != nil && o.plan == defaultDemoPlan {
		// Outside a checkout: run the copy embedded in the binary.
		dir, err := os.MkdirTemp("", "replay-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.plan = filepath.Join(dir, "demo.yaml")
		if err := os.WriteFile(o.plan, plans.Demo, 0o644); err != nil {
			return err
		}
	} else if err != nil { // before seeding a broker for nothing
		return usageError{fmt.Errorf("--plan: %w", err)}
	}
	sb, err := sandbox.Start(0, o.partitions, "orders")
	if err != nil {
		return err
	}
	defer sb.Close()
	now := time.Now().UTC().Truncate(time.Second)
	seed := sandbox.Seed{Topic: "orders", N: o.records, From: now.Add(-24 * time.Hour), To: now}
	fmt.Fprintf(a.stdout, "embedded Kafka on %s: seeding topic orders (%d partitions) with %d order events from %s to %s\n",
		sb.Addr, o.partitions, o.records, seed.From.Format(time.RFC3339), seed.To.Format(time.RFC3339))
	t0 := time.Now()
	if err := sandbox.Produce(ctx, sb.Addr, seed); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "seeded in %s\n\n", time.Since(t0).Round(time.Millisecond))
	if err := os.Setenv("REPLAY_DEMO_BROKERS", sb.Addr); err != nil {
		return err
	}
	p, err := a.loadPlanFile(o.plan, false)
	if err != nil {
		return err
	}
	rep, err := a.run(ctx, o.plan, runOptions{yes: true, metricsAddr: o.metricsAddr, noRecord: true}) // the demo asks nothing: it writes to a scratch file
	if err != nil || rep == nil {
		return err
	}
	if p.Window.Kind() != plan.WindowTime {
		return nil
	}
	if d := registry.Describe(p.Sink); d.JSONLines != nil {
		if path := d.JSONLines(&p.Sink); path != "" {
			return a.verifyDemo(path, seed, rep)
		}
	}
	return a.summariseDemo(p, seed, rep)
}

// seededInWindow is the number of seeded records stamped in the run's
// window.
func seededInWindow(seed sandbox.Seed, rep *runner.Report) int {
	want := 0
	for i := 0; i < seed.N; i++ {
		if ts := seed.Timestamp(i); !ts.Before(rep.From) && ts.Before(rep.To) {
			want++
		}
	}
	return want
}

// summariseDemo checks, for a sink whose output the demo cannot read back,
// that the run read exactly the seeded records stamped in the window and
// wrote, dead-lettered or skipped each one, as its report says.
func (a *app) summariseDemo(p *plan.Plan, seed sandbox.Seed, rep *runner.Report) error {
	read, written, skipped := rep.Totals()
	var failed int64
	for _, pr := range rep.Partitions {
		for _, n := range pr.Errors {
			failed += n
		}
	}
	want := int64(seededInWindow(seed, rep))
	if read != want {
		return fmt.Errorf("demo check failed: %d seeded records are inside the window, the run read %d", want, read)
	}
	if written+skipped+failed != read {
		return fmt.Errorf("demo check failed: the run read %d records, the sink wrote %d and the run skipped %d and failed %d", read, written, skipped, failed)
	}
	fmt.Fprintf(a.stdout, "\noutput: %s (%s sink)\ncheck passed: the run read exactly the %d seeded records stamped in [%s, %s); the sink wrote %d, %d were skipped\n",
		sinkWhere(p.Sink), p.Sink.Type, want, rep.From.Format(time.RFC3339), rep.To.Format(time.RFC3339), written, skipped+failed)
	return nil
}

// verifyDemo checks the JSON lines file at path against the seed: exactly
// the records whose timestamp is in the resolved window, each once.
func (a *app) verifyDemo(path string, seed sandbox.Seed, rep *runner.Report) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	type coord struct{ p, o int64 }
	seen := map[coord]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		r := gjson.ParseBytes(sc.Bytes())
		c := coord{r.Get("partition").Int(), r.Get("offset").Int()}
		if seen[c] {
			return fmt.Errorf("demo check failed: partition %d offset %d is in the output twice", c.p, c.o)
		}
		seen[c] = true
		if ts := r.Get("timestamp").Time(); ts.Before(rep.From) || !ts.Before(rep.To) {
			return fmt.Errorf("demo check failed: partition %d offset %d has timestamp %s, outside the window", c.p, c.o, ts.Format(time.RFC3339Nano))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	want := seededInWindow(seed, rep)
	if want != len(seen) {
		return fmt.Errorf("demo check failed: %d seeded records are inside the window, the output has %d", want, len(seen))
	}
	abs, _ := filepath.Abs(path)
	fmt.Fprintf(a.stdout, "\noutput: %s\ncheck passed: the output holds exactly the %d seeded records stamped in [%s, %s), each once\n",
		abs, want, rep.From.Format(time.RFC3339), rep.To.Format(time.RFC3339))
	return nil
}
