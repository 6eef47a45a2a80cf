package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner"
)

// seedTopics fills each topic of k (3 partitions) with n records inside a
// window [from, to) of whole seconds and one record of each partition
// before and after it, stamped with the producer's clock. A record's
// value is {"id": I, "topic": T, "amount": 19.99, "cust": "c<I>",
// "debug": "..."}.
func seedTopics(t *testing.T, k *testenv.Kafka, n int, topics ...string) (from, to time.Time) {
	t.Helper()
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(recs []*kgo.Record) {
		if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	edge := func(v string) time.Time {
		var recs []*kgo.Record
		for _, topic := range topics {
			for p := range int32(3) {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)})
			}
		}
		produce(recs)
		next := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(next)) // kept: the window's bounds are whole seconds
		return next.UTC()
	}
	from = edge(`{"early":true}`)
	var recs []*kgo.Record
	for _, topic := range topics {
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: fmt.Appendf(nil, "k%d", i),
				Value: fmt.Appendf(nil, `{"id":%d,"topic":%q,"amount":19.99,"cust":"c%d","debug":"%s"}`, i, topic, i, strings.Repeat("x", 20))})
		}
	}
	produce(recs)
	next := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(next)) // kept: the window's bounds are whole seconds
	to = next.UTC()
	edge(`{"late":true}`)
	return from, to
}

// topicsPlanFile writes a plan of topics orders and refunds over [from,
// to) with a mapping and an override of refunds' key, into sink.
func topicsPlanFile(t *testing.T, dir, name, addr string, from, to time.Time, rps int, sink string) string {
	t.Helper()
	body := fmt.Sprintf(`version: 1
name: %s
source: {brokers: [%q], topics: [orders, refunds]}
group: replay.%s
window: {from: %s, to: %s}
throttle: {records_per_second: %d}
mapping:
  - set: {amount_x3: 'value.amount * 3', src: 'topic'}
  - rename: {value.cust: customer}
  - drop: [value.debug]
overrides:
  refunds:
    key: 'refund-{{ .Value.id }}'
sink: %s
`, name, addr, name, from.Format(time.RFC3339), to.Format(time.RFC3339), rps, sink)
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkMapped fails t unless the JSON value v is a seeded record of topic
// as the mapping makes it: amount × 3 exact, cust renamed, debug dropped,
// the topic set.
func checkMapped(t *testing.T, topic string, v []byte) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		t.Fatalf("%s: value %s: %v", topic, v, err)
	}
	if string(m["amount_x3"]) != "59.97" || string(m["src"]) != `"`+topic+`"` || m["debug"] != nil || m["cust"] != nil || m["customer"] == nil {
		t.Fatalf("%s: mapped value %s: want amount_x3 59.97 (19.99 × 3, exact), src %q, cust renamed to customer, no debug", topic, v, topic)
	}
}

