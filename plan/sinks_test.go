package plan

import (
	"strings"
	"testing"
)

const httpPlan = `version: 1
name: orders-to-api
source: {brokers: ["kafka-1:9092"], topic: orders}
group: replay.orders-to-api
window: {from: 2026-11-03T10:00:00Z}
throttle: {records_per_second: 1000}
sink:
  type: http
  url: https://orders.internal/api
`

// Secrets in headers and in the URL must come from the environment; other
// headers and URLs built from ${VAR}s are fine.
func TestHTTPSinkSecrets(t *testing.T) {
	env := map[string]string{"TOKEN": "t0ken", "API_URL": "https://u:pw@svc/api?token=x", "PW": "pw"}
	opts := testOptions()
	opts.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		sink string
		want string // "" for valid
	}{
		{"url: https://svc/api\n  headers: {Authorization: 'Bearer ${TOKEN}', X-Tenant: shop}", ""},
		{"url: ${API_URL}", ""},
		{"url: 'https://u:${PW}@svc/api?token=${TOKEN}'", ""},
		{"url: https://svc/api\n  headers: {Cookie: session=abc}", "sink.headers.Cookie: a literal secret"},
		{"url: https://svc/api\n  headers: {X-Auth-Token: abc}", "sink.headers.X-Auth-Token: a literal secret"},
		{"url: https://svc/api\n  headers: {X-Api-Key: '${TOKEN}'}", ""},
		{"url: 'https://svc/api?sig=abc&page=2'", "query parameter sig carries a literal secret"},
		{"url: https://svc/api\n  headers: {x-tenant: \"a\\nb\"}", "line break"},
		{"url: https://svc/api\n  headers: {content-type: text/plain}", "sets content-type itself"},
		{"url: https://svc/api\n  headers: {X-Trace: a, x-trace: b}", "sink.headers.x-trace: X-Trace and x-trace are one header"},
	} {
		doc := strings.Replace(httpPlan, "url: https://orders.internal/api", tc.sink, 1)
		_, err := Parse("plan.yaml", []byte(doc), opts)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.sink, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.sink, err, tc.want)
		}
	}
}

func TestSinkWarnings(t *testing.T) {
	for _, tc := range []struct{ sink, want string }{
		{"type: kafka\n  brokers: [\"kafka-1:9092\"]\n  topic: orders", "warning: sink.topic: the target is a source topic"},
		{"type: kafka\n  brokers: [\"k:9092\"]\n  topic: t\n  sasl: {mechanism: PLAIN, username: u, password: \"${KAFKA_PASSWORD}\"}", "SASL PLAIN without TLS"},
		{"type: http\n  url: http://svc/api\n  headers: {Authorization: 'Basic ${KAFKA_PASSWORD}'}", "sent over plain http"},
	} {
		doc := strings.Replace(httpPlan, "type: http\n  url: https://orders.internal/api", tc.sink, 1)
		p, err := Parse("plan.yaml", []byte(doc), testOptions())
		if err != nil {
			t.Fatalf("%s: %v", tc.sink, err)
		}
		var all []string
		for _, w := range p.Warnings() {
			all = append(all, w.String())
		}
		if !strings.Contains(strings.Join(all, "\n"), tc.want) {
			t.Errorf("%s: warnings %q, want %q", tc.sink, all, tc.want)
		}
	}
}

// The source's SASL PLAIN without TLS is warned of by validate too, as
// the kafka sink's is.
func TestSourcePlainWithoutTLSWarning(t *testing.T) {
	src := `source: {brokers: ["kafka-1:9092"], topic: orders, sasl: {mechanism: PLAIN, username: u, password: "${KAFKA_PASSWORD}"}`
	for _, tc := range []struct{ tls, want string }{{"}", "warning: source.sasl.mechanism: SASL PLAIN without TLS"}, {", tls: {enabled: true}}", ""}} {
		doc := strings.Replace(httpPlan, `source: {brokers: ["kafka-1:9092"], topic: orders}`, src+tc.tls, 1)
		p, err := Parse("plan.yaml", []byte(doc), testOptions())
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		for _, w := range p.Warnings() {
			all = append(all, w.String())
		}
		if got := strings.Join(all, "\n"); tc.want == "" && strings.Contains(got, "PLAIN") || !strings.Contains(got, tc.want) {
			t.Errorf("source%s: warnings %q, want %q", tc.tls, all, tc.want)
		}
	}
}

