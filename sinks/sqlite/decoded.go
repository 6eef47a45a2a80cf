package sqlite

import (
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
)

// decodedLayout is the default layout cols of a plan that decodes values
// (value) or keys (key) from the Confluent wire format: value holds the
// decoded value, and value_schema_id its schema id; kafka_key_json and
// key_schema_id the decoded key and its schema id. value_bytes and
// kafka_key keep the bytes.
func decodedLayout(cols []column, value, key bool) []column {
	if value {
		for i := range cols {
			if cols[i].form == formJSONOnly {
				cols[i].form = formDecoded
			}
		}
		cols = append(cols, column{name: "value_schema_id", field: plan.Field{Kind: plan.FieldValue}, form: formSchemaID})
	}
	if key {
		cols = append(cols,
			column{name: "kafka_key_json", field: plan.Field{Kind: plan.FieldKafkaKey}, form: formDecoded},
			column{name: "key_schema_id", field: plan.Field{Kind: plan.FieldKafkaKey}, form: formSchemaID})
	}
	return cols
}

// decodedOf is the decoded JSON of r's side kind (plan.FieldValue or
// plan.FieldKafkaKey) and its schema id; nil when it was not decoded. A
// decoded value the plan's mapping replaced is the mapped JSON
// (Record.JSONValue).
func decodedOf(r *record.Record, kind plan.FieldKind) ([]byte, int32) {
	d := r.Note.DecodedOrNil()
	switch {
	case d == nil:
		return nil, 0
	case kind == plan.FieldKafkaKey:
		return d.Key, d.KeySchemaID
	case d.Value == nil:
		return nil, 0
	}
	return r.JSONValue(), d.ValueSchemaID
}
