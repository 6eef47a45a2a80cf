package parquet

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/gzip"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
)

// span is the offsets [first, end) of one object of a partition.
type span struct{ first, end int64 }

// TopicDir is the directory name of topic's objects: the topic's name with
// every byte outside a-z, 0-9, '.', '_' and '-' (an upper-case letter
// included) written as '!' and its two lower-case hex digits. Kafka's topic
// names never hold '!', so two topics never share a directory, not even
// on a case-insensitive file system: "Orders" is "!4frders".
func TopicDir(topic string) string {
	var b strings.Builder
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "!%02x", c)
		}
	}
	s := b.String()
	if s == "." || s == ".." {
		return strings.ReplaceAll(s, ".", "!2e")
	}
	return s
}

// ObjectName is the name of the object holding offsets [first, end) of a
// partition of topic: <topic>/<partition>/<first>-<end>.parquet, both
// offsets zero-padded to 20 digits.
func ObjectName(topic string, partition int32, first, end int64) string {
	return fmt.Sprintf("%s/%d/%020d-%020d.parquet", TopicDir(topic), partition, first, end)
}

var objectRe = regexp.MustCompile(`^(\d+)/(\d{20})-(\d{20})\.parquet$`)

// parseObject reads the partition and span of an object name under a
// topic's directory (rel: "<partition>/<first>-<end>.parquet").
func parseObject(rel string) (int32, span, bool) {
	m := objectRe.FindStringSubmatch(rel)
	if m == nil {
		return 0, span{}, false
	}
	p, err1 := strconv.ParseInt(m[1], 10, 32)
	first, err2 := strconv.ParseInt(m[2], 10, 64)
	end, err3 := strconv.ParseInt(m[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || end < first {
		return 0, span{}, false
	}
	return int32(p), span{first, end}, true
}

// codec is the compression codec of name (Section.Compression).
func codec(name string) (compress.Codec, error) {
	switch name {
	case "", "zstd":
		return &zstdCodec{}, nil
	case "snappy":
		return &snappy.Codec{}, nil
	case "gzip":
		return &gzip.Codec{}, nil
	case "none":
		return &uncompressed.Codec{}, nil
	}
	return nil, fmt.Errorf("parquet sink: compression %q: want one of %s", name, strings.Join(Compressions, ", "))
}

// objectInfo is what the manifest says of an object.
type objectInfo struct {
	Name   string `json:"name"`
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// rowGroupBytes is how many bytes of values a row group holds at most
// before it is flushed: the writer keeps one row group's columns in
// memory, so this budget (with zstdWindow) bounds the sink's memory
// whatever max_rows_per_file is.
const rowGroupBytes = 1 << 20

// build writes the object of span sp of partition p from its staging
// file (nil: no rows) to a temporary file in the staging directory, and
// returns it (at its start) with what the manifest says of it. The caller
// removes the file.
func (s *Sink) build(ctx context.Context, p int32, sp span, staging *os.File) (*os.File, objectInfo, error) {
	var src io.Reader
	if staging != nil {
		if _, err := staging.Seek(0, io.SeekStart); err != nil {
			return nil, objectInfo{}, err
		}
		src = staging
	}
	lay, err := s.stagedLayout(ctx, p, staging)
	if err != nil {
		return nil, objectInfo{}, err
	}
	tmp, info, err := s.encode(ctx, p, src, lay, func() span { return sp })
	info.Name = ObjectName(s.topic, p, sp.first, sp.end)
	if err != nil {
		return nil, info, fmt.Errorf("parquet sink: build %s: %w", info.Name, err)
	}
	return tmp, info, nil
}

// encode writes an object of partition p's rows from the frames src holds
// (nil: none), laid out by lay, to a temporary file in the staging
// directory, and returns it (at its start) with its rows, bytes and
// checksum. Its footer names the object (metaObject) of the span that sp
// returns once src is read to its end. The caller removes the file.
func (s *Sink) encode(ctx context.Context, p int32, src io.Reader, lay *layout, sp func() span) (*os.File, objectInfo, error) {
	var info objectInfo
	tmp, err := os.CreateTemp(s.stagingDir, ".object-*.tmp")
	if err != nil {
		return nil, info, err
	}
	fail := func(err error) (*os.File, objectInfo, error) {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, info, err
	}
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(tmp, h)}
	opts := []pq.WriterOption{lay.schema, pq.Compression(s.codec), pq.CreatedBy("replay", "", ""),
		pq.KeyValueMetadata(metaRun, s.runID), pq.KeyValueMetadata(metaFingerprint, s.fingerprint)}
	for _, c := range lay.cols {
		// Bytes and headers are blobs of any size: no min/max copies of them
		// in the page headers and the footer.
		if c.typ.kind == kBytes || c.typ.kind == kBase64 || c.Field.Kind == plan.FieldHeaders {
			opts = append(opts, pq.SkipPageBounds(c.Name), pq.SkipPageStatistics(c.Name))
		}
	}
	w := pq.NewGenericWriter[any](cw, opts...)
	if src != nil {
		if info.Rows, err = s.writeRows(ctx, w, src, p, lay.cols); err != nil {
			return fail(err)
		}
	}
	at := sp()
	w.SetKeyValueMetadata(metaObject, ObjectName(s.topic, p, at.first, at.end))
	if err := w.Close(); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	info.Bytes, info.SHA256 = cw.n, hex.EncodeToString(h.Sum(nil))
	return tmp, info, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Key-value metadata of every object: the run that wrote it (the plan's
// fingerprint and the resolved ranges), the plan's fingerprint, and the
// object's own name (ObjectName: its topic, partition and offsets), so
// that a copy or a rename of an object does not pass for the object its
// new name says.
const (
	metaRun         = "replay.run"
	metaFingerprint = "replay.fingerprint"
	metaObject      = "replay.object"
)

// publish publishes the built object tmp as info.Name unless an object of
// that name exists: then that object must hold the same bytes (the same
// rows, written by a run of the same identity), else the sink refuses
// (sinks.ErrRefused) and leaves it.
func (s *Sink) publish(ctx context.Context, tmp *os.File, info objectInfo) error {
	err := s.st.PutNew(ctx, info.Name, tmp)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("parquet sink: publish %s: %w", s.st.Where(info.Name), err)
	}
	got, err := s.describe(ctx, info.Name)
	if err != nil && got.SHA256 == "" {
		return fmt.Errorf("parquet sink: read the existing %s: %w", s.st.Where(info.Name), err)
	}
	if got.SHA256 != info.SHA256 {
		return sinks.Refusal(fmt.Sprintf("parquet sink: %s exists and holds other rows (%d rows, sha256 %s) than this run writes there (%d rows, sha256 %s): "+
			"replay did not write it, or wrote it for another plan or resolution; move it away or write to %s",
			s.st.Where(info.Name), got.Rows, got.SHA256, info.Rows, info.SHA256, s.otherOutput()))
	}
	return nil
}

// describe reads the object name back: its size, rows and sha256. An
// object that is not Parquet gives its size and sha256 with the error.
func (s *Sink) describe(ctx context.Context, name string) (objectInfo, error) {
	info := objectInfo{Name: name}
	r, err := s.st.Open(ctx, name)
	if err != nil {
		return info, err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, bufio.NewReaderSize(io.NewSectionReader(r, 0, r.Size()), 8<<20))
	if err != nil {
		return info, err
	}
	info.Bytes, info.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	f, err := pq.OpenFile(r, n, pq.SkipBloomFilters(true), pq.SkipPageIndex(true))
	if err != nil {
		return info, fmt.Errorf("not a Parquet file: %w", err)
	}
	info.Rows = f.NumRows()
	return info, nil
}

// footer is what an object's footer says of it: the run that wrote it,
// the plan's fingerprint and the object's name (each "" when it has none:
// replay did not write it, or an earlier version of replay did not record
// the name).
type footer struct{ run, fingerprint, object string }

// footerOf reads the footer of the object name.
func (s *Sink) footerOf(ctx context.Context, name string) (footer, error) {
	r, err := s.st.Open(ctx, name)
	if err != nil {
		return footer{}, err
	}
	defer r.Close()
	f, err := pq.OpenFile(r, r.Size(), pq.SkipBloomFilters(true), pq.SkipPageIndex(true))
	if err != nil {
		return footer{}, nil // not Parquet: not replay's
	}
	var ft footer
	ft.run, _ = f.Lookup(metaRun)
	ft.fingerprint, _ = f.Lookup(metaFingerprint)
	ft.object, _ = f.Lookup(metaObject)
	return ft, nil
}

// stagingName is the staging directory's name under the output's top: a
// hidden directory, which Spark, Hive and DuckDB's globs skip.
const stagingName = ".replay-staging"

// stagingFile is the staging file of partition p's object starting at
// first.
func (s *Sink) stagingFile(p int32, first int64) string {
	return filepath.Join(s.stagingDir, TopicDir(s.topic), strconv.Itoa(int(p)), fmt.Sprintf("%020d.rows", first))
}
