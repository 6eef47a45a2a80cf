package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/internal/pipeline"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/registry"
)

type testCmdOptions struct {
	records string
	// schemas is the directory of <id>.avsc, <id>.proto and <id>.json
	// files a plan with decode: decodes the fixtures by.
	schemas string
}

func (a *app) testCmd() *cobra.Command {
	var o testCmdOptions
	cmd := &cobra.Command{
		Use:   "test PLAN --records FILE",
		Short: "Run fixture records through the plan's filter, mapping and key, offline",
		Long: "test reads fixture records (one JSON object per line) and runs each through the run's own record pipeline\n" +
			"(decode, filter, mapping, key) to show what a run would do with it: pass (with its idempotency key, its value\n" +
			"before and after the plan's mapping, and the JSON line the sink would receive), filtered (the filter is false) or\n" +
			"error (decoding, the filter, the mapping or the key template fails on it, and what on_error does then). Nothing\n" +
			"touches Kafka or the sink.\n\n" +
			"A fixture line holds key (a string or null), value (JSON, or a string for a value that is not JSON; null or\n" +
			"absent for a tombstone), key_encoding and value_encoding (base64 or json, as a sink's lines mark them), headers\n" +
			"({\"name\": \"value\"} or [{\"key\": ..., \"value\": ..., \"value_encoding\": ...}]), timestamp (RFC 3339,\n" +
			"required), and optionally topic (default: the plan's), partition (default 0), offset (default: the record's\n" +
			"index in the file), note (free text) and expect: pass, filtered or error. The lines of a file sink's output\n" +
			"(of a plan without decode:) and of a dead-letter file are fixture lines too. Blank lines and lines starting\n" +
			"with # are ignored.\n\n" +
			"A plan with decode: decodes the fixtures' framed keys and values (given with key_encoding/value_encoding\n" +
			"base64) by the schemas of --schemas DIR: <id>.avsc (Avro; the named types it takes from other schemas read\n" +
			"from <full name>.avsc, e.g. shop.Money.avsc), <id>.proto (Protobuf, imports read from DIR) or <id>.json\n" +
			"(JSON Schema), named by the schema id.\n\n" +
			"Exit codes: 0 every record behaved as its expect says, 1 some did not, 2 invalid plan, fixture file or usage.",
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, files []string) error {
			if o.records == "" {
				return usageError{errors.New("--records FILE is required: the fixture records, one JSON object per line")}
			}
			return a.test(files[0], o)
		},
	}
	cmd.Flags().StringVar(&o.records, "records", "", "fixture records, one JSON object per line (required)")
	cmd.Flags().StringVar(&o.schemas, "schemas", "", "directory of <id>.avsc, <id>.proto or <id>.json schemas, for a plan with decode:")
	return cmd
}

// fixture is one line of a fixture file.
type fixture struct {
	Key     *string         `json:"key"`
	Value   json.RawMessage `json:"value"`
	Headers json.RawMessage `json:"headers"`
	// KeyEncoding and ValueEncoding are the marks of the sinks' JSONL form
	// (encode.DecodeField): "base64", "json" or none.
	KeyEncoding   string `json:"key_encoding"`
	ValueEncoding string `json:"value_encoding"`
	Timestamp     string `json:"timestamp"`
	// TimestampType is CreateTime (absent or null) or LogAppendTime.
	TimestampType *string `json:"timestamp_type"`
	Topic         *string `json:"topic"`
	Partition     *int32  `json:"partition"`
	Offset        *int64  `json:"offset"`
	Note          string  `json:"note"`
	Expect        string  `json:"expect"`
	// The extra fields of a dead-letter line, accepted and ignored.
	Error           any `json:"error"`
	SourceTopic     any `json:"source_topic"`
	SourcePartition any `json:"source_partition"`
	SourceOffset    any `json:"source_offset"`

	line int
	rec  record.Record
}

// Outcomes of a fixture record.
const (
	outcomePass     = "pass"
	outcomeFiltered = "filtered"
	outcomeError    = "error"
)

