package parquet_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/parquet"
	"github.com/replay-tool/replay/sinks/sinktest"
)

func open(t *testing.T, cfg parquet.Config) *parquet.Sink {
	t.Helper()
	s, err := parquet.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Objects tile each range: the first starts at the range's start, the
// next at the offset of the record that did not fit, the last ends at the
// range's end; a range without rows has one empty object, an empty range
// none. A re-run changes no byte.
func TestNamesTileRanges(t *testing.T) {
	dir := t.TempDir()
	cfg := parquet.Config{Path: dir, Topic: "Orders", MaxRowsPerFile: 3, RunID: "r1", Fingerprint: "f1",
		Ranges: []sinks.Range{{Partition: 0, Start: 100, End: 200}, {Partition: 1, Start: 5, End: 9}, {Partition: 2, Start: 7, End: 7}}}
	var recs []record.Record
	for _, off := range []int64{101, 102, 104, 110, 111, 150, 151} {
		recs = append(recs, sinktest.Rec(0, off, "k", `{"id":1}`))
	}
	s := open(t, cfg)
	sinktest.MustWrite(t, s, recs[:4]...)
	sinktest.MustWrite(t, s, recs[2:]...) // a re-delivery overlapping what is written
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"!4frders/0/00000000000000000100-00000000000000000110.parquet",
		"!4frders/0/00000000000000000110-00000000000000000151.parquet",
		"!4frders/0/00000000000000000151-00000000000000000200.parquet",
		"!4frders/1/00000000000000000005-00000000000000000009.parquet",
	}
	if got := objects(t, dir); !slices.Equal(got, want) {
		t.Fatalf("objects %q, want %q", got, want)
	}
	m := readManifest(t, dir)
	if m.Fingerprint != "f1" || m.Rows != 7 || len(m.Objects) != 4 || m.Objects[0].Rows != 3 || m.Objects[2].Rows != 1 || m.Objects[3].Rows != 0 {
		t.Fatalf("manifest %+v", m)
	}
	if got := readDir(t, dir); len(got) != 7 || got[0].Offset != 101 || got[6].Offset != 151 {
		t.Fatalf("rows read back: %d", len(got))
	}
	before := snapshot(t, dir)
	again := open(t, cfg)
	sinktest.MustWrite(t, again, recs...)
	if err := again.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a re-run changed the output:\n%v\nwas\n%v", after, before)
	}
}

