package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamplePlanFixtures is how CI runs the fixtures: every plan in plans/
// has plans/testdata/<file name>.records.jsonl, and `replay test` finds
// every fixture record behaving as its expect says.
func TestExamplePlanFixtures(t *testing.T) {
	t.Setenv("REPLAY_DEMO_BROKERS", "127.0.0.1:9092")
	t.Setenv("KAFKA_BROKERS", "kafka-1:9092")
	t.Setenv("ORDERS_DSN", "postgres://replay@db:5432/shop")
	t.Setenv("CUSTOMERS_DSN", "postgres://replay@db:5432/crm")
	t.Setenv("TARGET_KAFKA_BROKERS", "kafka-dr-1:9093,kafka-dr-2:9093")
	t.Setenv("TARGET_KAFKA_PASSWORD", "s3cret")
	t.Setenv("ORDERS_API_URL", "https://orders.internal/api/replay")
	t.Setenv("ORDERS_API_TOKEN", "t0ken")
	files, _ := filepath.Glob("../../plans/*.yaml")
	if len(files) < 2 {
		t.Fatalf("found only %v in plans/", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			fixtures := filepath.Join("../../plans/testdata", strings.TrimSuffix(filepath.Base(f), ".yaml")+".records.jsonl")
			if _, err := os.Stat(fixtures); err != nil {
				t.Fatalf("every example plan needs fixtures: %v", err)
			}
			if r := replay(t, "test", f, "--records", fixtures); r.code != exitOK || strings.Contains(r.stdout, "NOT AS EXPECTED") {
				t.Errorf("replay test: %s", r)
			}
		})
	}
}

const testCmdPlan = `version: 1
name: test-cmd
source: {brokers: ["k:9092"], topic: orders}
group: replay.test-cmd
window: {from: 2026-11-03T10:00:00Z, to: 2026-11-03T12:00:00Z}
filter: value.status == "paid"
sink: {type: postgres, dsn: "postgres://replay@db/shop", table: orders, key: "{{ .Value.id }}"}
throttle: {records_per_second: 1000}
`

func writeTestFiles(t *testing.T, planExtra, records string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	p, r := filepath.Join(dir, "plan.yaml"), filepath.Join(dir, "records.jsonl")
	if err := os.WriteFile(p, []byte(testCmdPlan+planExtra), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r, []byte(records), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, r
}

func TestTestCommand(t *testing.T) {
	records := `{"key": "a", "value": {"id": 7, "status": "paid"}, "headers": {"trace": "x"}, "timestamp": "2026-11-03T10:00:00Z", "expect": "pass"}
# a comment
{"value": {"id": 8, "status": "created"}, "timestamp": "2026-11-03T10:00:01Z", "expect": "filtered"}
{"value": "not json", "timestamp": "2026-11-03T10:00:02Z", "partition": 4, "offset": 99, "expect": "error"}
`
	t.Run("as expected", func(t *testing.T) {
		p, r := writeTestFiles(t, "on_error: dead_letter\ndead_letter: {type: file, path: dead.jsonl}\n", records)
		res := replay(t, "test", p, "--records", r)
		if res.code != exitOK {
			t.Fatalf("want exit 0: %s", res)
		}
		for _, want := range []string{
			`line 1  orders/0@0  pass  key "7"`,
			`sink: {"topic":"orders","partition":0,"offset":0,"timestamp":"2026-11-03T10:00:00.000Z","timestamp_type":"CreateTime","key":"a","value":{"id": 7, "status": "paid"},"headers":[{"key":"trace","value":"x"}]}`,
			"line 3  orders/0@1  filtered",
			"line 4  orders/4@99  error  filter: the value is not JSON",
			`on_error dead_letter: {"topic":"orders","partition":4,"offset":99,`,
			`"error":"filter: the value is not JSON: it has no fields","source_topic":"orders","source_partition":4,"source_offset":99}`,
			"3 records: 1 pass, 1 filtered, 1 error",
		} {
			if !strings.Contains(res.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, res.stdout)
			}
		}
	})
	t.Run("not as expected", func(t *testing.T) {
		p, r := writeTestFiles(t, "", strings.Replace(records, `"expect": "filtered"`, `"expect": "pass"`, 1))
		res := replay(t, "test", p, "--records", r)
		if res.code != exitFailed || !strings.Contains(res.stdout, "NOT AS EXPECTED: expect pass") ||
			!strings.Contains(res.stderr, "1 of 3 fixture records did not behave as expected (line 3 of") {
			t.Fatalf("want exit 1 naming line 3: %s", res)
		}
	})
	t.Run("key template fails", func(t *testing.T) {
		p, r := writeTestFiles(t, "", `{"value": {"status": "paid"}, "timestamp": "2026-11-03T10:00:00Z", "expect": "error"}`+"\n")
		if res := replay(t, "test", p, "--records", r); res.code != exitOK || !strings.Contains(res.stdout, "error  key template") ||
			!strings.Contains(res.stdout, "on_error fail: the run stops at this record") {
			t.Fatalf("want a key error: %s", res)
		}
	})
	for _, tc := range []struct{ name, records, want string }{
		{"unknown field", `{"value": 1, "timestamp": "2026-11-03T10:00:00Z", "expct": "pass"}`, "records.jsonl:1: unknown field"},
		{"bad expect", `{"timestamp": "2026-11-03T10:00:00Z", "expect": "passed"}`, "want pass, filtered or error"},
		{"no timestamp", `{"value": 1}`, "timestamp is missing"},
		{"zone-less timestamp", `{"timestamp": "2026-11-03T10:00:00"}`, "want RFC 3339 with a zone"},
		{"empty", "# nothing\n", "holds no fixture records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, r := writeTestFiles(t, "", tc.records+"\n")
			if res := replay(t, "test", p, "--records", r); res.code != exitInvalid || !strings.Contains(res.stderr, tc.want) {
				t.Fatalf("want exit 2 with %q: %s", tc.want, res)
			}
		})
	}
	// Regression: test stopped at the first bad line; fixing a file took a
	// run per mistake.
	t.Run("every bad line", func(t *testing.T) {
		bad := records + `{"value": 1}` + "\n\n" + `{"timestamp": "2026-11-03T10:00:00Z", "expect": "passed"}` + "\nnot json\n"
		p, r := writeTestFiles(t, "", bad)
		res := replay(t, "test", p, "--records", r)
		if res.code != exitInvalid {
			t.Fatalf("want exit 2: %s", res)
		}
		for _, want := range []string{r + ":5: timestamp is missing", r + ":7: expect \"passed\"", r + ":8: not a fixture record"} {
			if !strings.Contains(res.text(), want) {
				t.Errorf("stderr lacks %q: %s", want, res)
			}
		}
		if strings.Contains(res.stdout, "line 1") {
			t.Errorf("records were run despite bad lines: %s", res)
		}
	})
	t.Run("no --records", func(t *testing.T) {
		p, _ := writeTestFiles(t, "", "")
		if res := replay(t, "test", p); res.code != exitInvalid || !strings.Contains(res.stderr, "--records FILE is required") {
			t.Fatalf("want a usage error: %s", res)
		}
	})
	t.Run("invalid plan", func(t *testing.T) {
		p, r := writeTestFiles(t, "max_errors: lots\n", records)
		if res := replay(t, "test", p, "--records", r); res.code != exitInvalid || !strings.Contains(res.stderr, "max_errors") {
			t.Fatalf("want an invalid plan: %s", res)
		}
	})
}