func (a *app) test(file string, o testCmdOptions) error {
	// Offline: a ${VAR} unset here (a DSN, the brokers) is not needed.
	p, err := a.loadPlanFile(file, true)
	if err != nil {
		return err
	}
	if names := p.UnsetEnv(); len(names) > 0 {
		fmt.Fprintf(a.stderr, "notice: %s: %s\n", file, needsEnv(names))
	}
	fixtures, err := readFixtures(o.records, p.Topics()[0])
	if err != nil {
		return usageError{err}
	}
	dec, err := offlineDecoder(p, o.schemas)
	if err != nil {
		return usageError{err}
	}
	// A plan of several topics runs each fixture through the pipeline of
	// its topic's plan (its overrides).
	testers := map[string]*tester{}
	for _, topic := range p.Topics() {
		tp, err := p.ForTopic(topic)
		if err != nil {
			return err
		}
		t, err := newTester(tp, dec)
		if err != nil {
			return err
		}
		testers[topic] = t
		head := t.header()
		if p.SeveralTopics() {
			head = "topic " + topic + ": " + head
		}
		fmt.Fprintln(a.stdout, head)
	}
	counts := map[string]int{}
	var wrong []string
	for i := range fixtures {
		fx := &fixtures[i]
		t, ok := testers[fx.rec.Topic]
		if !ok && p.SeveralTopics() {
			return usageError{fmt.Errorf("%s:%d: topic %q is not one of the plan's topics (%s): set topic to one of them", o.records, fx.line, fx.rec.Topic, strings.Join(p.Source.Topics, ", "))}
		} else if !ok {
			t = testers[p.Source.Topic] // a fixture of another topic, as the plan's
		}
		got := t.run(a.stdout, fx)
		counts[got]++
		if fx.Expect != "" && fx.Expect != got {
			wrong = append(wrong, fmt.Sprintf("line %d", fx.line))
		}
	}
	fmt.Fprintf(a.stdout, "%d records: %d pass, %d filtered, %d error\n", len(fixtures), counts[outcomePass], counts[outcomeFiltered], counts[outcomeError])
	if len(wrong) > 0 {
		return fmt.Errorf("%d of %d fixture records did not behave as expected (%s of %s)", len(wrong), len(fixtures), strings.Join(wrong, ", "), o.records)
	}
	return nil
}

// offlineDecoder is the decoder of p's decode: section reading schemas
// from dir; nil when p decodes nothing.
func offlineDecoder(p *plan.Plan, dir string) (*decode.Decoder, error) {
	if !p.Decode.Decodes() {
		if dir != "" {
			return nil, fmt.Errorf("--schemas %s is given, but the plan decodes nothing (no decode: value or key): drop --schemas, or add a decode: section", dir)
		}
		return nil, nil
	}
	if dir == "" {
		return nil, errors.New("the plan decodes (decode:): give --schemas DIR, a directory of <id>.avsc, <id>.proto or <id>.json schemas")
	}
	return decode.NewOffline(dir, pipeline.DecodeConfig(p), zerolog.Nop())
}

// tester runs records through a plan's record pipeline, the run's own
// (internal/pipeline): decode, filter, mapping and key template.
type tester struct {
	p    *plan.Plan
	pipe *pipeline.Run
	// keyer renders the key for display when the sink writes none
	// (keyUsed false): the pipeline then renders none.
	keyer   *sinks.Keyer
	keyUsed bool
}

// newTester builds the record pipeline of p, decoding with dec (nil for
// a plan without decode:).
func newTester(p *plan.Plan, dec *decode.Decoder) (*tester, error) {
	t := &tester{p: p, keyUsed: registry.Describe(p.Sink).UsesKey}
	use := sinks.KeysUnused
	if t.keyUsed {
		use = sinks.KeysAll
	}
	pl, err := pipeline.New(p, use, pipeline.WithDecoder(context.Background(), dec))
	if err != nil {
		return nil, err
	}
	t.pipe = pl.Partition()
	if t.keyer, err = sinks.NewKeyer(p.Sink.Key); err != nil {
		return nil, fmt.Errorf("sink key: %w", err)
	}
	return t, nil
}

func (t *tester) header() string {
	f := "none (every record passes)"
	if t.p.Filter != "" {
		f = strings.TrimSpace(t.p.Filter)
	}
	k := "default (<topic>/<partition>/<offset>)"
	if strings.TrimSpace(t.p.Sink.Key) != "" {
		k = t.p.Sink.Key
	}
	m := ""
	if n := len(t.p.Mapping); n > 0 {
		m = fmt.Sprintf("; mapping %d step(s)", n)
	}
	return fmt.Sprintf("plan %s: filter %s%s; key %s; on_error %s", t.p.Name, f, m, k, t.p.OnError)
}