// The fingerprint covers where records go (the kafka topic and
// partitioning, the http URL), not how the sink connects.
func TestFingerprintSinkTargets(t *testing.T) {
	const kafkaPlan = `version: 1
name: orders-mirror
source: {brokers: ["kafka-1:9092"], topic: orders}
group: replay.orders-mirror
window: {from: 2026-11-03T10:00:00Z}
sink:
  type: kafka
  brokers: ["kafka-dr:9092"]
  topic: orders-fixed
  sasl: {mechanism: SCRAM-SHA-512, username: replay, password: "${KAFKA_PASSWORD}"}
`
	fp := func(doc string) string {
		t.Helper()
		p, err := Parse("plan.yaml", []byte(doc), testOptions())
		if err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		return p.Fingerprint()
	}
	for _, tc := range []struct {
		base, old, new string
		changes        bool
	}{
		{kafkaPlan, "topic: orders-fixed", "topic: orders-fixed-2", true},
		{kafkaPlan, "topic: orders-fixed", "topic: orders-fixed\n  keep_partition: true", true},
		{kafkaPlan, `["kafka-dr:9092"]`, `["kafka-dr-2:9092"]`, false},
		{kafkaPlan, "username: replay", "username: other", false},
		{httpPlan, "https://orders.internal/api", "https://orders.internal/api/v2", true},
		{httpPlan, "https://orders.internal/api", "https://orders.internal/api\n  headers: {X-Tenant: shop}\n  max_retries: 2", false},
		// A token in the URL's query (from ${VAR}) may be rotated mid-run.
		{httpPlan, "https://orders.internal/api", "'https://orders.internal/api?token=${KAFKA_PASSWORD}'", false},
	} {
		doc := strings.Replace(tc.base, tc.old, tc.new, 1)
		if changed := fp(doc) != fp(tc.base); changed != tc.changes {
			t.Errorf("%s -> %s: fingerprint changed = %v, want %v", tc.old, tc.new, changed, tc.changes)
		}
	}
}

const columnsPlan = `version: 1
name: orders-columns
source: {brokers: ["kafka-1:9092"], topic: orders}
group: replay.orders-columns
window: {from: 2026-11-03T10:00:00Z}
throttle: {records_per_second: 1000}
sink:
  type: sqlite
  path: out/orders.db
  table: orders
  columns:
    z_id: key
    a_status: value.status
    m_trace: header.trace-id
`

