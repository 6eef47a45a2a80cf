package plan

import (
	"strings"
	"testing"
)

// The database sinks' on_tombstone, version, overwrite and connections:
// what is refused, what is warned about, and what changes the fingerprint.
func TestDatabaseSinkRowRules(t *testing.T) {
	const file = "  type: file\n  path: out/orders.jsonl\n"
	pg := "  type: postgres\n  dsn: ${ORDERS_DSN}\n  table: orders\n"
	tests := []struct {
		name, sink string
		err        string   // a problem the plan must have ("" none)
		warns      []string // the fields warned about, in order
	}{
		{"update without version warns", pg, "", []string{"sink.on_conflict"}},
		{"overwrite silences it", pg + "  overwrite: true\n", "", nil},
		{"ignore needs no version", pg + "  on_conflict: ignore\n", "", nil},
		{"version by value field", pg + "  version: value.updated_at\n", "", nil},
		{"version offset under a custom key warns", pg + "  version: offset\n  key: '{{ .Value.id }}'\n", "", []string{"sink.version"}},
		{"version offset under the default key", pg + "  version: offset\n", "", nil},
		{"version of no field", pg + "  version: valu.updated_at\n", `sink.version: unknown field "valu.updated_at"`, nil},
		{"version that cannot order", pg + "  version: topic\n", `sink.version: "topic" cannot order updates`, nil},
		{"version typo hints an ordering field", pg + "  version: timestamp_typ\n", `sink.version: unknown field "timestamp_typ": want offset, timestamp, value.<path> or header.<name> (did you mean "timestamp"?)`, nil},
		{"version typo of a value path", pg + "  version: values.updated_at\n", `(did you mean "value.updated_at"?)`, nil},
		{"version timestamp warns of ties", pg + "  version: timestamp\n", "", []string{"sink.version"}},
		{"empty version", pg + "  version: ''\n", "sink.version: empty", nil},
		{"on_tombstone delete", pg + "  on_tombstone: delete\n  overwrite: true\n", "", nil},
		{"on_tombstone unknown", pg + "  on_tombstone: drop\n  overwrite: true\n", `sink.on_tombstone: "drop" is not one of write, delete, skip`, nil},
		{"on_tombstone on a file", file + "  on_tombstone: delete\n", "sink.on_tombstone: does not apply to a file sink", nil},
		{"connections 8", pg + "  connections: 8\n  overwrite: true\n", "", nil},
		{"connections 0", pg + "  connections: 0\n  overwrite: true\n", "sink.connections: 0: want 1..64", nil},
		{"connections 65 on http", "  type: http\n  url: https://svc.internal/orders\n  connections: 65\n", "sink.connections: 65: want 1..64", nil},
		{"connections on sqlite", "  type: sqlite\n  path: out/o.db\n  table: t\n  connections: 2\n", "sink.connections: does not apply to a sqlite sink", nil},
		{"overwrite on a file", file + "  overwrite: true\n", "", nil},
		{"table with a non-ASCII letter", "  type: postgres\n  dsn: ${ORDERS_DSN}\n  table: commandés\n  overwrite: true\n",
			`sink.table: "commandés" is not a plain table name ([schema.]name of ASCII letters, digits and _, not beginning with a digit)`, nil},
		{"column with a non-ASCII letter", pg + "  overwrite: true\n  columns: {id: key, référence: value.ref}\n",
			`"référence" is not a plain column name (ASCII letters, digits and _, not beginning with a digit)`, nil},
	}
	opts := testOptions()
	opts.LookupEnv = func(string) (string, bool) { return "postgres://app@db/orders", true }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(minimalPlan, file, tt.sink, 1) + "throttle: {records_per_second: 5000}\n"
			p, err := Parse("plan.yaml", []byte(src), opts)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("Parse: %v, want a problem %q", err, tt.err)
			case tt.err != "":
				return
			}
			var got []string
			for _, w := range p.Warnings() {
				got = append(got, w.Field)
			}
			if strings.Join(got, " ") != strings.Join(tt.warns, " ") {
				t.Errorf("warnings %v, want %v", p.Warnings(), tt.warns)
			}
		})
	}
}

func TestDatabaseSinkRowRulesFingerprint(t *testing.T) {
	const file = "  type: file\n  path: out/orders.jsonl\n"
	pg := "  type: postgres\n  dsn: ${ORDERS_DSN}\n  table: orders\n"
	opts := testOptions()
	opts.LookupEnv = func(string) (string, bool) { return "postgres://app@db/orders", true }
	fp := func(extra string) string {
		return mustParse(t, strings.Replace(minimalPlan, file, pg+extra, 1), opts).Fingerprint()
	}
	base := fp("")
	if fp("  on_tombstone: write\n") != base {
		t.Error("on_tombstone: write (the default) written out changes the fingerprint")
	}
	for _, extra := range []string{"  on_tombstone: delete\n", "  version: value.v\n"} {
		if fp(extra) == base {
			t.Errorf("%q keeps the fingerprint: a resume would apply other rules to the rest of the window", extra)
		}
	}
	if fp("  connections: 4\n") != base || fp("  overwrite: true\n") != base {
		t.Error("connections or overwrite change the fingerprint: neither changes what the table holds")
	}
}
