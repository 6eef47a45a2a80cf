package decode

import (
	"context"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// Counts gives the decodes per side and schema id, values first; bad
// records are not counted.
func TestCounts(t *testing.T) {
	reg := newFakeRegistry(t)
	reg.SeedSchema("o-value", 1, 21, sr.Schema{Schema: `"long"`})
	reg.SeedSchema("o-value", 2, 22, sr.Schema{Schema: `"string"`})
	reg.SeedSchema("o-key", 1, 5, sr.Schema{Schema: `"int"`})
	d := newTestDecoder(t, reg.URL(), Config{Value: SchemaRegistry, Key: SchemaRegistry})
	ctx := context.Background()
	for _, in := range []struct {
		side Side
		b    []byte
	}{
		{Value, frame(22, []byte{2, 'a'})}, {Value, frame(21, []byte{2})}, {Value, frame(22, []byte{0})},
		{Key, frame(5, []byte{4})}, {Value, frame(21, []byte{})}, // truncated: a bad record
	} {
		_, _ = d.Decode(ctx, in.side, in.b)
	}
	want := []SchemaCount{{"value", 21, 1}, {"value", 22, 2}, {"key", 5, 1}}
	if got := d.Counts(); !reflect.DeepEqual(got, want) {
		t.Errorf("Counts() = %+v, want %+v", got, want)
	}
}
