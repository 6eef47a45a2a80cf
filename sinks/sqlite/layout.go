package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/dbsection"
	"github.com/replay-tool/replay/sinks/encode"
)

// VersionColumn is the column that holds a record's version (sink.version)
// in every layout: the default one and a column mapping alike.
const VersionColumn = "replay_version"

// form is how a column's cell is bound.
type form int

const (
	// formField: by the field and the target column's affinity (see cell).
	formField form = iota
	// formJSONOnly: the value's bytes as TEXT when they are one JSON
	// document in UTF-8, else NULL (the default layout's value column).
	formJSONOnly
	// formVersion: the version field (replay_version).
	formVersion
	// formDecoded: the decoded JSON of the field's side (the value, the
	// Kafka key) as TEXT, NULL when it was not decoded (the default
	// layout's value and kafka_key_json under decode:).
	formDecoded
	// formSchemaID: the schema id the field's side was decoded by, NULL
	// when it was not (value_schema_id, key_schema_id).
	formSchemaID
)

// affinity is an SQLite column's type affinity (SQLite's "Datatypes In
// SQLite", section 3.1), which decides how a bound value is converted.
type affinity int

const (
	affBlob    affinity = iota // no conversion (BLOB, no type, ANY in a STRICT table)
	affText                    // numbers become text
	affNumeric                 // numeric text becomes INTEGER or REAL
	affInteger                 // as NUMERIC
	affReal                    // as NUMERIC, integers stored as REAL
)

func (a affinity) String() string {
	return [...]string{"BLOB", "TEXT", "NUMERIC", "INTEGER", "REAL"}[a]
}

// affinityOf is the affinity SQLite gives a declared column type, by its
// rules in order: INT, then CHAR/CLOB/TEXT, then BLOB or no type, then
// REAL/FLOA/DOUB, else NUMERIC. In a STRICT table ANY converts nothing.
func affinityOf(decl string, strict bool) affinity {
	t := strings.ToUpper(decl)
	switch {
	case strict && t == "ANY":
		return affBlob
	case strings.Contains(t, "INT"):
		return affInteger
	case strings.Contains(t, "CHAR"), strings.Contains(t, "CLOB"), strings.Contains(t, "TEXT"):
		return affText
	case strings.Contains(t, "BLOB"), t == "":
		return affBlob
	case strings.Contains(t, "REAL"), strings.Contains(t, "FLOA"), strings.Contains(t, "DOUB"):
		return affReal
	}
	return affNumeric
}

// column is one column of the sink's table: its name, the record field it
// holds, how it is bound, and the affinity of the table's column.
type column struct {
	name   string
	quoted string
	field  plan.Field
	form   form
	aff    affinity
	// original: the value's bytes as read, before a mapping (the default
	// layout's value_bytes).
	original bool
}

// defaultLayout is the table without a column mapping (see Sink).
func defaultLayout() []column {
	return []column{
		{name: "key", field: plan.Field{Kind: plan.FieldKey}},
		{name: "topic", field: plan.Field{Kind: plan.FieldTopic}},
		{name: "partition", field: plan.Field{Kind: plan.FieldPartition}},
		{name: "offset", field: plan.Field{Kind: plan.FieldOffset}},
		{name: "timestamp", field: plan.Field{Kind: plan.FieldTimestamp}},
		{name: "value", field: plan.Field{Kind: plan.FieldValue}, form: formJSONOnly},
		{name: "value_bytes", field: plan.Field{Kind: plan.FieldValue}, original: true},
		{name: "kafka_key", field: plan.Field{Kind: plan.FieldKafkaKey}},
		{name: "headers", field: plan.Field{Kind: plan.FieldHeaders}},
	}
}

// layout is the sink's columns: the default layout (with the decoded
// columns of decodedLayout), or the plan's mapping, plus replay_version
// when version is set (its field parsed).
func layout(mapping plan.Columns, version string, decodedValue, decodedKey bool) ([]column, error) {
	var cols []column
	if len(mapping) == 0 {
		cols = decodedLayout(defaultLayout(), decodedValue, decodedKey)
	} else {
		enc, err := encode.ParseColumns(mapping, nil, true)
		if err != nil {
			return nil, err
		}
		for _, c := range enc {
			if c.Name == VersionColumn {
				return nil, fmt.Errorf("column %s: the name is the version column's (sink.version fills it): map the field to another column", c.Name)
			}
			cols = append(cols, column{name: c.Name, field: c.Field})
		}
	}
	if version != "" {
		f, err := dbsection.ParseVersion(version)
		if err != nil {
			return nil, err
		}
		cols = append(cols, column{name: VersionColumn, field: f, form: formVersion})
	}
	for i := range cols {
		cols[i].quoted = encode.QuoteIdent(cols[i].name)
		cols[i].aff = affinityOf(createdType(cols[i]), false)
	}
	return cols, nil
}

