package encode

import "github.com/replay-tool/replay/plan"

// ValueFormats are the values of a sink's value_format; "" is auto.
var ValueFormats = []string{"auto", "json", "text", "base64"}

// ValueFormatField describes value_format, the field of the sinks that
// write JSON lines or bodies (file, stdout, http): how a record's value is
// written.
var ValueFormatField = plan.FieldDescriptor{Name: "value_format", Enum: ValueFormats, Fingerprint: true,
	Doc:              "file (jsonl), stdout, http and their dead letters: how each value is written: auto (default: JSON embedded, other UTF-8 text as a string, other bytes as base64 marked value_encoding: base64), json (a value that cannot be embedded byte for byte is a bad record, on_error), text (a string; not UTF-8 is a bad record) or base64 (every value).",
	FingerprintValue: DefaultAsUnset("auto")}

// CheckDecodedValueFormat warns of a section's value_format vf under
// decode.value: the sink writes each decoded value as JSON whatever vf
// says, and the dead letter of a record that failed to decode keeps its
// framed bytes, which text and json cannot write.
func CheckDecodedValueFormat(c *plan.SinkCheck, vf string) {
	switch {
	case !c.Plan.Decode.DecodesValue() || vf == "" || vf == "auto":
	case !c.DeadLetter():
		c.Warn("value_format", "%s applies to no value under decode.value: each decoded value is written as JSON; remove value_format", vf)
	case vf == "text" || vf == "json":
		c.Warn("value_format", "%s: a record that fails to decode keeps its framed bytes (magic byte, schema id, binary payload), which %s cannot write, so its dead letter fails the run; use base64 or auto", vf, vf)
	}
}

// DefaultAsUnset is a plan.FieldDescriptor.FingerprintValue that holds the
// field's default, def, as unset (""): writing the default out leaves the
// fingerprint as it was.
func DefaultAsUnset(def string) func(val any, s *plan.Sink, deadLetter bool) any {
	return func(val any, _ *plan.Sink, _ bool) any {
		if val == def {
			return ""
		}
		return val
	}
}

// ColumnsField describes columns, the mapping of a table's or a CSV file's
// columns to record fields (plan.ParseField).
var ColumnsField = plan.FieldDescriptor{Name: "columns", Fingerprint: true,
	Doc:              "postgres, sqlite and csv files: map column names to record fields, in order: key (the idempotency key), kafka_key, value (JSON), value.<path> (a gjson path into a JSON value, e.g. value.customer.id; NULL when missing), header.<name> (the header's last value), headers (JSON), timestamp, timestamp_type (CreateTime or LogAppendTime), partition, offset, topic. A database sink must map key to one column, its unique key; unset, the default layout.",
	FingerprintValue: func(val any, _ *plan.Sink, _ bool) any { return val.(plan.Columns).String() }}
