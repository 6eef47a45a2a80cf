package postgres

import (
	"slices"

	"github.com/replay-tool/replay/plan"
)

// The default layout's columns of a plan that decodes values or keys from
// the Confluent wire format (plan decode:).
var (
	// valueSchemaIDColumn is the schema id each value was decoded by.
	valueSchemaIDColumn = pgColumn{name: "value_schema_id", field: plan.Field{Kind: plan.FieldValue}, schemaID: true}
	// keyJSONColumn is the decoded key as jsonb, keySchemaIDColumn its
	// schema id.
	keyJSONColumn     = pgColumn{name: "kafka_key_json", field: plan.Field{Kind: plan.FieldKafkaKey}, jsonOrNull: true, decoded: true}
	keySchemaIDColumn = pgColumn{name: "key_schema_id", field: plan.Field{Kind: plan.FieldKafkaKey}, schemaID: true}
)

// defaultColumns is the default layout of a plan that decodes values
// (value) and keys (key): value holds the decoded value (JSONValue), and
// is compared by the change test; value_schema_id follows headers, then
// kafka_key_json and key_schema_id.
func defaultColumns(value, key bool) []pgColumn {
	cols := slices.Clone(defaultLayout)
	if value {
		for i := range cols {
			if cols[i].jsonOrNull {
				cols[i].decoded = true
			}
		}
		cols = append(cols, valueSchemaIDColumn)
	}
	if key {
		cols = append(cols, keyJSONColumn, keySchemaIDColumn)
	}
	return cols
}

// missingWhy says why a default-layout table lacks the columns missing: a
// table first written by a plan without decode: lacks the decoded
// columns; one of an earlier replay version lacks value_bytes and
// kafka_key.
func missingWhy(missing []string) string {
	for _, m := range missing {
		switch m {
		case valueSchemaIDColumn.name, keyJSONColumn.name, keySchemaIDColumn.name:
			return "a table first written by a plan that did not decode (decode:) lacks the columns of the decoded value and key; the rows written then are rewritten with them when the window is replayed again"
		}
	}
	return "a table of an earlier replay version lacks value_bytes and kafka_key, which keep the exact bytes"
}