// snapshot is every file under dir with its contents.
func snapshot(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = fmt.Sprintf("%x", b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A value.<path> column keeps its JSON value exactly: a declared decimal
// as its unscaled integer, an int64 above 2^53 as it is, a number with
// more digits than the scale is a bad record, not rounded.
func TestTypedColumns(t *testing.T) {
	dir := t.TempDir()
	s := open(t, parquet.Config{Path: dir, Topic: "orders", RunID: "r", Fingerprint: "f", Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 10}},
		Columns: plan.Columns{{Name: "id", Field: "value.id"}, {Name: "amount", Field: "value.amount"}, {Name: "raw", Field: "value.amount"}, {Name: "ok", Field: "value.ok"}},
		Types:   map[string]string{"id": "int64", "amount": "decimal(12,2)", "ok": "boolean"}})
	bad := sinktest.Rec(0, 2, "", `{"id":3,"amount":1.234}`)
	skipped := sinktest.WriteSkipping(t, s, sinktest.Rec(0, 0, "", `{"id":9007199254740993,"amount":12.3,"ok":false}`),
		sinktest.Rec(0, 1, "", `{"id":0,"amount":-0.05}`), bad)
	if len(skipped) != 1 || skipped[0].Offset != 2 {
		t.Fatalf("skipped %v, want offset 2 (1.234 into decimal(12,2))", skipped)
	}
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	sch, rows := readRows(t, filepath.Join(dir, objects(t, dir)[0]))
	if got := fmt.Sprint(sch); !containsAll(got, "optional int64 id (INT(64,true))", "optional int64 amount (DECIMAL(12,2))", "optional binary raw (STRING)", "optional boolean ok") {
		t.Fatalf("schema:\n%s", got)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	if rows[0][0].Int64() != 9007199254740993 || rows[0][1].Int64() != 1230 || string(rows[0][2].ByteArray()) != "12.3" || rows[0][3].Boolean() {
		t.Errorf("row 0: %v", rows[0])
	}
	if rows[1][0].Int64() != 0 || rows[1][0].IsNull() || rows[1][1].Int64() != -5 || !rows[1][3].IsNull() {
		t.Errorf("row 1: %v (0 must not be NULL, a missing ok must be)", rows[1])
	}
}

// A timestamp column takes an RFC 3339 time with a zone, or an integer
// of its unit since the Unix epoch (a JSON number or a string of digits):
// the same instant stores the same value; a fraction finer than the unit,
// a time without a zone, a number with a fraction or an integer outside
// the years 0001-9999 (a finer unit) is a bad record, and the fix a finer
// fraction is told fits the column.
func TestTimestampColumns(t *testing.T) {
	dir := t.TempDir()
	s := open(t, parquet.Config{Path: dir, Topic: "orders", RunID: "r", Fingerprint: "f", Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 10}},
		Columns: plan.Columns{{Name: "ms", Field: "value.at"}, {Name: "us", Field: "value.at_us"}},
		Types:   map[string]string{"ms": "timestamp_millis", "us": "timestamp_micros"}})
	good := []record.Record{
		sinktest.Rec(0, 0, "", `{"at":"2026-12-07T14:44:58.233Z","at_us":"2026-12-07T15:44:58.233001+01:00"}`),
		sinktest.Rec(0, 1, "", `{"at":1796654698233,"at_us":1796654698233001}`),
		sinktest.Rec(0, 2, "", `{"at":"1796654698233","at_us":-1}`),
	}
	bad := []record.Record{
		sinktest.Rec(0, 3, "", `{"at":"2026-12-07T14:44:58.2331Z","at_us":"2026-12-07T14:44:58.2331234Z"}`),
		sinktest.Rec(0, 4, "", `{"at":"2026-12-07T14:44:58"}`),
		sinktest.Rec(0, 5, "", `{"at":1796654698233.5}`),
		sinktest.Rec(0, 6, "", `{"at":0,"at_us":"2026-12-07T14:44:58.2331234Z"}`),
		sinktest.Rec(0, 7, "", `{"at":0,"at_us":1796637600123456789}`),
	}
	skipped := sinktest.WriteSkipping(t, s, append(good, bad...)...)
	if len(skipped) != 5 || skipped[0].Offset != 3 || skipped[4].Offset != 7 {
		t.Fatalf("skipped %v, want offsets 3 to 7", skipped)
	}
	if msg := skipped[4].Error(); !strings.Contains(msg, "1796637600123456789 microseconds since the Unix epoch is outside the years 0001-9999: a finer unit than the column's (nanoseconds?)") {
		t.Errorf("nanoseconds into a microseconds column: %s", msg)
	}
	if msg := skipped[0].Error(); !strings.Contains(msg, "more precision than the column's 1ms (it would be rounded): declare timestamp_micros") {
		t.Errorf("a fraction finer than milliseconds: %s", msg)
	}
	if msg := skipped[3].Error(); !strings.Contains(msg, "more precision than the column's 1µs (it would be rounded): microseconds are the finest") {
		t.Errorf("a fraction finer than microseconds: %s", msg)
	}
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	sch, rows := readRows(t, filepath.Join(dir, objects(t, dir)[0]))
	if got := fmt.Sprint(sch); !containsAll(got, "int64 ms (TIMESTAMP(isAdjustedToUTC=true,unit=MILLIS))", "int64 us (TIMESTAMP(isAdjustedToUTC=true,unit=MICROS))") {
		t.Fatalf("schema:\n%s", got)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	for i, r := range rows {
		if r[0].Int64() != 1796654698233 {
			t.Errorf("row %d: ms %d, want 1796654698233", i, r[0].Int64())
		}
	}
	if rows[0][1].Int64() != 1796654698233001 || rows[1][1].Int64() != 1796654698233001 || rows[2][1].Int64() != -1 {
		t.Errorf("us: %d, %d, %d", rows[0][1].Int64(), rows[1][1].Int64(), rows[2][1].Int64())
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// A file in the run's range that replay did not write is refused, and
// left as it was; so is a manifest of another plan.
func TestForeignOutputRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := parquet.Config{Path: dir, Topic: "orders", RunID: "r", Fingerprint: "f", Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 10}}}
	name := filepath.Join(dir, "orders", "0", fmt.Sprintf("%020d-%020d.parquet", 0, 10))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte("not replay's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parquet.New(t.Context(), cfg); !errors.Is(err, sinks.ErrRefused) {
		t.Fatalf("New over a foreign object: %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(name); string(b) != "not replay's" {
		t.Fatalf("the foreign object changed: %q", b)
	}
	os.Remove(name)
	s := open(t, cfg)
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	cfg.Fingerprint = "another" // another plan, another version of it, or another shard split of it
	if _, err := parquet.New(t.Context(), cfg); !errors.Is(err, sinks.ErrRefused) || !strings.Contains(err.Error(), "or of another version or shard split of this plan") {
		t.Fatalf("New over another plan's manifest: %v, want a refusal naming each cause", err)
	}
}

