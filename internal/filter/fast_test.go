package filter

import (
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
)

var fastExprs = []string{
	`value.status == "paid"`,
	`value.status != "paid" || value.amount > 100`,
	`string(value.id) == "12345678901234567890"`,
	`value.id == 9007199254740993`,
	`value.a.b == "x"`,
	`value.a.b.c == nil`,
	`value["status"] in ["paid", "shipped"]`,
	`value.items[0] == 1`,
	`any(value.items, # > 1)`,
	`value.status == nil`,
	`value?.status == "paid"`,
	`value.amount >= 1.5 && value.status startsWith "pa"`,
	`key == "k" && value.n == 3`,
}

var fastValues = []string{
	`{"status":"paid","amount":120.5,"id":12345678901234567890}`, `{"status":"created"}`, `{"status":null}`, `{}`,
	`{"status":"paid","status":"refunded"}`, `{"status":"refunded","status":"paid"}`, `{"status":"pa\u0069d"}`,
	`{"st\u0061tus":"paid"}`, "{\"status\":\"pa\xffid\"}", `{"status":"\ud800"}`, `{"id":9007199254740993}`,
	`{"id":9007199254740992}`, `{"a":{"b":"x"}}`, `{"a":{"b":{"c":null}}}`, `{"a":"flat"}`, `{"a":null}`,
	`{"a":[1,2]}`, `{"items":[1,2,3]}`, `{"items":[]}`, `{"items":"no"}`, `{"n":3}`, `{"n":3.0}`, `{"n":"3"}`,
	`[1,2]`, `"paid"`, `42`, `null`, ``, `not json`, `{"status":"paid"} trailing`, `{"amount":1e400}`,
	`{"amount":-0}`, ` { "status" : "paid" } `,
}

func fastRecord(value string) *record.Record {
	r := &record.Record{Topic: "orders", Partition: 1, Offset: 9, Time: time.Unix(1, 0), Key: []byte("k")}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

// compareFilters checks that the lookup of the fields an expression reads
// gives the result (or the error) of the whole decode.
func compareFilters(t *testing.T, prog *Program, value string) {
	t.Helper()
	slow := *prog
	slow.fields = nil
	gotOK, gotErr := New(prog).Match(fastRecord(value))
	wantOK, wantErr := New(&slow).Match(fastRecord(value))
	if gotOK != wantOK || (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Errorf("%s on %q: fields %v, %v; whole value %v, %v", prog, value, gotOK, gotErr, wantOK, wantErr)
	}
}

func TestFilterFieldLookupMatchesDecode(t *testing.T) {
	for _, src := range fastExprs {
		prog, err := Compile(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if prog.fields == nil {
			t.Fatalf("%s: no field lookup", src)
		}
		for _, v := range fastValues {
			compareFilters(t, prog, v)
		}
	}
}

func TestFilterNeedsWholeValue(t *testing.T) {
	for _, src := range []string{`value == nil`, `len(value) > 1`, `value[key] == "x"`, `"status" in value`,
		`$env.value.status == "paid"`, `key == "k"`} {
		prog, err := Compile(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if prog.fields != nil {
			t.Errorf("%s: looks up %v, but needs the whole value (or none)", src, prog.fields)
		}
	}
}

func FuzzFilterFieldLookup(f *testing.F) {
	for i, v := range fastValues {
		f.Add(i, v)
	}
	progs := make([]*Program, len(fastExprs))
	for i, src := range fastExprs {
		p, err := Compile(src)
		if err != nil {
			f.Fatal(err)
		}
		progs[i] = p
	}
	f.Fuzz(func(t *testing.T, i int, value string) {
		compareFilters(t, progs[uint(i)%uint(len(progs))], value) // -i of math.MinInt stays negative
	})
}

// BenchmarkFilter compares the field lookup with the whole decode on an
// order event of the benchmark's shape.
func BenchmarkFilter(b *testing.B) {
	value := []byte(`{"id":"ord-123456","customer":"cus-01234","status":"paid","amount":123.45,"currency":"EUR","items":3,` +
		`"created_at":"2026-11-30T10:00:00.123Z","channel":"web","shipping":{"country":"DE","city":"Berlin","zip":"10123"},"fx_rate":1.234567,"note":"replay demo order"}`)
	prog, err := Compile(`value.status == "paid"`)
	if err != nil {
		b.Fatal(err)
	}
	slow := *prog
	slow.fields = nil
	for _, c := range []struct {
		name string
		p    *Program
	}{{"lookup", prog}, {"decode", &slow}} {
		b.Run(c.name, func(b *testing.B) {
			f := New(c.p)
			b.ReportAllocs()
			for b.Loop() {
				r := record.Record{Value: value}
				if ok, err := f.Match(&r); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