// TestTopicsIntoFilesAndPostgres: a plan of two topics with a mapping and
// a per-topic key replays each topic's window, as kcat reads it, once into
// its own JSONL file and its own PostgreSQL table ({topic}); the values are
// mapped exactly; the report and status list every topic partition, and a
// re-run does nothing.
func TestTopicsIntoFilesAndPostgres(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Topics("orders", "refunds"), testenv.Partitions(3))
	from, to := seedTopics(t, k, 300, "orders", "refunds")
	want := map[string][]string{}
	for _, topic := range []string{"orders", "refunds"} {
		want[topic] = testenv.KcatCoords(t, k.Addr, topic, -1, from, to)
		if len(want[topic]) != 300 {
			t.Fatalf("kcat reads %d records of %s's window, want 300: the topics were not seeded as meant", len(want[topic]), topic)
		}
	}
	for _, target := range []string{"file", "postgres"} {
		t.Run(target, func(t *testing.T) {
			dir := t.TempDir()
			sink := fileSink(filepath.Join(dir, "out-{topic}.jsonl"), 50)
			var dsn string
			if target == "postgres" {
				dsn = testenv.Postgres(t)
				sink = fmt.Sprintf("{type: postgres, dsn: %q, table: 'replay_{topic}', create_table: true, overwrite: true, batch_size: 50}", dsn)
			}
			planFile := topicsPlanFile(t, dir, "two-"+target, k.Addr, from, to, 0, sink)
			report := filepath.Join(dir, "report.json")
			r := replayProcess(t, dir, "run", "--yes", planFile, "--report", report)
			if r.code != exitOK {
				t.Fatalf("run: %s", r)
			}
			for topic, coords := range want {
				switch target {
				case "file":
					path := filepath.Join(dir, "out-"+topic+".jsonl")
					checkOnce(t, topic+"'s file", fileCoords(t, path), coords)
					sc := bufio.NewScanner(bytes.NewReader(readFile(t, path)))
					sc.Buffer(nil, 1<<20)
					for sc.Scan() {
						var line struct{ Value json.RawMessage }
						if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
							t.Fatal(err)
						}
						checkMapped(t, topic, line.Value)
					}
				case "postgres":
					checkOnce(t, topic+"'s table", testenv.PgCoords(t, dsn, "replay_"+topic), coords)
					rows, err := testenv.PgConn(t, dsn).Query(t.Context(), `SELECT key, value::text FROM replay_`+topic)
					if err != nil {
						t.Fatal(err)
					}
					for rows.Next() {
						var key, value string
						if err := rows.Scan(&key, &value); err != nil {
							t.Fatal(err)
						}
						checkMapped(t, topic, []byte(value))
						if refund := strings.HasPrefix(key, "refund-"); refund != (topic == "refunds") {
							t.Fatalf("%s: row key %q: only refunds' override keys rows refund-<id>", topic, key)
						}
					}
					rows.Close()
				}
			}
			var rep runner.Report
			if err := json.Unmarshal(readFile(t, report), &rep); err != nil {
				t.Fatal(err)
			}
			read, written, _ := rep.Totals()
			seen := map[string]int{}
			for _, p := range rep.Partitions {
				seen[p.Topic]++
			}
			if strings.Join(rep.Topics, ",") != "orders,refunds" || read != 600 || written != 600 || seen["orders"] != 3 || seen["refunds"] != 3 {
				t.Errorf("report: topics %v, read %d, written %d, partitions per topic %v: want orders and refunds, 600, 600, 3 each", rep.Topics, read, written, seen)
			}
			st := replayProcess(t, dir, "status", planFile, "-o", "json")
			var pr runner.Progress
			if err := json.Unmarshal([]byte(st.stdout), &pr); err != nil || pr.State != runner.StateDone || len(pr.Partitions) != 6 || pr.Partitions[5].Topic != "refunds" {
				t.Errorf("status of the finished plan: %v\n%s", err, st)
			}
			again := replayProcess(t, dir, "run", "--yes", planFile)
			if again.code != exitOK || !strings.Contains(again.stdout, "nothing to do: plan two-"+target+" already replayed every partition of orders, refunds") {
				t.Errorf("a re-run of the finished plan: %s", again)
			}
		})
	}
}