// A resume whose staging is gone (another machine, a deleted directory)
// rewinds the partition to the end of its objects: the unfinished object
// is built from its first offset.
func TestReconcileRewindsToObjects(t *testing.T) {
	dir := t.TempDir()
	cfg := parquet.Config{Path: dir, Topic: "orders", MaxRowsPerFile: 2, RunID: "r", Fingerprint: "f", Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 10}}}
	s := open(t, cfg)
	for off := range int64(5) {
		sinktest.MustWrite(t, s, sinktest.Rec(0, off, "", "v"))
	}
	if err := s.Sync(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.RemoveAll(filepath.Join(dir, ".replay-staging")); err != nil {
		t.Fatal(err)
	}
	again := open(t, cfg)
	rw, err := again.Reconcile(t.Context(), "g", "orders", []sinks.ResumePoint{{Partition: 0, Start: 0, Committed: 5, End: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rw) != 1 || rw[0].From != 4 {
		t.Fatalf("rewinds %+v, want partition 0 from offset 4 (objects [0,2) and [2,4) published)", rw)
	}
}

// A path that is a file (refused: a retry cannot help), or a directory
// replay cannot write, fails when the sink opens, saying what path must
// be.
func TestPathNotADirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "afile")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := parquet.Config{Path: file, Topic: "orders", RunID: "r1", Fingerprint: "f1", Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 1}}}
	for _, path := range []string{file, file + "/"} {
		cfg.Path = path
		if _, err := parquet.New(t.Context(), cfg); !errors.Is(err, sinks.ErrRefused) || !strings.Contains(err.Error(), "is a file, not a directory: name a directory") {
			t.Fatalf("a file as path %q: %v", path, err)
		}
	}
	t.Run("read-only", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes into a read-only directory")
		}
		ro := t.TempDir()
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		cfg.Path = filepath.Join(ro, "out")
		if _, err := parquet.New(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "must be a directory replay can write") {
			t.Fatalf("a read-only parent: %v", err)
		}
	})
}

// Objects of this run that do not tile their partition's range from its
// start (one deleted in the middle) are refused with the partition's
// objects named and the gap; one renamed is refused naming the object it
// holds; moved away, the run writes them again, the same bytes.
func TestUntiledObjectsRefused(t *testing.T) {
	dir := t.TempDir()
	cfg, recs := writeThreeObjects(t, dir)
	before := snapshot(t, dir)
	obj := func(first, end int64) string {
		return filepath.Join(dir, "orders", "0", fmt.Sprintf("%020d-%020d.parquet", first, end))
	}
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(obj(110, 151), moved); err != nil {
		t.Fatal(err)
	}
	_, err := parquet.New(t.Context(), cfg)
	if !errors.Is(err, sinks.ErrRefused) || !strings.Contains(err.Error(), "no object holds offsets [110, 151)") ||
		!strings.Contains(err.Error(), obj(100, 110)+", "+obj(151, 200)+".") {
		t.Fatalf("New over objects with a gap: %v, want a refusal naming the gap and the objects", err)
	}
	// The middle object renamed as if it held other offsets: its footer
	// names the object it is.
	if err := os.Rename(moved, obj(105, 151)); err != nil {
		t.Fatal(err)
	}
	_, err = parquet.New(t.Context(), cfg)
	if !errors.Is(err, sinks.ErrRefused) || !strings.Contains(err.Error(), obj(105, 151)+" holds the rows of "+obj(110, 151)+", as its footer says (a copy or a rename)") {
		t.Fatalf("New over a renamed object: %v, want a refusal naming the object it holds", err)
	}
	for _, o := range []string{obj(100, 110), obj(105, 151), obj(151, 200)} {
		if err := os.Remove(o); err != nil {
			t.Fatal(err)
		}
	}
	again := open(t, cfg)
	sinktest.MustWrite(t, again, recs...)
	if err := again.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the run after the objects were moved away wrote other bytes:\n%v\nwas\n%v", after, before)
	}
}

