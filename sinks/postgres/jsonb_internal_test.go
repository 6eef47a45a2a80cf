package postgres

import (
	"strings"
	"testing"

	"github.com/replay-tool/replay/internal/testenv"
)

// jsonbFits says what PostgreSQL's jsonb input says, on the edges of its
// escapes and of numeric's range.
func TestJSONBFitsAsPostgreSQL(t *testing.T) {
	docs := []string{
		`{"a":"\u0000"}`, `"\\u0000"`, `"\u0041"`, `"\ud800"`, `"\udc00"`, `"\ud83d\ude00"`, `"\ud83d\u0041"`, `"\ud83dx"`, `"\ud83d"`,
		`"\uDBFF\uDFFF"`, `"\udc00\ud800"`, `"e1e400000"`,
		`1e131071`, `1e131072`, `-1e131072`, `0.001e131075`, `0.001e131074`, `1e-16383`, `1e-16384`, `1.5e-16383`, `0.1e-16383`,
		`0e200000`, `0e-16383`, `0e-16384`, `100e-16385`, `1.000e-16381`, `1E+5`, `12.5E-3`, `0.0005`, `-0`, `1e99999999999`,
		`[1, 2.50, {"x": -3e2}]`, `"` + strings.Repeat("x", 10) + `"`,
		"1" + strings.Repeat("0", 131071), "1" + strings.Repeat("0", 131072), "0." + strings.Repeat("0", 16382) + "1", "0." + strings.Repeat("0", 16383) + "1",
	}
	conn := testenv.PgConn(t, testenv.Postgres(t))
	for _, d := range docs {
		var pg bool
		err := conn.QueryRow(t.Context(), `SELECT pg_input_is_valid($1, 'jsonb')`, d).Scan(&pg)
		if err != nil {
			// PostgreSQL before 16 has no pg_input_is_valid: try the cast.
			_, cerr := conn.Exec(t.Context(), `SELECT $1::text::jsonb`, d)
			pg = cerr == nil
		}
		var m valueJSON
		if got := m.jsonbOK([]byte(d), false); got != pg {
			t.Errorf("jsonbOK(%.60s) = %v, PostgreSQL takes it: %v", d, got, pg)
		}
	}
}
