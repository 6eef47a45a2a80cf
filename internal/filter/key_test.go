package filter

import (
	"testing"

	"github.com/replay-tool/replay/internal/record"
)

// Compiled by CompileDecodedKey, key is the decoded key: its fields read
// like value's (numbers are numbers, a missing field is nil), nil for a
// record without a key. Compile keeps key a string: key.id does not
// compile.
func TestDecodedKey(t *testing.T) {
	r := &record.Record{Key: []byte{0, 0, 0, 0, 5, 2}, Value: []byte(`{"n":1}`),
		Note: &record.Note{Decoded: &record.Decoded{Key: []byte(`{"id":9007199254740993,"region":"eu"}`), KeySchemaID: 5}}}
	none := &record.Record{Value: []byte(`{"n":1}`)}
	for _, tc := range []struct {
		expr string
		r    *record.Record
		want bool
	}{
		{`key.region == "eu"`, r, true},
		{`key.id == 9007199254740993`, r, true},
		{`key.id > 9007199254740992 && value.n == 1`, r, true},
		{`key.missing == nil`, r, true},
		{`key.region == "us"`, r, false},
		{`key == nil`, none, true},
		{`key?.region == nil`, none, true},
	} {
		p, err := CompileDecodedKey(tc.expr)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		got, err := New(p).Match(tc.r)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.expr, got, err, tc.want)
		}
	}
	if _, err := Compile(`key.region == "eu"`); err == nil {
		t.Error("Compile accepted a field of key, a string")
	}
	if p, err := Compile(`key == "k"`); err != nil {
		t.Error(err)
	} else if ok, err := New(p).Match(&record.Record{Key: []byte("k")}); !ok || err != nil {
		t.Errorf("key == \"k\": %v, %v", ok, err)
	}
}
