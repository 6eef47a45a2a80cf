package runner

// The scenario suite: every file in testdata/scenarios is a topic
// layout, a plan, things that happen during the run, and what must come out
// of it: the (partition, offset) set the sink holds, the commits, the
// report. Each scenario runs against its own kfake cluster over TCP.
//
// Layouts kfake cannot produce are built at the protocol level in
// fetch_test.go (batches whose compacted tail keeps its header; brokers
// that do not return oversized batches). Covered elsewhere: transactions
// and compressed batches read from the middle (hostile_test.go), the
// compacted tail at the end of a range (compaction_test.go), signals and
// SIGKILL-resume (cmd/replay/crash_test.go).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
)

// scenario is one file of testdata/scenarios.
type scenario struct {
	// Description says what the scenario shows; Items are the issue's
	// numbered cases it covers.
	Description string `yaml:"description"`
	Items       []int  `yaml:"items"`
	// Partitions of topic orders (default 1), created with TopicConfig.
	Partitions  int32             `yaml:"partitions"`
	TopicConfig map[string]string `yaml:"topic_config"`
	Produce     []produceStep     `yaml:"produce"`
	// Compact runs kfake's log cleaner after producing; DeleteRecords moves
	// log start offsets (partition: offset) before the run.
	Compact       bool            `yaml:"compact"`
	DeleteRecords map[int32]int64 `yaml:"delete_records"`
	// Source holds extra entries of the plan's source mapping
	// ("isolation: read_uncommitted"); Plan is the rest of the plan (window,
	// allow_data_loss, ...). Both may use {T}, {T+30m}, {T-1h}: times
	// relative to the scenario epoch T, when produce steps start.
	Source    string `yaml:"source"`
	Plan      string `yaml:"plan"`
	BatchSize int    `yaml:"batch_size"`
	// Actions run inside a sink write, while the run is in progress.
	Actions []action `yaml:"actions"`
	// Reject lists records ("p/o") the sink refuses as poison
	// (*record.Error), as a database refuses a row.
	Reject []string `yaml:"reject"`
	Expect expect   `yaml:"expect"`
}

// produceStep writes Count records to one partition.
type produceStep struct {
	Partition int32 `yaml:"partition"`
	Count     int   `yaml:"count"`
	// TS gives each record's timestamp as a duration after T, or "none"
	// for no timestamp (-1); otherwise record i is stamped Start + i*Step
	// (default 0s and 1s), or -1 for all with NoTimestamp.
	TS          []string `yaml:"ts"`
	Start       string   `yaml:"start"`
	Step        string   `yaml:"step"`
	NoTimestamp bool     `yaml:"no_timestamp"`
	// Key is a pattern with %d for i (default: no key); Keys lists keys
	// record by record (cycled).
	Key  string   `yaml:"key"`
	Keys []string `yaml:"keys"`
	// ValueBytes pads values ("p<partition>-<i>") to this size.
	ValueBytes int `yaml:"value_bytes"`
	// Batch is the number of records per produce request (default all).
	Batch       int    `yaml:"batch"`
	Compression string `yaml:"compression"` // gzip | snappy | lz4 | zstd
	Txn         string `yaml:"txn"`         // commit | abort
}

// action runs once, on the sink write that OnWrite names.
type action struct {
	OnWrite struct {
		Partition int32 `yaml:"partition"`
		N         int   `yaml:"n"` // that partition's n-th write (default 1)
	} `yaml:"on_write"`
	DeleteRecords *struct {
		Partition int32 `yaml:"partition"`
		Offset    int64 `yaml:"offset"`
	} `yaml:"delete_records"`
	AddPartitions int32         `yaml:"add_partitions"` // new partition count
	Produce       []produceStep `yaml:"produce"`
}