// TestTestCommandUnsetEnv: replay test is offline: the brokers and DSN
// variables unset here are not needed, and a notice names them.
func TestTestCommandUnsetEnv(t *testing.T) {
	for _, v := range []string{"KAFKA_BROKERS", "ORDERS_DSN"} {
		t.Setenv(v, "") // restored after the test
		os.Unsetenv(v)
	}
	f := "../../plans/orders-to-postgres.yaml"
	fixtures := "../../plans/testdata/orders-to-postgres.records.jsonl"
	res := replay(t, "test", f, "--records", fixtures)
	if want := "notice: " + f + ": needs KAFKA_BROKERS, ORDERS_DSN (unset here)"; res.code != exitOK || !strings.Contains(res.stderr, want) || strings.Contains(res.stdout, "NOT AS EXPECTED") {
		t.Fatalf("want exit 0 with %q: %s", want, res)
	}
}

// replay test runs the plan's mapping as a run does: each fixture's value
// before and after it, the key read from the mapped value, and a step that
// fails is the record's error with what on_error does.
func TestTestCommandMapping(t *testing.T) {
	mapping := "mapping:\n  - set: {total: 'value.price * value.qty'}\n  - rename: {cust: customer}\n  - drop: [debug]\n"
	records := `{"value": {"id": 7, "status": "paid", "cust": "c1", "price": 19.99, "qty": 3, "debug": "x"}, "timestamp": "2026-11-03T10:00:00Z", "expect": "pass"}
{"value": {"id": 8, "status": "paid", "price": 10, "qty": 3}, "timestamp": "2026-11-03T10:00:01Z", "expect": "pass"}
{"value": {"id": 9, "status": "paid", "price": 2, "qty": 9223372036854775807}, "timestamp": "2026-11-03T10:00:02Z", "expect": "error"}
{"value": {"id": 10, "status": "created"}, "timestamp": "2026-11-03T10:00:03Z", "expect": "filtered"}
`
	p, r := writeTestFiles(t, mapping, records)
	res := replay(t, "test", p, "--records", r)
	if res.code != exitOK {
		t.Fatalf("want exit 0: %s", res)
	}
	for _, want := range []string{
		`filter value.status == "paid"; mapping 3 step(s); key {{ .Value.id }}`,
		`line 1  orders/0@0  pass  key "7"`,
		`    before mapping: {"id": 7, "status": "paid", "cust": "c1", "price": 19.99, "qty": 3, "debug": "x"}`,
		`    after mapping:  {"id":7,"status":"paid","price":19.99,"qty":3,"total":59.97,"customer":"c1"}`,
		`"value":{"id":7,"status":"paid","price":19.99,"qty":3,"total":59.97,"customer":"c1"},"headers":[]}`,
		`    after mapping:  {"id":8,"status":"paid","price":10,"qty":3,"total":30}`,
		"line 3  orders/0@2  error  mapping step 1 (set value.total): value.price (2) * value.qty (9223372036854775807) overflows a 64-bit integer",
		"on_error fail: the run stops at this record",
		"4 records: 2 pass, 1 filtered, 1 error",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, res.stdout)
		}
	}
}

// --schemas with a plan that decodes nothing is refused, naming both ways
// out, rather than ignored.
func TestTestCommandSchemasWithoutDecode(t *testing.T) {
	t.Setenv("KAFKA_BROKERS", "kafka-1:9092")
	t.Setenv("ORDERS_DSN", "postgres://replay@db:5432/shop")
	f := "../../plans/orders-to-postgres.yaml"
	fixtures := "../../plans/testdata/orders-to-postgres.records.jsonl"
	res := replay(t, "test", f, "--records", fixtures, "--schemas", t.TempDir())
	if res.code == exitOK || !strings.Contains(res.stderr, "the plan decodes nothing") {
		t.Fatalf("want a refusal of --schemas: %s", res)
	}
}
