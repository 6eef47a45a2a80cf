package plan_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/registry"
)

var updateFingerprints = flag.Bool("update-fingerprints", false, "rewrite testdata/fingerprints.golden")

// goldenFingerprints is the file that records the fingerprint of every plan
// the repository holds: the plans under plans/, the YAML files of testdata
// directories and the plans written as raw strings in test files.
const goldenFingerprints = "testdata/fingerprints.golden"

// rawString is a Go raw string literal.
var rawString = regexp.MustCompile("`[^`]*`")

// fmtVerb fills the verbs of a plan written as a fmt template with a value.
var fmtVerb = strings.NewReplacer("%s", "x", "%d", "10", "%q", `"x"`, "%v", "x")

// flowSink is a sink section written as a YAML flow mapping, two levels of
// nesting included ({type: kafka, sasl: {...}}).
var flowSink = regexp.MustCompile(`\{type: [a-z]+(?:[^{}\n]|\{(?:[^{}\n]|\{[^{}\n]*\})*\})*\}`)

// flowText is a flow section found in a Go file as YAML: fmt verbs filled,
// the quotes of a Go string literal unescaped.
func flowText(m string) string { return strings.ReplaceAll(fmtVerb.Replace(m), `\"`, `"`) }

// basePlan is a plan without its sink, which the sink sections found in
// test files complete.
const basePlan = "version: 1\nname: golden\nsource: {brokers: [\"kafka:9092\"], topic: orders}\ngroup: replay.golden\nwindow: {from: 2026-11-01T00:00:00Z, to: 2026-11-02T00:00:00Z}\n"

// repoPlans returns the plan texts of the repository by the SHA-256 of
// their text, with where each was found.
func repoPlans(t *testing.T) map[string]struct{ where, text string } {
	out := map[string]struct{ where, text string }{}
	add := func(where, text string) {
		if !strings.Contains(text, "sink:") {
			return
		}
		sum := sha256.Sum256([]byte(text))
		out[hex.EncodeToString(sum[:])] = struct{ where, text string }{where, text}
	}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != ".." {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel("..", path)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
		case strings.HasSuffix(path, ".yaml") && (strings.HasPrefix(rel, "plans/") || strings.Contains(rel, "testdata/")):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			add(rel, string(b))
		case strings.HasSuffix(path, "_test.go"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, m := range rawString.FindAllString(string(b), -1) {
				add(fmt.Sprintf("%s#%d", rel, i), fmtVerb.Replace(strings.Trim(m, "`")))
			}
			for i, m := range flowSink.FindAllString(string(b), -1) {
				add(fmt.Sprintf("%s@sink%d", rel, i), basePlan+"sink: "+flowText(m)+"\n")
				add(fmt.Sprintf("%s@dead%d", rel, i), basePlan+"sink: {type: stdout}\non_error: dead_letter\ndead_letter: "+flowText(m)+"\n")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fingerprintOf loads text as a plan with a fixed clock and environment;
// ok is false when it is not a valid plan.
func fingerprintOf(text string) (fp string, ok bool) {
	env := map[string]string{
		"KAFKA_BROKERS": "kafka-1:9092,kafka-2:9092", "ORDERS_DSN": "postgres://app@db.internal:5432/orders",
		"ORDERS_API_TOKEN": "t0ken", "ORDERS_API_URL": "https://orders.internal/api/replay", "RATE": "2000",
	}
	p, err := plan.Parse("plan.yaml", []byte(text), plan.LoadOptions{
		Sinks:         registry.Catalog(),
		Now:           func() time.Time { return time.Date(2026, 11, 5, 12, 0, 0, 0, time.UTC) },
		LookupEnv:     func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		AllowUnsetEnv: true,
	})
	if err != nil {
		return "", false
	}
	return p.Fingerprint(), true
}

// TestFingerprintsUnchanged checks that every plan of the repository keeps
// the fingerprint recorded in testdata/fingerprints.golden: a changed
// fingerprint makes every interrupted run of that plan unresumable. Plans
// the golden file does not know yet are recorded with -update-fingerprints.
func TestFingerprintsUnchanged(t *testing.T) {
	plans := repoPlans(t)
	got := map[string]string{}
	where := map[string]string{}
	for sum, pl := range plans {
		if fp, ok := fingerprintOf(pl.text); ok {
			got[sum], where[sum] = fp, pl.where
		}
	}
	if *updateFingerprints {
		sums := make([]string, 0, len(got))
		for sum := range got {
			sums = append(sums, sum)
		}
		sort.Slice(sums, func(i, j int) bool { return where[sums[i]] < where[sums[j]] })
		var b strings.Builder
		for _, sum := range sums {
			fmt.Fprintf(&b, "%s %s %s\n", sum, got[sum], where[sum])
		}
		if err := os.WriteFile(goldenFingerprints, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(goldenFingerprints)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	checked := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			t.Fatalf("bad line in %s: %q", goldenFingerprints, sc.Text())
		}
		sum, want, at := fields[0], fields[1], fields[2]
		pl, found := plans[sum]
		if !found {
			continue // the test that held this plan changed it
		}
		checked++
		fp, ok := fingerprintOf(pl.text)
		switch {
		case !ok:
			t.Errorf("%s (recorded at %s) no longer loads", pl.where, at)
		case fp != want:
			t.Errorf("%s: fingerprint %s, want %s", pl.where, fp, want)
		}
	}
	for _, c := range fingerprintCases {
		if _, ok := fingerprintOf(basePlan + "sink: " + c + "\n"); !ok {
			t.Errorf("sink %s: not a valid plan, so its fields are not in the golden file", c)
		}
	}
	if checked < 100 {
		t.Errorf("only %d recorded plans found in the repository: want at least 100", checked)
	}
}

// fingerprintCases are sink sections that reach every field of the
// fingerprint; repoPlans finds them here as in any other test file.
var fingerprintCases = []string{
	"{type: file, path: out/a.jsonl, order: partition, value_format: base64}",
	"{type: file, path: 'out/a-{partition}.csv', format: csv, per_partition: true, columns: {id: key, v: value.id}}",
	"{type: file, path: out/a.jsonl, format: jsonl, order: interleaved, value_format: auto, overwrite: true}",
	"{type: stdout, value_format: text, key: '{{ .Value.id }}'}",
	"{type: postgres, dsn: ${ORDERS_DSN}, table: orders, on_conflict: ignore, on_tombstone: delete, version: value.updated_at, checkpoint_table: ck, copy_threshold: 10, connections: 4}",
	"{type: postgres, dsn: ${ORDERS_DSN}, table: s.orders, on_tombstone: write, columns: {id: key, body: value, ts: timestamp}, create_table: true}",
	"{type: sqlite, path: out/o.db, table: orders, on_tombstone: skip, version: offset, columns: {id: key, v: value}}",
	"{type: kafka, brokers: [\"k:9092\"], topic: copy, keep_partition: true, exactly_once: true, transactional_id: tx}",
	"{type: kafka, brokers: [\"k:9092\"], topic: copy, key: '{{ .Key }}', tls: {enabled: true}}",
	"{type: http, url: \"https://Orders.Internal/api/replay?x=1\", value_format: json, max_retries: 2, max_retry_wait: 5s, request_timeout: 1m, connections: 2}",
	"{type: http, url: ${ORDERS_API_URL}, headers: {Authorization: \"Bearer ${ORDERS_API_TOKEN}\"}, batch_size: 10, retry: {max_elapsed: 1m}}",
}