// expect is what must come out. Offsets in records, commits and
// lost_ranges may be the word "lost": the first offset of the partition's
// first lost range, as the report gives it (where the reader found the
// hole depends on fetch sizes).
type expect struct {
	// PlanError, PrepareError: substrings of the error that stops the
	// scenario at plan loading or at Prepare (resolution).
	PlanError    []string `yaml:"plan_error"`
	PrepareError []string `yaml:"prepare_error"`
	// Error: substrings of Run's error; none means Run succeeds.
	// ErrorIs names a sentinel the error wraps (offset_out_of_range).
	Error   []string `yaml:"error"`
	ErrorIs string   `yaml:"error_is"`
	// Records the sink holds: "p/o" or "p/[a,b)", exactly these.
	Records    []string                 `yaml:"records"`
	Commits    map[int32]string         `yaml:"commits"` // "none" = no commit
	Partitions map[int32]partitionCheck `yaml:"partitions"`
	Added      []int32                  `yaml:"added"`
	// Published says whether the sink's output was published (Finish).
	Published *bool `yaml:"published"`
	// DeadLetters are the records the dead-letter sink holds.
	DeadLetters []string `yaml:"dead_letters"`
	// Again checks a Prepare of the same plan after the run.
	Again *struct {
		NothingToDo bool    `yaml:"nothing_to_do"`
		Ignored     []int32 `yaml:"ignored"`
		Added       []int32 `yaml:"added"`
	} `yaml:"again"`
}

type partitionCheck struct {
	Outcome       string           `yaml:"outcome"`
	Start         *int64           `yaml:"start"`
	End           *int64           `yaml:"end"`
	Written       *int64           `yaml:"written"`
	OutsideWindow *int64           `yaml:"outside_window"`
	Skipped       map[string]int64 `yaml:"skipped"`
	Errors        map[string]int64 `yaml:"errors"`
	Done          *bool            `yaml:"done"`
	Error         []string         `yaml:"error"`
	Lost          *int64           `yaml:"lost"`
	LostRanges    []string         `yaml:"lost_ranges"`
	Detail        []string         `yaml:"detail"`
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		sc := loadScenario(t, f)
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc.run(t, name)
		})
	}
}

