package runner

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
	"github.com/replay-tool/replay/sinks/registry"
)

// t0 is the start of seeded data in tests: recent, so kfake's default
// 7-day retention (by record timestamp) keeps it.
var t0 = time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Hour)

// newTestCluster starts an in-process Kafka cluster for one test.
func newTestCluster(t *testing.T, partitions int32, topics ...string) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.Start(0, partitions, topics...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	return sb
}

// seed produces n order events over [from, from+span) to topic.
func seed(t *testing.T, sb *sandbox.Sandbox, topic string, n int, from time.Time, span time.Duration) sandbox.Seed {
	t.Helper()
	s := sandbox.Seed{Topic: topic, N: n, From: from, To: from.Add(span)}
	if err := sandbox.Produce(context.Background(), sb.Addr, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// testPlan parses a plan from YAML; %ADDR% is replaced by the broker address.
func testPlan(t *testing.T, sb *sandbox.Sandbox, yaml string) *plan.Plan {
	t.Helper()
	yaml = strings.ReplaceAll(yaml, "%ADDR%", sb.Addr)
	p, err := plan.Parse(t.Name()+".yaml", []byte(yaml), plan.LoadOptions{Sinks: registry.Catalog()})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return p
}

func filePlan(t *testing.T, sb *sandbox.Sandbox, window string) (*plan.Plan, string) {
	out := filepath.Join(t.TempDir(), "out.jsonl")
	return testPlan(t, sb, fmt.Sprintf(`
version: 1
name: test-plan
source: {brokers: ["%%ADDR%%"], topic: orders}
group: replay.test
window:
%s
sink: {type: file, path: %s, batch_size: 100}
`, window, out)), out
}

func connect(t *testing.T, p *plan.Plan) *Cluster {
	t.Helper()
	c, err := Connect(context.Background(), p.Source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testOptions(t *testing.T) Options {
	return Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)}
}

// runPlan prepares and runs p into sink (a file sink for the plan when nil).
func runPlan(t *testing.T, ctx context.Context, p *plan.Plan, sink sinks.Sink) (*Job, *Report, error) {
	t.Helper()
	c := connect(t, p)
	job, err := Prepare(ctx, c, p, testOptions(t))
	if err != nil {
		return nil, nil, err
	}
	if sink == nil {
		fs, err := file.NewJSONL(plan.ConfigOf[file.Section](&p.Sink).Path, job.RunID())
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		sink = fs
	}
	rep, err := job.Run(ctx, sink)
	return job, rep, err
}

// coords are "partition/offset" strings.
func readCoords(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		r := gjson.ParseBytes(sc.Bytes())
		out = append(out, fmt.Sprintf("%d/%d", r.Get("partition").Int(), r.Get("offset").Int()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

// commits returns the group's committed offsets per partition.
func commits(t *testing.T, c *Cluster, group, topic string, parts ...int32) map[int32]group.Checkpoint {
	t.Helper()
	cps, err := c.Checkpoints(context.Background(), group, topic, parts)
	if err != nil {
		t.Fatal(err)
	}
	return cps
}

func diff(want, got []string) string {
	w, g := map[string]bool{}, map[string]bool{}
	for _, s := range want {
		w[s] = true
	}
	for _, s := range got {
		g[s] = true
	}
	var missing, extra []string
	for s := range w {
		if !g[s] {
			missing = append(missing, s)
		}
	}
	for s := range g {
		if !w[s] {
			extra = append(extra, s)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 5 {
		missing = append(missing[:5], "...")
	}
	if len(extra) > 5 {
		extra = append(extra[:5], "...")
	}
	return fmt.Sprintf("missing %v, extra %v", missing, extra)
}
