package parquet_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/parquet"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// harness runs the conformance suite on a directory per test, with the
// default columns, objects of at most maxRows rows, and ranges [0, 100000)
// for partitions 0..7 (the suite's windows fit in them).
type harness struct {
	maxRows int64
	dirs    sinktest.Targets[string]
}

func ranges(n int, start, end int64) []sinks.Range {
	out := make([]sinks.Range, n)
	for i := range out {
		out[i] = sinks.Range{Partition: int32(i), Start: start, End: end}
	}
	return out
}

func (h *harness) dir(t *testing.T) string {
	return h.dirs.Get(t, func() string { return filepath.Join(t.TempDir(), "out") })
}

// New opens the sink on t's directory. The suite reopens a directory to
// play a process restarted after a crash: the sink opened before on it is
// closed first, as the death of its process would close its files and
// release its lock on the staging directory.
func (h *harness) New(t *testing.T) sinks.Sink {
	dir := h.dir(t)
	openSinks.Lock()
	defer openSinks.Unlock()
	if prev, ok := openSinks.m[dir]; ok {
		_ = prev.Close()
	}
	s, err := parquet.New(t.Context(), parquet.Config{Path: dir, Topic: "orders", Ranges: ranges(8, 0, 100000),
		MaxRowsPerFile: h.maxRows, RunID: "run-1", Fingerprint: "fp-1"})
	if err != nil {
		t.Fatal(err)
	}
	openSinks.m[dir] = s
	return s
}

// openSinks is the last sink harness.New opened on each directory.
var openSinks = struct {
	sync.Mutex
	m map[string]*parquet.Sink
}{m: map[string]*parquet.Sink{}}

func (h *harness) Contents(t *testing.T) []string { return contents(t, h.dir(t)) }

// contents is every record stored under dir, as sinktest.Stored strings.
func contents(t testing.TB, dir string) []string {
	var out []string
	for _, r := range readDir(t, dir) {
		out = append(out, sinktest.Expect(r).String())
	}
	return out
}

func (h *harness) Records(t *testing.T) []record.Record { return readDir(t, h.dir(t)) }

// objects lists the .parquet files under dir, relative, sorted.
func objects(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".parquet") {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// readDir reads every object under dir back into records (the default
// columns).
func readDir(t testing.TB, dir string) []record.Record {
	t.Helper()
	var out []record.Record
	for _, name := range objects(t, dir) {
		out = append(out, readObject(t, filepath.Join(dir, name))...)
	}
	return out
}

// readRows reads the rows of the Parquet file at path, with its schema.
func readRows(t testing.TB, path string) (*pq.Schema, []pq.Row) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := pq.OpenFile(f, fi.Size())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var rows []pq.Row
	for _, rg := range pf.RowGroups() {
		rr := rg.Rows()
		buf := make([]pq.Row, 64)
		for {
			n, err := rr.ReadRows(buf)
			for _, r := range buf[:n] {
				rows = append(rows, r.Clone())
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		rr.Close()
	}
	return pf.Schema(), rows
}

// readObject decodes the rows of a file of the default columns.
func readObject(t testing.TB, path string) []record.Record {
	t.Helper()
	_, rows := readRows(t, path)
	var out []record.Record
	for _, row := range rows {
		bytesOf := func(v pq.Value) []byte {
			if v.IsNull() {
				return nil
			}
			return append([]byte{}, v.ByteArray()...)
		}
		r := record.Record{Topic: string(row[0].ByteArray()), Partition: row[1].Int32(), Offset: row[2].Int64(),
			Time: time.UnixMilli(row[3].Int64()).UTC(), Key: bytesOf(row[5]), Value: bytesOf(row[6])}
		var err error
		if r.TimestampType, err = record.ParseTimestampType(string(row[4].ByteArray())); err != nil {
			t.Fatal(err)
		}
		if r.Headers, err = encode.DecodeHeadersJSON(row[7].ByteArray()); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// readManifest reads dir's manifest.
func readManifest(t testing.TB, dir string) parquet.Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, parquet.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var m parquet.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
