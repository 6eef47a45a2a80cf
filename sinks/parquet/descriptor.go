package parquet

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/encode"
)

// Type is the parquet sink's type in a plan.
const Type plan.SinkType = "parquet"

// Compression codecs of a section (Section.Compression); zstd is the
// default.
var Compressions = []string{"zstd", "snappy", "gzip", "none"}

// DefaultMaxRowsPerFile is a section's max_rows_per_file when it has none.
const DefaultMaxRowsPerFile = 1000000

// Section is a parquet sink's own fields in a plan (Descriptor.Fields says
// what each means), in Sink.Config.
type Section struct {
	Path            string            `yaml:"path"`
	URL             string            `yaml:"url"`
	Endpoint        string            `yaml:"endpoint"`
	Region          string            `yaml:"region"`
	ForcePathStyle  bool              `yaml:"force_path_style"`
	AccessKeyID     string            `yaml:"access_key_id"`
	SecretAccessKey string            `yaml:"secret_access_key"`
	Columns         plan.Columns      `yaml:"columns"`
	Types           map[string]string `yaml:"types"`
	// MaxRowsPerFile is a pointer so that a written 0 is not taken for
	// an unset field, which the default fills, but reaches check.
	MaxRowsPerFile *int64 `yaml:"max_rows_per_file"`
	Compression    string `yaml:"compression"`
	Provenance     bool   `yaml:"provenance"`
	// shards and siblings are set for a shard of a sharded run (shard):
	// the shard count, and the outputs of the other shards and of the one
	// past the last (Config.Siblings).
	shards   int
	siblings []string
}

// maxRowsPerFile is the section's max_rows_per_file, the default when
// unset.
func (s *Section) maxRowsPerFile() int64 {
	if s.MaxRowsPerFile == nil {
		return DefaultMaxRowsPerFile
	}
	return *s.MaxRowsPerFile
}

// section returns the parquet sink's own fields of s.
func section(s *plan.Sink) *Section { return plan.ConfigOf[Section](s) }

// Descriptor describes the parquet sink's plan section.
var Descriptor = plan.SinkDescriptor{
	Type:      Type,
	Summary:   "Parquet objects in a directory or an S3-compatible bucket, up to max_rows_per_file rows of a partition each, named from the resolved offset ranges, with a manifest",
	NewConfig: func() any { return new(Section) },
	Fields: []plan.FieldDescriptor{
		{Name: "path", Fingerprint: true,
			Doc: "parquet: the output directory (or url): objects <topic>/<partition>/<first>-<end>.parquet (offsets zero-padded to 20 digits, end exclusive) and _manifest.json, written when the run completes."},
		{Name: "url", Fingerprint: true,
			Doc: "parquet: s3://bucket/prefix/ of an S3-compatible store, instead of path; records wait for their object in a local staging directory (the user's cache directory, replay/parquet-staging)."},
		{Name: "endpoint", Doc: "parquet with url: the store's base URL, e.g. http://127.0.0.1:7070; unset, AWS S3."},
		{Name: "region", Doc: "parquet with url: the signing region (default us-east-1)."},
		{Name: "force_path_style", Doc: "parquet with url: address the bucket in the path (http://host/bucket/key), as most S3-compatible stores want."},
		{Name: "access_key_id", Secret: true, Doc: "parquet with url: the access key id, from the environment, e.g. ${AWS_ACCESS_KEY_ID}."},
		{Name: "secret_access_key", Secret: true, Doc: "parquet with url: the secret access key, from the environment, e.g. ${AWS_SECRET_ACCESS_KEY}."},
		{Name: "columns", Fingerprint: true,
			Doc:              "parquet: map column names to record fields, in order (the fields of the postgres, sqlite and csv columns: key, kafka_key, value, value.<path>, header.<name>, headers, timestamp, timestamp_type, partition, offset, topic); unset, topic, partition, offset, timestamp, timestamp_type, kafka_key, value and headers, or under decode.value the fields of the decoded value's schema, typed from it.",
			FingerprintValue: func(val any, _ *plan.Sink, _ bool) any { return val.(plan.Columns).String() }},
		{Name: "types", Fingerprint: true,
			Doc: "parquet: the Parquet type of value.<path> columns, by column name: string (default: the text, a number as written), int32, int64, uint64, boolean, decimal(P,S) (exact; 1 <= P <= 38), timestamp_millis or timestamp_micros (from an RFC 3339 string, or an integer of the column's unit since the Unix epoch), date (YYYY-MM-DD), time_millis or time_micros (HH:MM:SS.fff), bytes (the text's bytes), base64 (the bytes a base64 text stands for); a value that does not fit its type is a bad record (on_error). Without columns under decode.value, the schema gives the types.",
			FingerprintValue: func(val any, _ *plan.Sink, _ bool) any {
				m, _ := val.(map[string]string)
				var b strings.Builder
				for _, k := range slices.Sorted(maps.Keys(m)) {
					b.WriteString(k + ":" + m[k] + ";")
				}
				return b.String()
			}},
		{Name: "max_rows_per_file", Fingerprint: true, Default: "1000000",
			Doc: "parquet: rows per object at most, 1 or more (default 1000000): a partition's range is cut into objects of this many rows, the last one holding the rest."},
		{Name: "compression", Fingerprint: true, Default: "zstd", Enum: Compressions,
			Doc: "parquet: the compression of the column chunks: zstd (default), snappy, gzip or none."},
		{Name: "provenance", Fingerprint: true,
			Doc: "parquet under decode.value without columns (the columns of the value's schema): also write kafka_topic, kafka_partition, kafka_offset and kafka_timestamp, before the schema's columns."},
	},
	Check:      check,
	Shard:      shard,
	Notes:      notes,
	StagingDir: func(s *plan.Sink) string { return stagingDirOf(section(s)) },
	Unfinished: "not complete: the objects finished so far are published (each when it holds max_rows_per_file rows or the end of its range), " +
		ManifestName + " only when the run completes: read the output through the manifest, or once it is there",
	Where: func(ps *plan.Sink) string { return cmp.Or(section(ps).URL, section(ps).Path) },
	// A manifest describes one topic's objects.
	OwnOutput: func(ps *plan.Sink) string {
		if s := section(ps); s.URL != "" {
			return strings.TrimSuffix(s.URL, "/")
		}
		return filepath.Clean(section(ps).Path)
	},
}