// Columns keep the order the plan writes them in (a Go map would not), and
// each field parses.
func TestColumnsKeepOrder(t *testing.T) {
	p, err := Parse("plan.yaml", []byte(columnsPlan), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	got := sinkValue(&p.Sink, "columns").(Columns).String()
	if want := "z_id=key,a_status=value.status,m_trace=header.trace-id"; got != want {
		t.Errorf("columns %s, want %s", got, want)
	}
	for _, tc := range []struct {
		field string
		want  Field
	}{
		{"key", Field{Kind: FieldKey}}, {"value.a.b", Field{Kind: FieldValuePath, Arg: "a.b"}},
		{"header.trace-id", Field{Kind: FieldHeader, Arg: "trace-id"}}, {"headers", Field{Kind: FieldHeaders}},
	} {
		if f, err := ParseField(tc.field); err != nil || f != tc.want {
			t.Errorf("ParseField(%q) = %+v, %v; want %+v", tc.field, f, err, tc.want)
		}
	}
}

// What a row or line holds is part of the fingerprint; how it is written
// (checkpoint table, COPY threshold) is not, and a plan that sets none of
// the new fields keeps its fingerprint.
func TestFingerprintOutputLayout(t *testing.T) {
	base, err := Parse("plan.yaml", []byte(strings.Replace(columnsPlan, "    m_trace: header.trace-id\n", "", 1)), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	withCol, err := Parse("plan.yaml", []byte(columnsPlan), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	withCkpt, err := Parse("plan.yaml", []byte(strings.Replace(columnsPlan, "    m_trace: header.trace-id\n", "  checkpoint_table: replay_checkpoints\n", 1)), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if base.Fingerprint() == withCol.Fingerprint() {
		t.Error("adding a column keeps the fingerprint")
	}
	if base.Fingerprint() != withCkpt.Fingerprint() {
		t.Error("adding a checkpoint table changes the fingerprint")
	}
	jsonl, err := Parse("plan.yaml", []byte(strings.Replace(httpPlan, "type: http\n  url: https://orders.internal/api", "type: file\n  path: o.jsonl", 1)), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := Parse("plan.yaml", []byte(strings.Replace(httpPlan, "type: http\n  url: https://orders.internal/api", "type: file\n  path: o.jsonl\n  format: jsonl", 1)), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if jsonl.Fingerprint() != explicit.Fingerprint() || sinkValue(&jsonl.Sink, "format") != "jsonl" {
		t.Errorf("format: jsonl written out changes the fingerprint, or is not the default (%q)", sinkValue(&jsonl.Sink, "format"))
	}
	order := func(o string) *Plan {
		t.Helper()
		p, err := Parse("plan.yaml", []byte(strings.Replace(httpPlan, "type: http\n  url: https://orders.internal/api", "type: file\n  path: o.jsonl\n  order: "+o, 1)), testOptions())
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if in := order("interleaved"); in.Fingerprint() != jsonl.Fingerprint() || sinkValue(&jsonl.Sink, "order") != "interleaved" {
		t.Errorf("order: interleaved written out changes the fingerprint, or is not the default (%q)", sinkValue(&jsonl.Sink, "order"))
	}
	if order("partition").Fingerprint() == jsonl.Fingerprint() {
		t.Error("order: partition keeps the fingerprint: a resume would mix staging layouts")
	}
}

// With on_error: dead_letter a checkpoint table is not used to resume:
// the plan says so.
func TestCheckpointTableWithDeadLettersWarns(t *testing.T) {
	doc := strings.Replace(columnsPlan, "    m_trace: header.trace-id\n", "  checkpoint_table: replay_checkpoints\n  overwrite: true\non_error: dead_letter\ndead_letter: {type: file, path: out/dead.jsonl}\n", 1)
	p, err := Parse("plan.yaml", []byte(doc), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	ws := p.Warnings()
	if len(ws) != 1 || ws[0].Field != "sink.checkpoint_table" || !strings.Contains(ws[0].Message, "not used to resume") {
		t.Errorf("warnings %v", ws)
	}
}

// Regression: file, postgres and stdout sinks accepted path, dsn, table,
// on_conflict and create_table whatever their type (a legacy exception), so
// a setting that did nothing passed validation. Defaults do not count.
func TestSinkFieldsOfAnotherTypeOnLegacyTypes(t *testing.T) {
	const base = `version: 1
name: orders-fix
source: {brokers: ["kafka-1:9092"], topic: orders}
group: replay.orders-fix
window: {from: 2026-11-03T10:00:00Z}
throttle: {records_per_second: 100}
`
	for _, tc := range []struct{ sink, want string }{
		{"{type: file, path: x.jsonl, table: t, dsn: '${ORDERS_DSN_NOPW}'}", "sink.table: does not apply to a file sink (only postgres and sqlite sinks take it): remove it"},
		{"{type: file, path: x.jsonl, table: t, dsn: '${ORDERS_DSN_NOPW}'}", "sink.dsn: does not apply to a file sink (only postgres sinks take it): remove it"},
		{"{type: file, path: x.jsonl, on_conflict: ignore}", "sink.on_conflict: does not apply to a file sink"},
		{"{type: file, path: x.jsonl, create_table: true}", "sink.create_table: does not apply to a file sink"},
		{"{type: postgres, dsn: '${ORDERS_DSN_NOPW}', table: t, path: x.db}", "sink.path: does not apply to a postgres sink (only file and sqlite and parquet sinks take it): remove it"},
		{"{type: stdout, path: x.jsonl}", "sink.path: does not apply to a stdout sink"},
		{"{type: stdout, table: t}", "sink.table: does not apply to a stdout sink"},
		// Valid: the field belongs to the type, or is a default (on_conflict: update).
		{"{type: file, path: x.jsonl}", ""},
		{"{type: stdout}", ""},
		{"{type: postgres, dsn: '${ORDERS_DSN_NOPW}', table: t, on_conflict: ignore, create_table: true}", ""},
	} {
		_, err := Parse("plan.yaml", []byte(base+"sink: "+tc.sink+"\n"), testOptions())
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.sink, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.sink, err, tc.want)
		}
	}
}