// A file under the topic's directory that is not named as an object
// (part-0001.parquet, a copy) would be read by a reader's glob with the
// run's objects: it is refused and left as it was. Hidden files (_SUCCESS,
// .crc: readers skip them) are left alone.
func TestStrayFilesRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := parquet.Config{Path: dir, Topic: "orders", RunID: "r", Fingerprint: "f", Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 10}}}
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, rel := range []string{"orders/_SUCCESS", "orders/0/.part-0.crc", "orders/_tmp/x.parquet", "other/part-0.parquet"} {
		write(rel, "hidden, or another topic's")
	}
	s := open(t, cfg)
	s.Close()
	write("orders/3/part-0001.snappy.parquet", "a stray")
	write("orders/1/extra.parquet", "a copy")
	_, err := parquet.New(t.Context(), cfg)
	want := filepath.Join(dir, "orders") + " holds 2 files not named as objects are (<partition>/<first>-<end>.parquet), the first " +
		filepath.Join(dir, "orders/1/extra.parquet") + ": readers of the output"
	if !errors.Is(err, sinks.ErrRefused) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "or write to another path") {
		t.Fatalf("New with stray files: %v, want a refusal containing %q", err, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "orders/3/part-0001.snappy.parquet")); string(b) != "a stray" {
		t.Fatalf("the stray file changed: %q", b)
	}
}

// A copy of one of this run's objects under another object's name, or
// under a name outside the run's ranges, is refused: its footer names the
// object it is, and the run writes nothing outside its ranges. Readers
// would otherwise read its rows twice (and miss the rows of the object it
// replaced), with the manifest vouching for it.
func TestCopiedObjectsRefused(t *testing.T) {
	dir := t.TempDir()
	cfg, recs := writeThreeObjects(t, dir)
	obj := func(p int, first, end int64) string {
		return filepath.Join(dir, "orders", fmt.Sprint(p), fmt.Sprintf("%020d-%020d.parquet", first, end))
	}
	cp := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	original, err := os.ReadFile(obj(0, 100, 110))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, to, want string
	}{
		{"over another object", obj(0, 100, 110), obj(0, 100, 110) + " holds the rows of " + obj(0, 110, 151) + ", as its footer says (a copy or a rename)"},
		{"past the range", obj(0, 200, 241), obj(0, 200, 241) + " holds the rows of " + obj(0, 110, 151)},
		{"another partition", obj(9, 110, 151), obj(9, 110, 151) + " holds the rows of " + obj(0, 110, 151)},
		// A footer of this run that does not name its object: outside
		// the run's ranges, the run wrote no such object.
		{"unnamed past the range", obj(0, 200, 241), obj(0, 200, 241) + " is outside what this run writes (partition 0's range is [100, 200))"},
		{"unnamed in another partition", obj(9, 0, 5), obj(9, 0, 5) + " is outside what this run writes (it reads no partition 9 of orders)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.name, "unnamed") {
				writeFooterOnly(t, tc.to, map[string]string{"replay.run": "r1", "replay.fingerprint": "f1"})
			} else {
				cp(obj(0, 110, 151), tc.to)
			}
			_, err := parquet.New(t.Context(), cfg)
			if !errors.Is(err, sinks.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want a refusal containing %q", err, tc.want)
			}
		})
		if tc.to == obj(0, 100, 110) {
			if err := os.WriteFile(tc.to, original, 0o644); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Remove(tc.to); err != nil {
			t.Fatal(err)
		}
	}
	again := open(t, cfg)
	sinktest.MustWrite(t, again, recs...)
	if err := again.Finish(t.Context()); err != nil {
		t.Fatalf("the output restored: %v", err)
	}
}