// ShardPlaceholder stands for the shard's index in the path or url of a
// sharded run (replay run --shard I/N): each shard writes its own output,
// with its own objects and manifest (e.g. out/orders/shard={shard}/).
const ShardPlaceholder = "{shard}"

// shard gives a shard its own output: {shard} in path or url becomes its
// index. A manifest describes one run's objects, so the shards of a
// sharded run cannot share one output; and a path or url with {shard}
// needs a sharded run.
func shard(ps *plan.Sink, index, count int) (any, error) {
	s := section(ps)
	where, field := s.Path, "path"
	if s.URL != "" {
		where, field = s.URL, "url"
	}
	has := strings.Contains(where, ShardPlaceholder)
	switch {
	case count == 0 && has:
		return nil, fmt.Errorf("parquet sink: %s %q holds %s, which only a sharded run replaces: write a sharded resolution with 'replay plan PLAN --shards N --out FILE' and run each shard with 'replay run PLAN --resolution FILE --shard I/N', or remove %s", field, where, ShardPlaceholder, ShardPlaceholder)
	case count > 1 && !has:
		return nil, fmt.Errorf("parquet sink: %s %q: each shard of a sharded run is a run of its own, with its own objects and manifest, so the shards cannot share one output; put %s in the %s so that each writes its own, e.g. %s", field, where, ShardPlaceholder, field, strings.TrimSuffix(where, "/")+"/shard="+ShardPlaceholder+"/")
	}
	c := *s
	idx := strconv.Itoa(index)
	c.Path, c.URL = strings.ReplaceAll(s.Path, ShardPlaceholder, idx), strings.ReplaceAll(s.URL, ShardPlaceholder, idx)
	c.shards = count
	for k := 0; count > 1 && k <= count; k++ {
		if k != index {
			c.siblings = append(c.siblings, strings.ReplaceAll(where, ShardPlaceholder, strconv.Itoa(k)))
		}
	}
	return &c, nil
}