func loadScenario(t *testing.T, file string) *scenario {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var sc scenario
	if err := dec.Decode(&sc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if sc.Description == "" || len(sc.Items) == 0 {
		t.Fatalf("%s: a scenario needs a description and the issue items it covers", file)
	}
	return &sc
}

func (sc *scenario) run(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if len(sc.Expect.PlanError) > 0 {
		_, err := plan.Parse(name+".yaml", []byte(sc.planYAML(t, name, "127.0.0.1:9092", t.TempDir())), plan.LoadOptions{Sinks: registry.Catalog()})
		wantError(t, "plan", err, sc.Expect.PlanError)
		return
	}
	sb := newScenarioCluster(t, sc)
	p, err := plan.Parse(name+".yaml", []byte(sc.planYAML(t, name, sb.Addr, t.TempDir())), plan.LoadOptions{Sinks: registry.Catalog()})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	c := connect(t, p)
	job, err := Prepare(ctx, c, p, testOptions(t))
	if len(sc.Expect.PrepareError) > 0 {
		wantError(t, "prepare", err, sc.Expect.PrepareError)
		return
	}
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	sink := &memSink{actions: sc.Actions, act: func(a action) error { return sc.act(ctx, sb, a) }, reject: sc.Reject}
	dead := &memSink{}
	if p.OnError == plan.OnErrorDeadLetter {
		job.DeadLetters = dead
	}
	rep, err := job.Run(ctx, sink)
	sc.check(t, c, p, rep, err, sink)
	if want := sc.Expect.DeadLetters; want != nil {
		if got := dead.coords(); !slices.Equal(sorted(got), sorted(want)) {
			t.Errorf("dead letters %v, want %v", got, want)
		}
	}
	if a := sc.Expect.Again; a != nil {
		// A new connection, as a new `replay plan` process has: the
		// Transport caches metadata for MetadataTTL.
		again, err := Prepare(ctx, connect(t, p), p, testOptions(t))
		if err != nil {
			t.Fatalf("prepare again: %v", err)
		}
		if again.NothingToDo() != a.NothingToDo || !slices.Equal(again.Ignored, a.Ignored) || !slices.Equal(again.Added, a.Added) {
			t.Errorf("prepare again: nothing to do %v, ignored %v, added %v; want %v, %v, %v", again.NothingToDo(), again.Ignored, again.Added, a.NothingToDo, a.Ignored, a.Added)
		}
	}
}

// planYAML is the scenario's plan with the fixed parts filled in.
func (sc *scenario) planYAML(t *testing.T, name, addr, dir string) string {
	batch := sc.BatchSize
	if batch == 0 {
		batch = 100
	}
	src := fmt.Sprintf(`brokers: [%q], topic: orders`, addr)
	if sc.Source != "" {
		src += ", " + sc.Source
	}
	return expandTimes(t, fmt.Sprintf("version: 1\nname: %s\ngroup: replay.%s\nsource: {%s}\n%s\nsink: {type: file, path: %s, batch_size: %d}\n",
		name, name, src, strings.ReplaceAll(sc.Plan, "{DIR}", dir), filepath.Join(dir, "out.jsonl"), batch))
}

var timeMacro = regexp.MustCompile(`\{T([+-][0-9a-z.]+)?\}`)

// expandTimes replaces {T}, {T+30m}, {T-1h} with RFC 3339 times.
func expandTimes(t *testing.T, s string) string {
	t.Helper()
	return timeMacro.ReplaceAllStringFunc(s, func(m string) string {
		d, err := scenarioDuration(timeMacro.FindStringSubmatch(m)[1], 0)
		if err != nil {
			t.Fatalf("time %s: %v", m, err)
		}
		return t0.Add(d).Format(time.RFC3339)
	})
}

func newScenarioCluster(t *testing.T, sc *scenario) *testenv.Kafka {
	t.Helper()
	if sc.Compact && testenv.RealBrokers() != nil {
		// A real log cleaner never compacts the active segment and runs
		// when it is due, so the layouts here are kfake's; the real
		// cleaner is tested against kcat in cmd/replay.
		t.Skip("kfake only: the scenario's compaction is kfake's Compact, which compacts every segment at once")
	}
	sb := testenv.NewKafka(t)
	parts := max(sc.Partitions, 1)
	sb.CreateTopic(t, "orders", parts, sc.TopicConfig)
	for _, st := range sc.Produce {
		if err := produceScenario(sb.Addr, st); err != nil {
			t.Fatal(err)
		}
	}
	if sc.Compact {
		sb.Compact()
	}
	for part, off := range sc.DeleteRecords {
		if err := sb.DeleteRecords("orders", part, off); err != nil {
			t.Fatal(err)
		}
	}
	return sb
}

// produceScenario writes one step with franz-go (an independent client,
// which can also write no-timestamp records, compression, transactions).
func produceScenario(addr string, st produceStep) error {
	recs, err := st.records()
	if err != nil {
		return err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(64 << 20), kgo.ProducerLinger(0)}
	switch st.Compression {
	case "": // franz-go compresses with snappy by default: sizes would lie
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	case "gzip":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case "snappy":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "zstd":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		return fmt.Errorf("unknown compression %q", st.Compression)
	}
	if st.Txn != "" {
		opts = append(opts, kgo.TransactionalID(fmt.Sprintf("scenario-%d", time.Now().UnixNano())))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := context.Background()
	if st.Txn != "" {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
	}
	batch := st.Batch
	if batch <= 0 {
		batch = len(recs)
	}
	for i := 0; i < len(recs); i += batch {
		if err := cl.ProduceSync(ctx, recs[i:min(i+batch, len(recs))]...).FirstErr(); err != nil {
			return fmt.Errorf("produce to partition %d: %w", st.Partition, err)
		}
	}
	if st.Txn != "" {
		return testenv.EndTransaction(ctx, cl, st.Txn == "commit", "orders")
	}
	return nil
}

func (st produceStep) records() ([]*kgo.Record, error) {
	n := st.Count
	if n == 0 {
		n = len(st.TS)
	}
	start, err := scenarioDuration(st.Start, 0)
	if err != nil {
		return nil, err
	}
	step, err := scenarioDuration(st.Step, time.Second)
	if err != nil {
		return nil, err
	}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		r := &kgo.Record{Partition: st.Partition, Timestamp: t0.Add(start + time.Duration(i)*step)}
		switch {
		case st.NoTimestamp || i < len(st.TS) && st.TS[i] == "none":
			r.Timestamp = time.UnixMilli(-1) // no timestamp
		case i < len(st.TS):
			d, err := scenarioDuration(st.TS[i], 0)
			if err != nil {
				return nil, err
			}
			r.Timestamp = t0.Add(d)
		}
		switch {
		case len(st.Keys) > 0:
			r.Key = []byte(st.Keys[i%len(st.Keys)])
		case st.Key != "":
			r.Key = []byte(fmt.Sprintf(st.Key, i))
		}
		v := fmt.Sprintf("p%d-%d", st.Partition, i)
		if pad := st.ValueBytes - len(v); pad > 0 {
			v += strings.Repeat("x", pad)
		}
		r.Value = []byte(v)
		recs[i] = r
	}
	return recs, nil
}

func scenarioDuration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	return time.ParseDuration(s)
}

