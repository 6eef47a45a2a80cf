package decode

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// newFakeRegistry starts srfake, franz-go's in-memory Schema Registry
// speaking the REST API over HTTP, closed with the test.
func newFakeRegistry(t *testing.T) *srfake.Registry {
	t.Helper()
	reg := srfake.New()
	t.Cleanup(reg.Close)
	return reg
}

func newTestDecoder(t *testing.T, url string, cfg Config) *Decoder {
	t.Helper()
	cfg.Registry.URLs = []string{url}
	d, err := New(cfg, Options{Logger: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The differential test of the Avro decoder: fastavro encodes records of a
// schema with every type of the rendering table, at edge values (decimals
// negative and of 36 digits, int64's bounds, timestamps of years 1 and
// 9999, NaN and the infinities, unicode, empty bytes, nested records,
// arrays, maps, unions); replay decodes each framed payload through a
// registry over HTTP, and each value is compared with what fastavro
// decodes, rendered by the documented mappings, bare and tagged.
func TestAvroAgainstFastavro(t *testing.T) {
	out := runOracle(t, "avro_oracle.py", "400")
	schema, err := os.ReadFile(filepath.Join(out, "schema.avsc"))
	if err != nil {
		t.Fatal(err)
	}
	cases := readCases(t, filepath.Join(out, "cases.json"))
	reg := newFakeRegistry(t)
	reg.SeedSchema("everything-value", 1, 7, sr.Schema{Schema: string(schema), Type: sr.TypeAvro})

	for _, unions := range []string{"bare", "tagged"} {
		d := newTestDecoder(t, reg.URL(), Config{Value: Avro, AvroUnions: unions})
		var diffs []string
		leaves := 0
		for i, c := range cases {
			got, err := d.Decode(context.Background(), Value, frame(7, mustB64(t, c.Payload)))
			if err != nil {
				t.Fatalf("%s: record %d: %v", unions, i, err)
			}
			if got.SchemaID != 7 {
				t.Fatalf("schema id %d, want 7", got.SchemaID)
			}
			want := c.Bare
			if unions == "tagged" {
				want = c.Tagged
			}
			d, n := diffJSON("record "+strconv.Itoa(i), parseNumbers(t, want), parseNumbers(t, got.JSON))
			diffs, leaves = append(diffs, d...), leaves+n
		}
		t.Logf("avro (unions %s): %d records, %d values compared with fastavro, %d differences", unions, len(cases), leaves, len(diffs))
		for i, d := range diffs {
			if i == 20 {
				t.Errorf("... and %d more", len(diffs)-20)
				break
			}
			t.Error(d)
		}
	}
}