// stagingDirOf is where a section's records wait for their object: under
// path, or for a url in the user's cache directory (named by the url).
func stagingDirOf(s *Section) string {
	if s.URL == "" {
		return filepath.Join(s.Path, stagingName)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	h := sha256.Sum256([]byte(s.URL))
	return filepath.Join(base, "replay", "parquet-staging", hex.EncodeToString(h[:8]))
}

// check checks a parquet section: its path or url and its columns' names
// (no invisible characters), their types, the file size and that the plan
// replays one window.
func check(c *plan.SinkCheck) {
	s := section(c.Sink)
	switch {
	case s.Path == "" && s.URL == "":
		c.Add("path", "neither path nor url is set: set path (a directory, e.g. out/orders/) or url (s3://bucket/prefix/)")
	case s.Path != "" && s.URL != "":
		c.Add("url", "a parquet sink writes to path or to url, not both: remove one")
	case s.URL != "" && !strings.HasPrefix(s.URL, "s3://"):
		c.Add("url", "%q: want s3://bucket/prefix/", s.URL)
	case s.URL == "":
		for _, f := range []string{"endpoint", "region", "force_path_style", "access_key_id", "secret_access_key"} {
			if c.Present(f) {
				c.Add(f, "applies to url: only (path writes to a local directory): remove it")
			}
		}
	}
	c.Visible("path", "", s.Path)
	c.Visible("url", "", s.URL)
	for _, col := range s.Columns {
		c.Visible("columns", "column", col.Name)
	}
	c.Columns(s.Columns, false)
	cols, err := encode.ParseColumns(s.Columns, defaultColumns, false)
	if err == nil {
		for name, t := range s.Types {
			i := slices.IndexFunc(cols, func(col encode.Column) bool { return col.Name == name })
			if i < 0 {
				c.Add("types", "%s: no column of that name: types name columns of columns:", name)
				continue
			}
			if cols[i].Field.Kind != plan.FieldValuePath {
				c.Add("types", "%s: only value.<path> columns take a type (the other fields have theirs)", name)
				continue
			}
			if _, err := parseType(t); err != nil {
				c.Add("types", "%s: %v", name, err)
			}
		}
		seen := map[string]string{}
		for _, col := range cols {
			low := strings.ToLower(col.Name)
			if other, dup := seen[low]; dup {
				c.Add("columns", "columns %s and %s differ only in case: Spark and DuckDB take them for one column; rename one", other, col.Name)
			}
			seen[low] = col.Name
		}
	}
	checkSchemaColumns(c, s)
	if s.MaxRowsPerFile != nil && *s.MaxRowsPerFile < 1 {
		c.Add("max_rows_per_file", "%d: want at least 1, e.g. 1000000 (the default, when unset)", *s.MaxRowsPerFile)
	}
	if c.DeadLetter() {
		c.Add("type", "a parquet sink cannot hold dead letters (their reasons have no column): use a file sink")
	}
	if c.Schedule() {
		c.Add("type", "a parquet sink's manifest describes one window, so with a schedule it would describe the last interval only: use a postgres, sqlite, kafka or http sink")
	}
}

// checkSchemaColumns checks a section whose columns come from the decoded
// value's schema (decode.value set, columns unset), and provenance, which
// only such a section takes.
func checkSchemaColumns(c *plan.SinkCheck, s *Section) {
	fromSchema := len(s.Columns) == 0 && c.Plan != nil && c.Plan.Decode.DecodesValue()
	switch {
	case s.Provenance && len(s.Columns) > 0:
		c.Add("provenance", "applies to the columns of the decoded value's schema (columns unset): with columns, map topic, partition, offset and timestamp to columns of your own instead")
	case s.Provenance && !fromSchema:
		c.Add("provenance", "applies to the columns of the decoded value's schema (decode.value set, columns unset); without decode: the default columns hold topic, partition, offset and timestamp already: remove it")
	}
	if !fromSchema {
		return
	}
	if c.Plan.Decode.Value == plan.DecodeJSONSchema {
		c.Add("columns", "unset, the columns come from the decoded value's schema, and a JSON Schema gives its fields no Parquet types: list the columns (and their types)")
	}
	mapped := len(c.Plan.Mapping) > 0
	for _, o := range c.Plan.Overrides {
		mapped = mapped || o.Mapping != nil && len(*o.Mapping) > 0
	}
	if mapped {
		c.Add("columns", "unset, the columns come from the decoded value's schema, which no longer describes a value the mapping changed: list the columns (columns: {...})")
	}
}