// TestTopicsKilledAndResumed: a throttled run of two topics is killed
// (SIGKILL) while it replays the second; status shows the first done and
// the second in progress; the re-run resumes the second without touching
// the first's file, and each file holds its topic's window once. A
// resolution file of both topics pins the same ranges, and one of another
// plan is refused.
func TestTopicsKilledAndResumed(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Topics("orders", "refunds"), testenv.Partitions(3))
	from, to := seedTopics(t, k, 400, "orders", "refunds")
	dir := t.TempDir()
	// 200 records/s: each topic's 400 records take two seconds, so the kill
	// lands inside the second topic even on a loaded machine.
	planFile := topicsPlanFile(t, dir, "two-killed", k.Addr, from, to, 200, fileSink(filepath.Join(dir, "out-{topic}.jsonl"), 20))
	res := filepath.Join(dir, "res.json")
	if r := replayProcess(t, dir, "plan", planFile, "--out", res); r.code != exitOK || !strings.Contains(r.stdout, "topics orders, refunds: 800 offsets, 800 to replay") {
		t.Fatalf("plan --out: %s", r)
	}
	victim := startProcess(t, dir, "run", "--yes", planFile, "--resolution", res)
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
		if victim.exited() {
			t.Fatalf("the run ended before it was killed: %s", victim.result())
		}
		var n int64
		for _, o := range k.Committed(t, "replay.two-killed", "refunds") {
			n += o.At
		}
		return n > 60 // past the starts (1 per partition), pinned when the run started
	}, "the first commits of refunds")
	victim.kill()
	orders := readFile(t, filepath.Join(dir, "out-orders.jsonl"))
	st := replayProcess(t, dir, "status", planFile)
	if !strings.Contains(st.stdout, "topics orders, refunds: in-progress") || !strings.Contains(st.stdout, "every partition was replayed to its end (400 offsets)") {
		t.Errorf("status after the kill: want orders done and the plan in progress:\n%s", st)
	}
	if r := replayProcess(t, dir, "run", "--yes", planFile, "--resolution", res); r.code != exitOK || !strings.Contains(r.stdout, "topic orders: nothing to do") {
		t.Fatalf("the re-run: %s", r)
	}
	if !bytes.Equal(readFile(t, filepath.Join(dir, "out-orders.jsonl")), orders) {
		t.Error("the re-run changed orders' file, which the killed run had finished")
	}
	for _, topic := range []string{"orders", "refunds"} {
		checkOnce(t, topic+"'s file", fileCoords(t, filepath.Join(dir, "out-"+topic+".jsonl")), testenv.KcatCoords(t, k.Addr, topic, -1, from, to))
	}
	// The resolution file names each range's topic; a one-topic plan with
	// it is refused, and so is a file whose topics the plan does not read.
	b := readFile(t, res)
	if !strings.Contains(string(b), `"topics": [`) || strings.Count(string(b), `"topic": "refunds"`) != 3 {
		t.Errorf("the resolution file does not name each range's topic:\n%s", b)
	}
	edited := filepath.Join(dir, "edited.json")
	if err := os.WriteFile(edited, bytes.ReplaceAll(b, []byte(`"refunds"`), []byte(`"payments"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := replayProcess(t, dir, "run", "--yes", planFile, "--resolution", edited); r.code == exitOK || !strings.Contains(r.stderr, "refunds") {
		t.Errorf("a resolution of other topics: %s", r)
	}
}

// TestTopicsRestartKilledBeforeTheNextTopic: a --restart of a plan of
// two topics into PostgreSQL with a checkpoint_table, killed inside the
// first topic, resumes the second from its start: the checkpoints the
// earlier run left for it are not this run's, so the rows the table lost
// since are written again.
func TestTopicsRestartKilledBeforeTheNextTopic(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Topics("orders", "refunds"), testenv.Partitions(3))
	from, to := seedTopics(t, k, 400, "orders", "refunds")
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	if _, err := conn.Exec(t.Context(), `DROP TABLE IF EXISTS restart_next_orders, restart_next_refunds, restart_next_ckpt`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sink := fmt.Sprintf("{type: postgres, dsn: %q, table: 'restart_next_{topic}', create_table: true, overwrite: true, checkpoint_table: restart_next_ckpt, batch_size: 20}", dsn)
	fast := topicsPlanFile(t, dir, "restart-next", k.Addr, from, to, 100000, sink)
	if r := replayProcess(t, dir, "run", "--yes", fast); r.code != exitOK {
		t.Fatalf("the first run: %s", r)
	}
	if _, err := conn.Exec(t.Context(), `TRUNCATE restart_next_refunds`); err != nil {
		t.Fatal(err)
	}
	// The same plan at 200 records/s (the throttle is not in the
	// fingerprint): orders' 400 records take two seconds.
	slow := filepath.Join(dir, "slow.yaml")
	if err := os.WriteFile(slow, bytes.Replace(readFile(t, fast), []byte("records_per_second: 100000"), []byte("records_per_second: 200"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	victim := startProcess(t, dir, "run", "--yes", "--restart", slow)
	sum := func(topic string) (n int64) {
		for _, o := range k.Committed(t, "replay.restart-next", topic) {
			n += o.At
		}
		return n
	}
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
		if victim.exited() {
			t.Fatalf("the run ended before it was killed: %s", victim.result())
		}
		// The restart pinned both topics' starts (offset 1 of each
		// partition) and wrote part of orders.
		return sum("refunds") == 3 && sum("orders") > 60
	}, "the restart inside orders")
	victim.kill()
	if n := sum("orders"); n >= 403 {
		t.Fatalf("the kill came after orders was done (commits %d)", n)
	}
	if r := replayProcess(t, dir, "run", "--yes", fast); r.code != exitOK {
		t.Fatalf("the resumed run: %s", r)
	}
	checkOnce(t, "refunds' table", testenv.PgCoords(t, dsn, "restart_next_refunds"), testenv.KcatCoords(t, k.Addr, "refunds", -1, from, to))
}

// TestTopicsShareOneTable: two topics write the same keys into one
// PostgreSQL table with a version: the greater version wins whichever
// topic wrote it, and of two equal versions the row of the topic listed
// first in source.topics stays (topics replay in that order, and an equal
// version does not replace a row): the plan decides, not arrival order.
func TestTopicsShareOneTable(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Topics("orders", "refunds"), testenv.Partitions(3))
	cl := k.Client(t)
	now := time.Now()
	var recs []*kgo.Record
	for topic, vs := range map[string]map[string]int{"orders": {"a": 1, "b": 5, "c": 9}, "refunds": {"a": 2, "b": 5, "c": 3}} {
		for key, v := range vs {
			recs = append(recs, &kgo.Record{Topic: topic, Timestamp: now, Value: fmt.Appendf(nil, `{"k":%q,"v":%d,"from":%q}`, key, v, topic)})
		}
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dsn := testenv.Postgres(t)
	dir := t.TempDir()
	for i, order := range []string{"orders, refunds", "refunds, orders"} {
		table := fmt.Sprintf("shared_%d", i)
		planFile := filepath.Join(dir, table+".yaml")
		body := fmt.Sprintf(`version: 1
name: %s
source: {brokers: [%q], topics: [%s]}
group: replay.%s
window: {offsets: {all: {from: earliest, to: latest}}}
sink: {type: postgres, dsn: %q, table: %s, create_table: true, key: '{{ .Value.k }}', version: value.v}
`, table, k.Addr, order, table, dsn, table)
		if err := os.WriteFile(planFile, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := replayProcess(t, dir, "validate", planFile); r.code != exitOK || strings.Contains(r.stderr+r.stdout, "without a version") {
			t.Errorf("validate %s: %s", table, r)
		}
		if r := replayProcess(t, dir, "run", "--yes", planFile); r.code != exitOK {
			t.Fatalf("run %s: %s", table, r)
		}
		first := strings.Split(order, ", ")[0]
		want := map[string]string{"a": "refunds", "b": first, "c": "orders"}
		rows, err := testenv.PgConn(t, dsn).Query(t.Context(), `SELECT key, value->>'from' FROM `+table)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for rows.Next() {
			var key, from string
			if err := rows.Scan(&key, &from); err != nil {
				t.Fatal(err)
			}
			got[key] = from
		}
		rows.Close()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("topics [%s]: rows from %v, want %v (the greater version; of equal ones, the first topic's)", order, got, want)
		}
	}
}

// TestTopicsResolvedOnce: an open-ended window over two topics is
// resolved for both when the run first starts; killed while it replays
// the first, the re-run replays the second as resolved then, not the
// records produced into it since.
func TestTopicsResolvedOnce(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Topics("orders", "refunds"), testenv.Partitions(3))
	from, _ := seedTopics(t, k, 300, "orders", "refunds")
	dir := t.TempDir()
	planFile := filepath.Join(dir, "open.yaml")
	body := fmt.Sprintf(`version: 1
name: open
source: {brokers: [%q], topics: [orders, refunds]}
group: replay.open
window: {from: %s}
throttle: {records_per_second: 300}
sink: {type: file, path: %q, batch_size: 10}
`, k.Addr, from.Format(time.RFC3339), filepath.Join(dir, "out-{topic}.jsonl"))
	if err := os.WriteFile(planFile, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	victim := startProcess(t, dir, "run", "--yes", planFile)
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
		if victim.exited() {
			t.Fatalf("the run ended before it was killed: %s", victim.result())
		}
		var n int64
		for _, o := range k.Committed(t, "replay.open", "orders") {
			n += o.At
		}
		return n > 60 // past the starts (1 per partition) pinned first
	}, "orders' first commits")
	victim.kill()
	if got := k.Committed(t, "replay.open", "refunds"); len(got) != 3 {
		t.Fatalf("refunds' ranges were not pinned when the run started: commits %v", got)
	}
	killed := time.Now()
	time.Sleep(time.Until(killed.Truncate(time.Millisecond).Add(2 * time.Millisecond))) // kept: later records get a later millisecond
	cl := k.Client(t)
	var more []*kgo.Record
	for i := range 30 {
		more = append(more, &kgo.Record{Topic: "refunds", Value: fmt.Appendf(nil, `{"late":%d}`, i)})
	}
	if err := cl.ProduceSync(t.Context(), more...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if r := replayProcess(t, dir, "run", "--yes", planFile); r.code != exitOK {
		t.Fatalf("the re-run: %s", r)
	}
	for _, topic := range []string{"orders", "refunds"} {
		checkOnce(t, topic+"'s file", fileCoords(t, filepath.Join(dir, "out-"+topic+".jsonl")), testenv.KcatCoords(t, k.Addr, topic, -1, from, killed.Add(time.Millisecond)))
	}
}

// TestTopicsReportOfAStoppedRun: a run of two topics that fails in the
// first reports the second's partitions too, not read, and exits 1 naming
// the topic.
func TestTopicsReportOfAStoppedRun(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Topics("orders", "refunds"), testenv.Partitions(3))
	from, to := seedTopics(t, k, 30, "orders", "refunds")
	dir := t.TempDir()
	planFile := filepath.Join(dir, "bad.yaml")
	body := fmt.Sprintf(`version: 1
name: bad-mapping
source: {brokers: [%q], topics: [orders, refunds]}
group: replay.bad-mapping
window: {from: %s, to: %s}
mapping:
  - set: {x: 'value.cust * 2'}
sink: {type: file, path: %q}
`, k.Addr, from.Format(time.RFC3339), to.Format(time.RFC3339), filepath.Join(dir, "out-{topic}.jsonl"))
	if err := os.WriteFile(planFile, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.json")
	r := replayProcess(t, dir, "run", "--yes", planFile, "--report", report)
	if r.code != exitFailed || !strings.Contains(r.stderr, "topic orders: ") || !strings.Contains(r.stderr, "string * number") {
		t.Fatalf("a mapping error in the first topic: %s", r)
	}
	var rep runner.Report
	if err := json.Unmarshal(readFile(t, report), &rep); err != nil {
		t.Fatal(err)
	}
	refunds := 0
	for _, p := range rep.Partitions {
		if p.Topic == "refunds" {
			refunds++
			if p.Read != 0 || p.Next != p.Start {
				t.Errorf("refunds/%d in the report: read %d, next %d: the run never reached it", p.Partition, p.Read, p.Next)
			}
		}
	}
	if len(rep.Partitions) != 6 || refunds != 3 || rep.Error == "" || rep.Published {
		t.Errorf("report: %d partitions (%d of refunds), error %q, published %v: want 6, 3, the error, false", len(rep.Partitions), refunds, rep.Error, rep.Published)
	}
}