// act performs one action during the run (in a partition's goroutine).
func (sc *scenario) act(ctx context.Context, sb *testenv.Kafka, a action) error {
	if d := a.DeleteRecords; d != nil {
		if err := sb.DeleteRecords("orders", d.Partition, d.Offset); err != nil {
			return fmt.Errorf("action delete_records: %w", err)
		}
	}
	if a.AddPartitions > 0 {
		cl := &kafka.Client{Addr: kafka.TCP(sb.Addr)}
		resp, err := cl.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: "orders", Count: a.AddPartitions}}})
		if err == nil {
			err = errors.Join(resp.Errors["orders"])
		}
		if err != nil {
			return fmt.Errorf("action add_partitions: %w", err)
		}
	}
	for _, st := range a.Produce {
		if err := produceScenario(sb.Addr, st); err != nil {
			return fmt.Errorf("action produce: %w", err)
		}
	}
	return nil
}

// memSink keeps what was written; it runs the scenario's actions on the
// writes they name and refuses the records in reject.
type memSink struct {
	actions []action
	act     func(action) error
	reject  []string

	mu        sync.Mutex
	writes    map[int32]int
	got       map[string]int // "p/o" -> times written
	published bool
}

func (m *memSink) Write(_ context.Context, batch []record.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.writes == nil {
		m.writes, m.got = map[int32]int{}, map[string]int{}
	}
	part := batch[0].Partition
	m.writes[part]++
	for _, a := range m.actions {
		if a.OnWrite.Partition == part && max(a.OnWrite.N, 1) == m.writes[part] {
			if err := m.act(a); err != nil {
				return err
			}
		}
	}
	for _, r := range batch {
		if slices.Contains(m.reject, fmt.Sprintf("%d/%d", r.Partition, r.Offset)) {
			return &record.Error{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: errors.New("row rejected")}
		}
	}
	for _, r := range batch {
		m.got[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]++
	}
	return nil
}

func (m *memSink) coords() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []string{}
	for k := range m.got {
		out = append(out, k)
	}
	return out
}

func (m *memSink) Finish(context.Context) error { m.published = true; return nil }
func (m *memSink) Close() error                 { return nil }

func (m *memSink) Capabilities() sinks.Capabilities { return sinks.Capabilities{} }

// check compares the run with the scenario's expectations.
func (sc *scenario) check(t *testing.T, c *Cluster, p *plan.Plan, rep *Report, runErr error, sink *memSink) {
	t.Helper()
	e := sc.Expect
	if len(e.Error) > 0 {
		wantError(t, "run", runErr, e.Error)
	} else if runErr != nil {
		t.Fatalf("run: %v", runErr)
	}
	if e.ErrorIs == "offset_out_of_range" && !errors.Is(runErr, kafka.OffsetOutOfRange) {
		t.Errorf("run error %v does not wrap OFFSET_OUT_OF_RANGE", runErr)
	}
	if rep == nil {
		t.Fatal("no report")
	}
	reports := map[int32]PartitionReport{}
	for _, pr := range rep.Partitions {
		reports[pr.Partition] = pr
	}
	sym := func(part int32, s string) int64 { return symbolicOffset(t, reports[part], s) }
	if e.Records != nil {
		want := expandCoords(t, e.Records, sym)
		var got []string
		for k, n := range sink.got {
			got = append(got, k)
			if n > 1 {
				t.Errorf("%s written %d times in one run", k, n)
			}
		}
		if !slices.Equal(sorted(got), sorted(want)) {
			t.Errorf("sink holds %d records, want %d: %s", len(got), len(want), diff(want, got))
		}
	}
	for part, s := range e.Commits {
		want := int64(-1)
		if s != "none" {
			want = sym(part, s)
		}
		if cp := commits(t, c, p.Group, p.Source.Topic, part)[part]; cp.Offset != want {
			t.Errorf("partition %d: committed %d, want %d (%s)", part, cp.Offset, want, s)
		}
	}
	for part, pc := range e.Partitions {
		pr, ok := reports[part]
		if !ok {
			t.Errorf("partition %d: not in the report", part)
			continue
		}
		pc.check(t, pr, sym)
	}
	if e.Added != nil && !slices.Equal(rep.Added, e.Added) {
		t.Errorf("report: added partitions %v, want %v", rep.Added, e.Added)
	}
	if e.Published != nil && sink.published != *e.Published {
		t.Errorf("sink output published: %v, want %v", sink.published, *e.Published)
	}
}