// run shows what a run would do with fx's record and returns the outcome.
func (t *tester) run(w io.Writer, fx *fixture) string {
	r := &fx.rec
	where := fmt.Sprintf("line %d  %s/%d@%d", fx.line, r.Topic, r.Partition, r.Offset)
	if fx.Note != "" {
		where += "  (" + fx.Note + ")"
	}
	outcome, detail, reason := outcomePass, "", ""
	switch ok, err := t.pipe.Process(r); {
	case err != nil:
		outcome, reason = outcomeError, recordReason(err)
	case !ok:
		outcome = outcomeFiltered
	case t.keyUsed:
		detail = fmt.Sprintf("key %q", r.IdempotencyKey())
	default:
		if key, err := t.keyer.Key(r); err != nil {
			detail = fmt.Sprintf("key: %s (the %s sink does not use the key)", recordReason(err), t.p.Sink.Type)
		} else {
			detail = fmt.Sprintf("key %q", key)
		}
	}
	mark := ""
	if fx.Expect != "" && fx.Expect != outcome {
		mark = fmt.Sprintf("  NOT AS EXPECTED: expect %s", fx.Expect)
	}
	switch outcome {
	case outcomePass:
		fmt.Fprintf(w, "%s  pass  %s%s\n%s    sink: %s", where, detail, mark, t.mapped(r), encode.AppendJSONL(nil, r))
	case outcomeFiltered:
		fmt.Fprintf(w, "%s  filtered%s\n", where, mark)
	default:
		fmt.Fprintf(w, "%s  error  %s%s\n    %s", where, reason, mark, t.onError(r, reason))
	}
	return outcome
}

// mapped shows a record's value before and after the plan's mapping ("" for
// a plan without one): before, the value as read, or as decoded under
// decode:.
func (t *tester) mapped(r *record.Record) string {
	if len(t.p.Mapping) == 0 {
		return ""
	}
	before := r.OriginalValue()
	if d := r.Note.DecodedOrNil(); d != nil && d.Value != nil {
		before = d.Value
	}
	show := func(v []byte) string {
		if v == nil {
			return "null (a tombstone: the mapping leaves it as it is)"
		}
		return string(v)
	}
	return fmt.Sprintf("    before mapping: %s\n    after mapping:  %s\n", show(before), show(r.Value))
}

// onError says what on_error does with a record that cannot be processed.
func (t *tester) onError(r *record.Record, reason string) string {
	switch t.p.OnError {
	case plan.OnErrorSkip:
		return "on_error skip: the run counts it and goes on\n"
	case plan.OnErrorDeadLetter:
		dl := sinks.DeadLetter(*r, reason)
		return "on_error dead_letter: " + string(encode.AppendJSONL(nil, &dl))
	}
	return "on_error fail: the run stops at this record\n"
}

// recordReason is the reason of a *record.Error without the
// coordinates, which the output shows already.
func recordReason(err error) string {
	var re *record.Error
	if errors.As(err, &re) {
		return re.Err.Error()
	}
	return err.Error()
}

// readFixtures reads a fixture file; topic is the default topic. Every bad
// line is reported (file:line: reason, one per line), not just the first.
func readFixtures(path, topic string) ([]fixture, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--records: %w", err)
	}
	defer f.Close()
	var out []fixture
	var bad []error
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		fx, err := parseFixture(line, topic, int64(len(out)))
		if err != nil {
			bad = append(bad, fmt.Errorf("%s:%d: %w", path, n, err))
			continue
		}
		fx.line = n
		out = append(out, fx)
	}
	if err := sc.Err(); err != nil {
		bad = append(bad, fmt.Errorf("%s: %w", path, err))
	}
	if len(bad) > 0 {
		return nil, errors.Join(bad...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no fixture records", path)
	}
	return out, nil
}

// fixtureFields are the fields of a fixture line and what each holds, for
// messages.
var fixtureFields = map[string]string{
	"key": "a string or null", "value": "any JSON (a string is the raw value, null a tombstone)",
	"headers": `an array of {"key": ..., "value": ...}`, "key_encoding": `"base64" or "json"`, "value_encoding": `"base64" or "json"`,
	"timestamp": "an RFC 3339 string, e.g. 2026-11-03T10:00:00Z", "timestamp_type": `"CreateTime" or "LogAppendTime"`,
	"topic": "a string", "partition": "an integer", "offset": "an integer", "note": "a string", "expect": `"pass", "filtered" or "error"`,
	"error": "anything (a dead letter's)", "source_topic": "anything (a dead letter's)", "source_partition": "anything (a dead letter's)",
	"source_offset": "anything (a dead letter's)",
}

// fixtureSyntaxError explains a fixture line encoding/json refused: the
// field of the wrong JSON type and what it holds, or the unknown field
// and the nearest known one.
func fixtureSyntaxError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		if want, ok := fixtureFields[te.Field]; ok {
			return fmt.Errorf("%s: a JSON %s where %s belongs", te.Field, te.Value, want)
		}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, _ = strconv.Unquote(name)
		names := slices.Sorted(maps.Keys(fixtureFields))
		msg := fmt.Sprintf("unknown field %q: a fixture line has %s", name, strings.Join(names, ", "))
		if hint := plan.Suggest(name, names); hint != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", hint)
		}
		return errors.New(msg)
	}
	return fmt.Errorf("not a fixture record: %w", err)
}

