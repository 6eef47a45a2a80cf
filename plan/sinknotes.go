package plan

// RangeSize is what `replay plan` knows of one resolved range before a
// run: its records and an estimate of their bytes, for a sink's Notes.
type RangeSize struct {
	Partition int32
	// Records counts the range's offsets (records, but for transaction
	// markers and compacted gaps).
	Records int64
	// BytesPerRecord is the average key and value bytes of the records
	// sampled at the range's ends (0 when none was read); Exact is true
	// when the sample is every record of the range.
	BytesPerRecord float64
	Exact          bool
}

// SinkNote is a line `replay plan` prints about what a section would write
// for the resolved ranges.
type SinkNote struct {
	Text string `json:"text"`
	// Warning marks a likely mistake; Text then says what to change.
	Warning bool `json:"warning,omitempty"`
}