func (pc partitionCheck) check(t *testing.T, pr PartitionReport, sym func(int32, string) int64) {
	t.Helper()
	errorf := func(format string, args ...any) {
		t.Errorf("partition %d: "+format, append([]any{pr.Partition}, args...)...)
	}
	eq := func(what string, want *int64, got int64) {
		if want != nil && *want != got {
			errorf("%s %d, want %d", what, got, *want)
		}
	}
	if pc.Outcome != "" && string(pr.Outcome) != pc.Outcome {
		errorf("outcome %s, want %s", pr.Outcome, pc.Outcome)
	}
	eq("start", pc.Start, pr.Start)
	eq("end", pc.End, pr.End)
	eq("written", pc.Written, pr.Written)
	eq("outside_window", pc.OutsideWindow, pr.OutsideWindow)
	eq("lost", pc.Lost, pr.Lost)
	if pc.Skipped != nil && !mapsEqual(pc.Skipped, pr.Skipped) {
		errorf("skipped %v, want %v", pr.Skipped, pc.Skipped)
	}
	if pc.Errors != nil && !mapsEqual(pc.Errors, pr.Errors) {
		errorf("errors %v, want %v", pr.Errors, pc.Errors)
	}
	if pc.Done != nil && pr.Done != *pc.Done {
		errorf("done %v, want %v", pr.Done, *pc.Done)
	}
	for _, s := range pc.Error {
		if !strings.Contains(pr.Error, s) {
			errorf("error %q does not say %q", pr.Error, s)
		}
	}
	if len(pc.Error) == 0 && pr.Error != "" {
		errorf("unexpected error %s", pr.Error)
	}
	if pc.LostRanges != nil {
		var want []string
		for _, s := range pc.LostRanges {
			from, to := parseSpan(t, s, func(x string) int64 { return sym(pr.Partition, x) })
			want = append(want, Gap{From: from, To: to}.String())
		}
		var got []string
		for _, g := range pr.LostRanges {
			got = append(got, g.String())
		}
		if !slices.Equal(got, want) {
			errorf("lost ranges %v, want %v", got, want)
		}
	}
	for _, s := range pc.Detail {
		if !strings.Contains(pr.Detail, s) {
			errorf("detail %q does not say %q", pr.Detail, s)
		}
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func wantError(t *testing.T, stage string, err error, subs []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want an error saying %q", stage, subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s error %q does not say %q", stage, err, s)
		}
	}
}

// symbolicOffset reads a number, or "lost": the first offset of the
// partition's first lost range.
func symbolicOffset(t *testing.T, pr PartitionReport, s string) int64 {
	t.Helper()
	if s == "lost" {
		if len(pr.LostRanges) == 0 {
			t.Fatalf("partition %d: the report has no lost range", pr.Partition)
		}
		return pr.LostRanges[0].From
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("offset %q: %v", s, err)
	}
	return n
}

var spanRE = regexp.MustCompile(`^\[(\w+),\s*(\w+)\)$`)

// parseSpan reads "[a,b)" or a single offset "a".
func parseSpan(t *testing.T, s string, num func(string) int64) (int64, int64) {
	t.Helper()
	if m := spanRE.FindStringSubmatch(s); m != nil {
		return num(m[1]), num(m[2])
	}
	o := num(s)
	return o, o + 1
}

// expandCoords turns "p/o" and "p/[a,b)" into "p/o" strings.
func expandCoords(t *testing.T, specs []string, sym func(int32, string) int64) []string {
	t.Helper()
	var out []string
	for _, s := range specs {
		ps, span, ok := strings.Cut(s, "/")
		part, err := strconv.ParseInt(ps, 10, 32)
		if !ok || err != nil {
			t.Fatalf("record spec %q: want p/o or p/[a,b)", s)
		}
		from, to := parseSpan(t, span, func(x string) int64 { return sym(int32(part), x) })
		out = append(out, spanCoords(int32(part), from, to)...)
	}
	return out
}
