package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner"
)

// leak is the part every secret of these tests shares: it must show in no
// output, report, resolution or dead-letter file.
const leak = "S3cr3t"

// secretVars sets the environment of the secret tests: every value that is
// a secret holds leak. brokers is the plain cluster, saslBrokers one that
// requires SASL, echo an endpoint that quotes the credentials it refuses.
func secretVars(t *testing.T, brokers, saslBrokers, echo string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there: connection refused
	for k, v := range map[string]string{
		"KAFKA_BROKERS":      brokers,
		"SASL_BROKERS":       saslBrokers,
		"SRC_PASSWORD":       "S3cr3t-XYZ", // wrong
		"SINK_PASSWORD":      "S3cr3t-KSINK",
		"ORDERS_DSN":         "postgres://u:S3cr3t-DSN@" + closed + "/test",
		"ORDERS_DSN_BAD":     "postgres://u:S3cr3t-DSN%zz@" + closed + "/test",
		"ORDERS_DSN_KV":      "host=127.0.0.1 port=" + closed[strings.LastIndex(closed, ":")+1:] + " user=u password=S3cr3t-KV dbname=test",
		"ORDERS_API_TOKEN":   "S3cr3t-TOK",
		"ORDERS_API_URL":     "http://api:S3cr3t-URLPW@" + closed + "/hook?token=S3cr3t-QTOK",
		"ECHO_API_URL":       echo + "/hook?token=S3cr3t-QTOK",
		"ORDERS_API_URL_BAD": "http://api:S3cr3t-URLBAD@" + closed + ":port/hook",
	} {
		t.Setenv(k, v)
	}
}

// newSASLCluster starts a broker that requires SASL, with topic orders2 and
// one user whose password is not the one the plans give.
func newSASLCluster(t *testing.T) string {
	t.Helper()
	return testenv.NewKafka(t, testenv.Topics("orders", "orders2"), testenv.Kfake(kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "alice", "right-password"), kfake.Superuser("PLAIN", "sinkuser", "right-password"))).Addr
}

// echoEndpoint answers every request with status, quoting the credentials
// it got in the body (as some APIs do in a 401) and naming the first
// record (so that a 400 rejects it: a dead letter).
func echoEndpoint(t *testing.T, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"index": 0,
			"error": "refused " + r.Header.Get("Authorization") + " for " + r.URL.RawQuery})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// secretPlan writes a plan replaying partition 0 of the topic from source
