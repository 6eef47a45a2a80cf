package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner"
)

// skewedTopic fills topic orders (4 partitions) with n records in a window
// [from, to) of whole seconds, and one record of each partition before
// and after it: partition 0 holds 80 % of the window, in transactions of
// 50 records of which every fourth is aborted (no part of the window
// read read_committed; the shards' cuts fall inside transactions), the
// others the rest, produced plainly. Records carry the producer's clock
// (as live data does): a transaction's markers carry the broker's, and
// backdated records would put a marker stamped now inside the window.
func skewedTopic(t *testing.T, k *testenv.Kafka, n int) (from, to time.Time) {
	t.Helper()
	plain := k.Client(t, kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	edge := func(v string) time.Time {
		var recs []*kgo.Record
		for p := range int32(4) {
			recs = append(recs, &kgo.Record{Partition: p, Value: []byte(v)})
		}
		if err := plain.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		next := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(next)) // kept: the window's bounds are whole seconds
		return next.UTC()
	}
	from = edge(`{"early":true}`)
	txn := k.Client(t, kgo.TransactionalID("skewed-"+t.Name()), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	hot := n * 8 / 10
	for b := 0; b*50 < hot; b++ {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := b * 50; i < min(hot, (b+1)*50); i++ {
			recs = append(recs, &kgo.Record{Partition: 0, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"n":%d}`, i)})
		}
		if err := txn.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(t.Context(), kgo.TransactionEndTry(b%4 != 3)); err != nil {
			t.Fatal(err)
		}
	}
	var recs []*kgo.Record
	for i := range n - hot {
		recs = append(recs, &kgo.Record{Partition: int32(1 + i%3), Value: fmt.Appendf(nil, `{"m":%d}`, i)})
	}
	if err := plain.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	next := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(next)) // kept: the window's bounds are whole seconds
	to = next.UTC()
	edge(`{"late":true}`)
	return from, to
}

// shardCoords reads the partition/offset coordinates of the shards' files
// dir/out-<i>.jsonl, i < n.
func shardCoords(t *testing.T, dir string, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		out = append(out, fileCoords(t, filepath.Join(dir, fmt.Sprintf("out-%d.jsonl", i)))...)
	}
	return out
}

// parquetShardCoords reads the rows' partition/offset coordinates of the
// shards' outputs dir/shard=<i>, checking that each shard's objects are
// named after its sub-ranges (tiling them) and that each shard wrote its
// manifest.
func parquetShardCoords(t *testing.T, dir string, res *runner.Resolution) []string {
	t.Helper()
	var out []string
	for _, sh := range res.Shards.Shards {
		sd := filepath.Join(dir, fmt.Sprintf("shard=%d", sh.Index))
		if _, err := os.Stat(filepath.Join(sd, "_manifest.json")); err != nil {
			t.Errorf("shard %d: no manifest: %v", sh.Index, err)
		}
		tiles := map[int32][][2]int64{}
		files, _ := filepath.Glob(filepath.Join(sd, "orders", "*", "*.parquet"))
		for _, path := range files {
			var part int32
			var first, end int64
			name, _ := filepath.Rel(sd, path)
			if _, err := fmt.Sscanf(filepath.ToSlash(name), "orders/%d/%d-%d.parquet", &part, &first, &end); err != nil {
				t.Fatalf("shard %d: object %s: %v", sh.Index, name, err)
			}
			tiles[part] = append(tiles[part], [2]int64{first, end})
			rows, err := pq.ReadFile[struct {
				Partition int32 `parquet:"partition"`
				Offset    int64 `parquet:"offset"`
			}](path)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for _, r := range rows {
				out = append(out, fmt.Sprintf("%d/%d", r.Partition, r.Offset))
			}
		}
		for _, sub := range sh.Ranges {
			ts := tiles[sub.Partition]
			slices.SortFunc(ts, func(a, b [2]int64) int { return int(a[0] - b[0]) })
			at := sub.Start
			for _, tl := range ts {
				if tl[0] != at {
					t.Errorf("shard %d partition %d: objects %v do not tile [%d, %d)", sh.Index, sub.Partition, ts, sub.Start, sub.End)
					break
				}
				at = tl[1]
			}
			if at != sub.End {
				t.Errorf("shard %d partition %d: objects end at %d, the sub-range at %d", sh.Index, sub.Partition, at, sub.End)
			}
		}
	}
	return out
}

// checkOnce fails t unless got holds each of want once and nothing else.
func checkOnce(t *testing.T, what string, got, want []string) {
	t.Helper()
	if msg := onceProblem(got, want); msg != "" {
		t.Fatalf("%s: %s", what, msg)
	}
}

// onceProblem says how got differs from holding each of want once and
// nothing else (the coordinates held more than once, those missing, the
// counts); "" when it does not.
func onceProblem(got, want []string) string {
	seen := map[string]int{}
	for _, c := range got {
		seen[c]++
	}
	var twice, missing []string
	for c, n := range seen {
		if n > 1 {
			twice = append(twice, c)
		}
	}
	for _, c := range want {
		if seen[c] == 0 {
			missing = append(missing, c)
		}
	}
	if len(twice) == 0 && len(missing) == 0 && len(seen) == len(want) {
		return ""
	}
	slices.Sort(twice)
	return fmt.Sprintf("%d records (%d distinct) for kcat's %d; %d held more than once: %s; %d missing: %s",
		len(got), len(seen), len(want), len(twice), abbreviate(twice, 40), len(missing), abbreviate(missing, 40))
}

// TestShardsFourAtOnce: a window over a skewed topic (80 % of the records
// in one partition, in transactions, some aborted) split into 4 shards;
// the shard table is within 1.3x; 4 shard processes run at once, into
// files, PostgreSQL and one SQLite database, and the union holds kcat's read_committed
// window once; replay status shows every shard done.
func TestShardsFourAtOnce(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Topics("orders"), testenv.Partitions(4))
	from, to := skewedTopic(t, k, 4000)
	want := testenv.KcatCoords(t, k.Addr, "orders", -1, from, to)
	if len(want) < 3000 {
		t.Fatalf("kcat reads %d records of the window: the topic was not seeded as meant", len(want))
	}
	for _, target := range []string{"file", "postgres", "sqlite", "parquet"} {
		t.Run(target, func(t *testing.T) {
			dir := t.TempDir()
			sink := fileSink(filepath.Join(dir, "out-{shard}.jsonl"), 100)
			var dsn string
			switch target {
			case "postgres":
				dsn = testenv.Postgres(t)
				sink = fmt.Sprintf("{type: postgres, dsn: %q, table: sharded, create_table: true, batch_size: 100}", dsn)
			case "sqlite":
				sink = fmt.Sprintf("{type: sqlite, path: %q, table: orders, create_table: true, batch_size: 100}", filepath.Join(dir, "out.db"))
			case "parquet":
				sink = fmt.Sprintf("{type: parquet, path: %q, batch_size: 100, max_rows_per_file: 300}", filepath.Join(dir, "pq", "shard={shard}"))
			}
			planFile := writePlan(t, dir, planSpec{name: "sharded-" + target, addr: k.Addr, from: from, to: to, recordsPerSecond: 0, sink: sink})
			resFile := filepath.Join(dir, "res.json")
			r := replayProcess(t, dir, "plan", planFile, "--shards", "4", "--out", resFile)
			if r.code != exitOK || !strings.Contains(r.stdout, "4 shards") {
				t.Fatalf("replay plan --shards 4: %s", r)
			}
			res, err := runner.ReadResolution(resFile)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := res.Shards.Shards[0].Records, int64(0)
			for _, s := range res.Shards.Shards {
				lo, hi = min(lo, s.Records), max(hi, s.Records)
				if !strings.Contains(r.stdout, s.Group) {
					t.Errorf("the shard table does not name shard %d's group %s:\n%s", s.Index, s.Group, r.stdout)
				}
			}
			if float64(hi) > 1.3*float64(lo) {
				t.Errorf("shards of %d to %d records: more than 1.3x apart", lo, hi)
			}
			t.Logf("shard table:\n%s", r.stdout)
			var procs []*process
			for i := range 4 {
				procs = append(procs, startProcess(t, dir, "run", "--yes", planFile, "--resolution", resFile, "--shard", fmt.Sprintf("%d/4", i)))
			}
			for i, p := range procs {
				r := p.result()
				if r.code != exitOK {
					t.Fatalf("shard %d/4: %s", i, r)
				}
				// The other shards' partitions are the window's, not ones
				// added to the topic since.
				if strings.Contains(r.stdout+r.stderr, "were added") {
					t.Errorf("shard %d/4 takes the other shards' partitions for added ones:\n%s", i, r)
				}
			}
			var got []string
			switch target {
			case "file":
				got = shardCoords(t, dir, 4)
			case "postgres":
				got = testenv.PgCoords(t, dsn, "sharded")
			case "sqlite":
				got = sinkKeys(t, filepath.Join(dir, "out.db"))
			case "parquet":
				got = parquetShardCoords(t, filepath.Join(dir, "pq"), res)
			}
			checkOnce(t, "the shards' union", got, want)
			st := replayProcess(t, dir, "status", planFile, "--resolution", resFile)
			// The total is of offsets: transaction markers and aborted
			// records take offsets and are no records.
			if st.code != exitOK || strings.Count(st.stdout, " done ") < 4 || !strings.Contains(st.stdout, "4 done") || !strings.Contains(st.stdout, " offsets replayed (100.0%)") {
				t.Errorf("status after every shard finished:\n%s", st)
			}
		})
	}
}

// TestShardKilledAndRerun: one of 3 throttled shards is killed (SIGKILL)
// after its first commits; the other two finish and their files and
// commits are not touched again by the killed shard's re-run, which
// resumes and completes it; the union is kcat's window once. A changed
// plan with the old file is refused (exit 3), and so are a file edited by
// hand and a run of a sharded file without --shard.
func TestShardKilledAndRerun(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Topics("orders"), testenv.Partitions(4))
	from, to := skewedTopic(t, k, 1200)
	want := testenv.KcatCoords(t, k.Addr, "orders", -1, from, to)
	dir := t.TempDir()
	spec := planSpec{name: "killed", addr: k.Addr, from: from, to: to, recordsPerSecond: 600,
		sink: fileSink(filepath.Join(dir, "out-{shard}.jsonl"), 20)}
	planFile := writePlan(t, dir, spec)
	resFile := filepath.Join(dir, "res.json")
	if r := replayProcess(t, dir, "plan", planFile, "--shards", "3", "--out", resFile); r.code != exitOK {
		t.Fatalf("plan --shards 3: %s", r)
	}
	run := func(i int) *process {
		return startProcess(t, dir, "run", "--yes", planFile, "--resolution", resFile, "--shard", fmt.Sprintf("%d/3", i))
	}
	victim := run(1)
	others := []*process{run(0), run(2)}
	res, err := runner.ReadResolution(resFile)
	if err != nil {
		t.Fatal(err)
	}
	group := res.Shards.Shards[1].Group
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		if victim.exited() {
			t.Fatalf("shard 1 ended before it was killed: %s", victim.result())
		}
		return len(k.Committed(t, group, "orders")) > 0
	}, "shard 1's first commits")
	victim.kill()
	for i, p := range others {
		if r := p.result(); r.code != exitOK {
			t.Fatalf("shard %d: %s", 2*i, r)
		}
	}
	before := map[string][]byte{}
	for _, i := range []int{0, 2} {
		before[fmt.Sprint(i)] = readFile(t, filepath.Join(dir, fmt.Sprintf("out-%d.jsonl", i)))
	}
	st := replayProcess(t, dir, "status", planFile, "--resolution", resFile)
	if !strings.Contains(st.stdout, "2 done") || !strings.Contains(st.stdout, "1 stopped") || !strings.Contains(st.stdout, "--shard 1/3") {
		t.Errorf("status with shard 1 killed: want 2 done, 1 stopped and the command that resumes shard 1:\n%s", st)
	}
	if r := run(1).result(); r.code != exitOK {
		t.Fatalf("shard 1's re-run: %s", r)
	}
	for i, b := range before {
		if now := readFile(t, filepath.Join(dir, "out-"+i+".jsonl")); !slices.Equal(now, b) {
			t.Errorf("shard %s's file changed when shard 1 ran again", i)
		}
	}
	checkOnce(t, "the shards' union", shardCoords(t, dir, 3), want)

	// Refusals: a sharded file without --shard, a count that is not the
	// file's, a file edited by hand, a plan changed since the file.
	if r := replayProcess(t, dir, "run", "--yes", planFile, "--resolution", resFile); r.code != exitInvalid || !strings.Contains(r.stderr, "--shard I/3") {
		t.Errorf("a sharded resolution without --shard: %s", r)
	}
	if r := replayProcess(t, dir, "run", "--yes", planFile, "--resolution", resFile, "--shard", "0/4"); r.code != exitInvalid || !strings.Contains(r.stderr, "has 3 shards") {
		t.Errorf("--shard 0/4 of a file of 3: %s", r)
	}
	edited := filepath.Join(dir, "edited.json")
	b := readFile(t, resFile)
	e := strings.Replace(string(b), `"group": "replay.killed.shard-2-of-3"`, `"group": "replay.killed.shard-9-of-3"`, 1)
	if e == string(b) {
		t.Fatalf("the resolution file does not hold shard 2's group:\n%s", b)
	}
	if err := os.WriteFile(edited, []byte(e), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := replayProcess(t, dir, "run", "--yes", planFile, "--resolution", edited, "--shard", "2/3"); r.code != exitRefused || !strings.Contains(r.stderr, "edited") {
		t.Errorf("a hand-edited sharded file: %s", r)
	}
	spec.from = spec.from.Add(-time.Second)
	writePlan(t, dir, spec)
	if r := replayProcess(t, dir, "run", "--yes", planFile, "--resolution", resFile, "--shard", "0/3"); r.code != exitRefused || !strings.Contains(r.stderr, "the plan changed") {
		t.Errorf("a changed plan with the old file: %s", r)
	}
}

// TestShardsPlanRefusals: --shards needs --out, a file sink needs {shard}
// in its path, and a path with {shard} needs --shard.
func TestShardsPlanRefusals(t *testing.T) {
	k, seed := newCluster(t, 2, 100)
	dir := t.TempDir()
	plain := writePlan(t, dir, planSpec{name: "plain", addr: k.Addr, from: seed.From, to: seed.To, sink: fileSink(filepath.Join(dir, "out.jsonl"), 10)})
	if r := replay(t, "plan", plain, "--shards", "2"); r.code != exitInvalid || !strings.Contains(r.stderr, "--out") {
		t.Errorf("--shards without --out: %s", r)
	}
	if r := replay(t, "plan", plain, "--shards", "2", "--out", filepath.Join(dir, "r.json")); r.code != exitInvalid || !strings.Contains(r.stderr, "{shard}") {
		t.Errorf("--shards with a file path without {shard}: %s", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "r.json")); err == nil {
		t.Error("a refused --shards wrote its file")
	}
	templ := writePlan(t, dir, planSpec{name: "templ", addr: k.Addr, from: seed.From, to: seed.To, sink: fileSink(filepath.Join(dir, "out-{shard}.jsonl"), 10)})
	if r := replay(t, "run", "--yes", templ); r.code != exitInvalid || !strings.Contains(r.stderr, "--shard I/N") {
		t.Errorf("a {shard} path without --shard: %s", r)
	}
	if r := replay(t, "run", "--yes", templ, "--shard", "0/2"); r.code != exitInvalid || !strings.Contains(r.stderr, "--resolution FILE") {
		t.Errorf("--shard without --resolution: %s", r)
	}
}

// TestShardsKafkaSinkWholePartitions: a kafka sink keeps each partition's
// order, so its shards hold whole partitions; with order: none a large
// partition is split between shards.
func TestShardsKafkaSinkWholePartitions(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Topics("orders", "target"), testenv.Partitions(4))
	from, to := skewedTopic(t, k, 800)
	dir := t.TempDir()
	for _, tc := range []struct {
		order string
		whole bool
	}{{"", true}, {", order: partition", true}, {", order: none", false}} {
		planFile := writePlan(t, dir, planSpec{name: "tokafka", addr: k.Addr, from: from, to: to,
			sink: fmt.Sprintf("{type: kafka, brokers: [%q], topic: target%s}", k.Addr, tc.order)})
		out := filepath.Join(dir, "shards.json")
		if r := replay(t, "plan", planFile, "--shards", "3", "--out", out); r.code != exitOK {
			t.Fatalf("plan --shards 3 (kafka sink%s): %s", tc.order, r)
		}
		res, err := runner.ReadResolution(out)
		if err != nil {
			t.Fatal(err)
		}
		split := false
		for _, sh := range res.Shards.Shards {
			for _, sub := range sh.Ranges {
				for _, rg := range res.Ranges {
					split = split || rg.Partition == sub.Partition && (rg.Start != sub.Start || rg.End != sub.End)
				}
			}
		}
		if res.Shards.WholePartitions != tc.whole || split == tc.whole {
			t.Errorf("kafka sink%s: whole_partitions %v, a partition split %v; want whole %v", tc.order, res.Shards.WholePartitions, split, tc.whole)
		}
	}
}

// TestShardWithNoOffsets: more shards than offsets: a shard that holds
// none runs all the same (exit 0) and publishes its file, empty, so that
// no earlier run's file is left as its output; the union is kcat's window.
func TestShardWithNoOffsets(t *testing.T) {
	k, seed := newCluster(t, 2, 3)
	dir := t.TempDir()
	planFile := writePlan(t, dir, planSpec{name: "few", addr: k.Addr, from: seed.From, to: seed.To,
		sink: fileSink(filepath.Join(dir, "out-{shard}.jsonl"), 10)})
	resFile := filepath.Join(dir, "res.json")
	if r := replay(t, "plan", planFile, "--shards", "5", "--out", resFile); r.code != exitOK {
		t.Fatalf("plan --shards 5: %s", r)
	}
	res, err := runner.ReadResolution(resFile)
	if err != nil {
		t.Fatal(err)
	}
	empty := 0
	for i, sh := range res.Shards.Shards {
		if sh.Records == 0 {
			empty++
		}
		if r := replayProcess(t, dir, "run", "--yes", planFile, "--resolution", resFile, "--shard", fmt.Sprintf("%d/5", i)); r.code != exitOK {
			t.Fatalf("shard %d/5 (%d offsets): %s", i, sh.Records, r)
		}
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("out-%d.jsonl", i))); err != nil {
			t.Errorf("shard %d/5 (%d offsets) published no file: %v", i, sh.Records, err)
		}
	}
	if empty == 0 {
		t.Fatal("no shard without offsets: the test proves nothing")
	}
	checkOnce(t, "the shards' union", shardCoords(t, dir, 5), testenv.KcatCoords(t, k.Addr, "orders", -1, seed.From, seed.To))
}

// TestShardsCounts: --shards 0 and --max-records-per-shard 0 are refused;
// a --max-records-per-shard that whole partitions cannot meet says so.
func TestShardsCounts(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Topics("orders", "target"), testenv.Partitions(4))
	from, to := skewedTopic(t, k, 400)
	dir := t.TempDir()
	out := filepath.Join(dir, "shards.json")
	files := writePlan(t, dir, planSpec{name: "counts", addr: k.Addr, from: from, to: to, sink: fileSink(filepath.Join(dir, "out-{shard}.jsonl"), 10)})
	for _, args := range [][]string{{"--shards", "0"}, {"--max-records-per-shard", "0"}, {"--max-records-per-shard", "-5"}} {
		if r := replay(t, append([]string{"plan", files, "--out", out}, args...)...); r.code != exitInvalid || !strings.Contains(r.stderr, "give the number of shards") {
			t.Errorf("%v: %s", args, r)
		}
	}
	kafka := writePlan(t, dir, planSpec{name: "counts-kafka", addr: k.Addr, from: from, to: to, sink: fmt.Sprintf("{type: kafka, brokers: [%q], topic: target}", k.Addr)})
	if r := replay(t, "plan", kafka, "--out", out, "--max-records-per-shard", "50"); r.code != exitOK || !strings.Contains(r.stdout, "--max-records-per-shard 50 cannot be met") {
		t.Errorf("whole partitions larger than the maximum: %s", r)
	}
}

// The plan's shard table lists a shard's sub-ranges in full up to
// maxListedSubRanges; past that (a topic of hundreds of partitions), the
// first few, a count and the last, so a row stays readable.
func TestShardTableShortensLongLists(t *testing.T) {
	v := &shardsView{Count: 2, Fingerprint: "f"}
	for i, n := range []int{3, 85} {
		sh := shardView{Shard: runner.Shard{Index: i + 1, Group: fmt.Sprintf("g-%d", i+1)}}
		for p := range n {
			sh.Ranges = append(sh.Ranges, runner.SubRange{Partition: int32(p), Start: 10, End: 20})
		}
		v.Shards = append(v.Shards, sh)
	}
	var b strings.Builder
	printShards(&b, v)
	out := b.String()
	if !strings.Contains(out, "0:[10,20) 1:[10,20) 2:[10,20)  ") {
		t.Errorf("a shard of 3 sub-ranges lists them all:\n%s", out)
	}
	if !strings.Contains(out, "0:[10,20) 1:[10,20) 2:[10,20) 3:[10,20) ... (85 sub-ranges) 84:[10,20)") || strings.Contains(out, " 4:[10,20)") {
		t.Errorf("a shard of 85 sub-ranges lists the first four, the count and the last:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 200 {
			t.Errorf("a line of %d characters: %s", len(line), line)
		}
	}
}