// writeFooterOnly writes an object of no rows at path whose footer holds
// meta.
func writeFooterOnly(t *testing.T, path string, meta map[string]string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts := []pq.WriterOption{pq.NewSchema("row", pq.Group{"offset": pq.Leaf(pq.Int64Type)})}
	for k, v := range meta {
		opts = append(opts, pq.KeyValueMetadata(k, v))
	}
	w := pq.NewWriter(f, opts...)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeThreeObjects runs a sink over dir to its end: partition 0 of
// orders, range [100, 200), three rows an object, seven records, so the
// objects [100, 110), [110, 151) and [151, 200). It returns the sink's
// config and the records, for a run of the same identity.
func writeThreeObjects(t *testing.T, dir string) (parquet.Config, []record.Record) {
	t.Helper()
	cfg := parquet.Config{Path: dir, Topic: "orders", MaxRowsPerFile: 3, RunID: "r1", Fingerprint: "f1",
		Ranges: []sinks.Range{{Partition: 0, Start: 100, End: 200}}}
	var recs []record.Record
	for _, off := range []int64{101, 102, 104, 110, 111, 150, 151} {
		recs = append(recs, sinktest.Rec(0, off, "k", `{"id":1}`))
	}
	s := open(t, cfg)
	sinktest.MustWrite(t, s, recs...)
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return cfg, recs
}

// Two shardings of a window side by side are refused: a shard of 4 whose
// own output is empty (an index a run of 3 shards did not have) finds the
// manifests of the 3 beside it; a shard of the 3 run again is not
// refused. The siblings come from the section's {shard} (Descriptor.Shard).
func TestAnotherShardingBesideRefused(t *testing.T) {
	base := t.TempDir()
	ps := plan.Sink{Type: parquet.Type, Config: &parquet.Section{Path: filepath.Join(base, "shard={shard}")}}
	openShard := func(index, count int) (sinks.Sink, error) {
		t.Helper()
		sec, err := parquet.Descriptor.Shard(&ps, index, count)
		if err != nil {
			t.Fatal(err)
		}
		shard := ps
		shard.Config = sec
		return parquet.Open(t.Context(), sinks.Spec{Plan: shard, Options: sinks.Options{Topic: "orders", RunID: fmt.Sprintf("r%d", count),
			Fingerprint: fmt.Sprintf("f%d-%d", count, index), Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 10}}}})
	}
	for k := range 3 {
		s, err := openShard(k, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(t.Context()); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if _, err := openShard(3, 4); !errors.Is(err, sinks.ErrRefused) || !strings.Contains(err.Error(), "is the manifest of a run of 3 shards, beside this run's shard of 4") {
		t.Fatalf("shard 3 of 4 beside a run of 3 shards: %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(base, "shard=3")); err == nil {
		t.Error("the refused shard left an output")
	}
	s, err := openShard(1, 3)
	if err != nil {
		t.Fatalf("a shard of the same sharding again: %v", err)
	}
	s.Close()
}

// A large value is written once: its bytes are not copied as min/max
// statistics into the page headers and the footer, which readers cap
// (pyarrow refuses a page header over 16 MiB).
func TestLargeValueNotCopiedIntoStatistics(t *testing.T) {
	dir := t.TempDir()
	cfg := parquet.Config{Path: dir, Topic: "orders", RunID: "r1", Fingerprint: "f1", Compression: "none",
		Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 3}}}
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = 'a' + byte(i*7%26)
	}
	s := open(t, cfg)
	sinktest.MustWrite(t, s, sinktest.Rec(0, 0, "k0", `{"id":0}`), sinktest.Rec(0, 1, "k1", `"`+string(big)+`"`), sinktest.Rec(0, 2, "k2", `{"id":2}`))
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, objects(t, dir)[0])
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	footer := binary.LittleEndian.Uint32(b[len(b)-8:])
	if len(b) > len(big)+64<<10 || footer > 64<<10 {
		t.Fatalf("object of %d bytes, footer %d bytes, for a value of %d bytes", len(b), footer, len(big))
	}
	if got := readObject(t, path); len(got) != 3 || len(got[1].Value) != len(big)+2 {
		t.Fatalf("read back %d records", len(got))
	}
}