// into sink; extra is appended (on_error, dead_letter).
func secretPlan(t *testing.T, dir, name, source, sink, extra string) string {
	t.Helper()
	body := fmt.Sprintf(`version: 1
name: %s
source: %s
group: replay.%s
window: {offsets: {0: {from: earliest, to: latest}}}
throttle: {records_per_second: 100000, bytes_per_second: 0}
sink: %s
%s`, name, source, name, sink, extra)
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every command, on the failure paths where secrets used to leak or could:
// a wrong SASL password (source and kafka sink), an unreachable PostgreSQL
// with a password in the DSN (URL, malformed URL and key=value forms), an
// http sink to a closed port with a token in its header and its URL, an
// endpoint that quotes the token it refuses (its answer goes to the error,
// the report and the dead letters), and an http URL that does not parse.
// No secret may show in stdout, stderr, the report, the resolution file or
// any file written.
func TestSecretsNeverShow(t *testing.T) {
	sb, _ := newCluster(t, 1, 50)
	dir := t.TempDir()
	secretVars(t, sb.Addr, newSASLCluster(t), echoEndpoint(t, http.StatusBadRequest))
	t.Setenv("ECHO_401_URL", echoEndpoint(t, http.StatusUnauthorized))
	plain := `{brokers: ["${KAFKA_BROKERS}"], topic: orders}`
	auth := `{Authorization: "Bearer ${ORDERS_API_TOKEN}", X-Api-Key: "${ORDERS_API_TOKEN}"}`
	type check struct {
		plan string
		want string // in the output of run (or validate, for an invalid plan)
	}
	checks := []check{
		{secretPlan(t, dir, "source-sasl", `{brokers: ["${SASL_BROKERS}"], topic: orders, sasl: {mechanism: SCRAM-SHA-256, username: alice, password: "${SRC_PASSWORD}"}}`,
			fmt.Sprintf("{type: file, path: %q}", filepath.Join(dir, "out.jsonl")), ""),
			`SASL authentication failed for user \"alice\"`},
		{secretPlan(t, dir, "kafka-sink", plain, `{type: kafka, brokers: ["${SASL_BROKERS}"], topic: orders2, sasl: {mechanism: PLAIN, username: sinkuser, password: "${SINK_PASSWORD}"}}`, ""),
			`SASL authentication failed for user \"sinkuser\"`},
		{secretPlan(t, dir, "pg-url", plain, `{type: postgres, dsn: "${ORDERS_DSN}", table: t}`, ""), "postgres sink: connect"},
		{secretPlan(t, dir, "pg-bad-url", plain, `{type: postgres, dsn: "${ORDERS_DSN_BAD}", table: t}`, ""), "postgres sink: parse dsn"},
		{secretPlan(t, dir, "pg-kv", plain, `{type: postgres, dsn: "${ORDERS_DSN_KV}", table: t}`, ""), "postgres sink: connect"},
		{secretPlan(t, dir, "http-closed", plain, `{type: http, url: "${ORDERS_API_URL}", headers: `+auth+`, max_retries: 0}`, ""), "connection refused"},
		{secretPlan(t, dir, "http-401", plain, `{type: http, url: "${ECHO_401_URL}", headers: `+auth+`, max_retries: 0}`, ""), "401 Unauthorized"},
		{secretPlan(t, dir, "http-400", plain, `{type: http, url: "${ECHO_API_URL}", headers: `+auth+`, max_retries: 0}`,
			fmt.Sprintf("on_error: dead_letter\ndead_letter: {type: file, path: %q}\n", filepath.Join(dir, "dead.jsonl"))), "record dead-lettered"},
		{secretPlan(t, dir, "http-bad-url", plain, `{type: http, url: "${ORDERS_API_URL_BAD}", headers: `+auth+`}`, ""), "sink.url: not a URL"},
	}
	fixtures := filepath.Join(dir, "records.jsonl")
	if err := os.WriteFile(fixtures, []byte(`{"partition":0,"offset":1,"timestamp":"2026-11-03T10:00:00Z","value":{"id":1},"expect":"pass"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		name := strings.TrimSuffix(filepath.Base(c.plan), ".yaml")
		t.Run(name, func(t *testing.T) {
			report, resolution := filepath.Join(dir, name+".report.json"), filepath.Join(dir, name+".resolution.json")
			var all strings.Builder
			for _, args := range [][]string{
				{"validate", c.plan}, {"validate", "--format", "json", c.plan}, {"validate", "--format", "github", c.plan},
				{"plan", c.plan}, {"plan", "-o", "json", "--out", resolution, c.plan},
				{"run", "--yes", "--report", report, "--log-level", "debug", c.plan},
				{"status", "-o", "json", c.plan}, {"status", c.plan},
				{"reset", "--yes", c.plan},
				{"test", c.plan, "--records", fixtures},
			} {
				r := replay(t, args...)
				if strings.Contains(r.stdout+r.stderr, leak) {
					t.Errorf("replay %s: a secret leaked:\n%s", strings.Join(args, " "), r)
				}
				all.WriteString(r.stdout + r.stderr)
			}
			if !strings.Contains(all.String(), c.want) {
				t.Errorf("want %q in the output:\n%s", c.want, all.String())
			}
		})
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), leak) && filepath.Ext(f) != ".yaml" {
			t.Errorf("a secret leaked into %s:\n%s", f, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "dead.jsonl")); err != nil {
		t.Errorf("the http-400 run wrote no dead letters: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "http-401.report.json")); err != nil {
		t.Errorf("the http-401 run wrote no report: %v", err)
	}
}

// The last line of defence: whatever a message holds, the command prints
// no secret of the plan it loaded, in text or JSON logs, on stdout, stderr
// and in the report, and leaves numbers and JSON intact. It fails if the
// redaction of the command's streams or report is removed.
func TestCommandRedactsPlanSecrets(t *testing.T) {
	const numeric = "98765432"
	t.Setenv("SRC_PASSWORD", numeric)
	t.Setenv("ORDERS_DSN", "postgres://u:S3cr3t-DSN@db/test")
	dir := t.TempDir()
	file := secretPlan(t, dir, "p", `{brokers: ["k:9092"], topic: orders, sasl: {mechanism: SCRAM-SHA-256, username: u, password: "${SRC_PASSWORD}"}}`,
		`{type: postgres, dsn: "${ORDERS_DSN}", table: t}`, "")
	for _, terminalLike := range []bool{false, true} {
		var stdout, stderr testenv.Buffer
		a := newApp(&stdout, &stderr)
		a.logLevel = "debug"
		if err := a.setupLog(); err != nil {
			t.Fatal(err)
		}
		a.jsonLogs.Store(!terminalLike)
		if _, err := a.loadPlanFile(file, false); err != nil {
			t.Fatal(err)
		}
		a.log.Error().Err(errors.New("pgx said S3cr3t-DSN")).Str("pw", numeric).Msg("a library quoted S3cr3t-DSN")
		fmt.Fprintf(a.stdout, "table: %s %s\n", "S3cr3t-DSN", numeric)
		a.exitCode(fmt.Errorf("connect: password %q refused", numeric))
		report := filepath.Join(dir, "report.json")
		rep := &runner.Report{Plan: "p", Started: time.Unix(0, 0), Partitions: []runner.PartitionReport{{End: 98765432, Error: "sink said S3cr3t-DSN"}}}
		if err := a.writeReport(report, rep, nil); err != nil {
			t.Fatal(err)
		}
		b := readFile(t, report)
		out := stdout.String() + stderr.String() + string(b)
		if strings.Contains(out, leak) || strings.Contains(strings.ReplaceAll(string(b), `"end": 98765432`, ""), numeric) ||
			strings.Contains(stdout.String()+stderr.String(), numeric) {
			t.Errorf("a secret shows:\n%s", out)
		}
		if !strings.Contains(out, "xxxxx") || !json.Valid(b) || !strings.Contains(string(b), `"end": 98765432`) {
			t.Errorf("want secrets replaced by xxxxx, the report valid JSON with its numbers intact:\n%s", out)
		}
	}
}