func parseFixture(line []byte, topic string, index int64) (fixture, error) {
	var fx fixture
	var ids struct {
		Value *json.RawMessage `json:"value_schema_id"`
		Key   *json.RawMessage `json:"key_schema_id"`
	}
	if json.Unmarshal(line, &ids) == nil && (ids.Value != nil || ids.Key != nil) {
		return fx, errors.New("a line of a file sink whose plan decoded (it has value_schema_id or key_schema_id) holds the decoded key and value, not the record's bytes, and cannot be decoded again: " +
			"give the framed bytes as value (and key) with value_encoding: base64 (key_encoding), as a dead-letter file's lines or a file sink's lines of a plan without decode: hold them")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fx); err != nil {
		return fx, fixtureSyntaxError(err)
	}
	switch fx.Expect {
	case "", outcomePass, outcomeFiltered, outcomeError:
	default:
		return fx, fmt.Errorf("expect %q: want pass, filtered or error", fx.Expect)
	}
	if fx.Timestamp == "" {
		return fx, errors.New("timestamp is missing: give the record's time in RFC 3339, e.g. 2026-11-03T10:00:00Z")
	}
	ts, err := time.Parse(time.RFC3339Nano, fx.Timestamp)
	if err != nil {
		return fx, fmt.Errorf("timestamp %q: want RFC 3339 with a zone, e.g. 2026-11-03T10:00:00Z", fx.Timestamp)
	}
	r := record.Record{Topic: topic, Offset: index, Time: ts}
	if fx.TimestampType != nil {
		if r.TimestampType, err = record.ParseTimestampType(*fx.TimestampType); err != nil || *fx.TimestampType == "" {
			return fx, fmt.Errorf("timestamp_type %q: want CreateTime or LogAppendTime (or leave it out: CreateTime)", *fx.TimestampType)
		}
	}
	if fx.Topic != nil {
		r.Topic = *fx.Topic
	}
	if fx.Partition != nil {
		r.Partition = *fx.Partition
	}
	if fx.Offset != nil {
		r.Offset = *fx.Offset
	}
	// Key and value read as the sinks' lines hold them (encode.DecodeField):
	// a JSON string is the raw bytes, null a tombstone, other JSON the
	// value as written; a key_encoding or value_encoding mark decodes them.
	key, _ := json.Marshal(fx.Key)
	if r.Key, err = encode.DecodeField(key, fx.KeyEncoding); err != nil {
		return fx, fmt.Errorf("key: %w", err)
	}
	if r.Value, err = encode.DecodeField(bytes.TrimSpace(fx.Value), fx.ValueEncoding); err != nil {
		return fx, fmt.Errorf("value: %w", err)
	}
	if r.Headers, err = fixtureHeaders(fx.Headers); err != nil {
		return fx, err
	}
	fx.rec = r
	return fx, nil
}

// fixtureHeaders accepts {"name": "value"} (in name order) or
// [{"key": "name", "value": "value"}] (in order, repeats allowed); a null
// value is a header without a value.
func fixtureHeaders(raw json.RawMessage) ([]record.Header, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '{' {
		var m map[string]*string
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf(`headers: want {"name": "value"} or [{"key": "name", "value": "value"}]: %w`, err)
		}
		hs := make([]record.Header, 0, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			var v []byte // nil: a header without a value
			if m[k] != nil {
				v = []byte(*m[k])
			}
			hs = append(hs, record.Header{Key: k, Value: v})
		}
		return hs, nil
	}
	var list []struct {
		Key           json.RawMessage `json:"key"`
		KeyEncoding   string          `json:"key_encoding"`
		Value         json.RawMessage `json:"value"`
		ValueEncoding string          `json:"value_encoding"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf(`headers: want {"name": "value"} or [{"key": "name", "value": "value"}]: %w`, err)
	}
	hs := make([]record.Header, len(list))
	for i, h := range list {
		k, err := encode.DecodeField(h.Key, h.KeyEncoding)
		if err != nil || k == nil {
			return nil, fmt.Errorf(`headers: header %d: want "key" a string: %w`, i+1, errors.Join(err, errors.New("no key")))
		}
		if h.Key[0] != '"' && h.KeyEncoding == "" {
			return nil, fmt.Errorf(`headers: header %d: want "key" a string, not %s`, i+1, h.Key)
		}
		v, err := encode.DecodeField(h.Value, h.ValueEncoding)
		if err != nil {
			return nil, fmt.Errorf("headers: header %d value: %w", i+1, err)
		}
		hs[i] = record.Header{Key: string(k), Value: v}
	}
	return hs, nil
}