// createdType is the declared type create_table gives a column: INTEGER
// for partition and offset, BLOB for the bytes of the Kafka key, of a
// header and of value_bytes (kept exactly), no type for replay_version
// (numbers compare as numbers, text as text), TEXT for the others.
func createdType(c column) string {
	switch {
	case c.form == formVersion:
		return ""
	case c.form == formJSONOnly, c.form == formDecoded:
		return "TEXT"
	case c.form == formSchemaID:
		return "INTEGER"
	}
	switch c.field.Kind {
	case plan.FieldPartition, plan.FieldOffset:
		return "INTEGER"
	case plan.FieldKafkaKey, plan.FieldHeader:
		return "BLOB"
	case plan.FieldValue:
		if c.name == "value_bytes" {
			return "BLOB"
		}
	}
	return "TEXT"
}

// createTableSQL creates the table with createdType's types; the key
// column is the primary key.
func createTableSQL(table string, cols []column, key int) string {
	defs := make([]string, len(cols))
	for i, c := range cols {
		defs[i] = strings.TrimSuffix(c.quoted+" "+createdType(c), " ")
		switch {
		case i == key:
			defs[i] += " NOT NULL PRIMARY KEY"
		case c.form == formField && (encode.Column{Name: c.name, Field: c.field}).NotNull():
			defs[i] += " NOT NULL"
		}
	}
	return `CREATE TABLE IF NOT EXISTS ` + table + " (\n\t" + strings.Join(defs, ",\n\t") + "\n)"
}

// tableInfo reads the declared types of table's columns and whether it is
// STRICT; found is false when the table does not exist.
func tableInfo(ctx context.Context, db *sql.DB, schema, name string) (types map[string]string, strict, found bool, err error) {
	rows, err := db.QueryContext(ctx, `SELECT name, type FROM pragma_table_xinfo(?, ?)`, name, schema)
	if err != nil {
		return nil, false, false, err
	}
	defer rows.Close()
	types = map[string]string{}
	for rows.Next() {
		var n, t string
		if err := rows.Scan(&n, &t); err != nil {
			return nil, false, false, err
		}
		types[strings.ToLower(n)] = t
	}
	if err := rows.Err(); err != nil {
		return nil, false, false, err
	}
	if len(types) == 0 {
		return nil, false, false, nil
	}
	var s int
	err = db.QueryRowContext(ctx, `SELECT "strict" FROM pragma_table_list WHERE schema = ? AND name = ?`, schema, name).Scan(&s)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, false, false, err
	}
	return types, s != 0, true, nil
}

// splitTable returns the schema ("main" when none) and the name of
// `"a"."b"` or `"b"` (QuoteTable's output).
func splitTable(q string) (schema, name string) {
	var parts []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(q); i++ {
		switch c := q[i]; {
		case c == '"' && in && i+1 < len(q) && q[i+1] == '"':
			cur.WriteByte('"')
			i++
		case c == '"':
			in = !in
		case c == '.' && !in:
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	if parts = append(parts, cur.String()); len(parts) == 2 {
		return parts[0], parts[1]
	}
	return "main", parts[0]
}

// layoutError refuses a default-layout table that lacks columns
// (missing): the decoded columns of decodedLayout (a table first written
// by a plan without decode:), or kafka_key and value_bytes (a table made
// by the first versions of the sink, which cannot hold bytes exactly).
func layoutError(name string, missing []column) error {
	decoded := slices.ContainsFunc(missing, func(c column) bool {
		return c.form == formSchemaID || c.form == formDecoded && c.field.Kind == plan.FieldKafkaKey
	})
	var names, alter []string
	for _, m := range missing {
		t := createdType(m)
		if !decoded && t != "" {
			t = "BLOB"
		}
		names = append(names, m.name)
		alter = append(alter, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s;", name, encode.QuoteIdent(m.name), t))
	}
	if decoded {
		return fmt.Errorf("table %s lacks the column(s) %s of the default layout of a plan that decodes (decode:); it was first written by a plan that did not: "+
			"add them with %s (the rows written before are rewritten with the decoded value when the window is replayed again), or write to a new table",
			name, strings.Join(names, ", "), strings.Join(alter, " "))
	}
	return fmt.Errorf("table %s lacks the column(s) %s of the default layout (it was created by an earlier version of replay, whose value column could not keep bytes that are not JSON text): "+
		"add them with %s (the rows written before then keep value_bytes NULL until they are replayed again), or map the existing columns with sink.columns",
		name, strings.Join(names, ", "), strings.Join(alter, " "))
}

// DecodeHeaders reads a headers column (AppendHeadersJSON's array) back
// into the record's headers, with their original bytes.
func DecodeHeaders(text string) ([]record.Header, error) {
	hs, err := encode.DecodeHeadersJSON([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("sqlite sink: %w", err)
	}
	return hs, nil
}
