package parquet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	pq "github.com/parquet-go/parquet-go"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// layout is the columns of an object and their Parquet schema.
type layout struct {
	cols   []column
	schema *pq.Schema
}

func newLayout(cols []column) *layout { return &layout{cols: cols, schema: schema(cols)} }

// provenanceColumns are the columns Config.Provenance puts before those of
// a decoded value's schema, and the columns of an object without a decoded
// value (its records are tombstones).
var provenanceColumns = []column{
	{Column: encode.Column{Name: "kafka_topic", Field: plan.Field{Kind: plan.FieldTopic}}, typ: colType{kind: kString}},
	{Column: encode.Column{Name: "kafka_partition", Field: plan.Field{Kind: plan.FieldPartition}}, typ: colType{kind: kInt32}},
	{Column: encode.Column{Name: "kafka_offset", Field: plan.Field{Kind: plan.FieldOffset}}, typ: colType{kind: kInt64}},
	{Column: encode.Column{Name: "kafka_timestamp", Field: plan.Field{Kind: plan.FieldTimestamp}}, typ: colType{kind: kTimestampMillis}},
}

// recordLayout returns the layout of the object r belongs in: the sink's
// layout, or the layout of r's decoded value's schema; pt's current one
// for a record without a decoded value (a tombstone), which fits any. The
// partition remembers the last schema's columns and layout: a record of
// the same schema as the one before costs a lookup by the slice
// ValueColumns returns for it.
func (s *Sink) recordLayout(ctx context.Context, pt *part, r *record.Record) (*layout, error) {
	if s.lay != nil {
		return s.lay, nil
	}
	if d := r.Note.DecodedOrNil(); d == nil || d.Value == nil {
		return pt.lay, nil
	}
	scols, err := s.valueColumns(ctx, r.Value)
	if err != nil {
		return nil, fmt.Errorf("parquet sink: the columns of the decoded value: %w", err)
	}
	if len(scols) > 0 && &scols[0] == pt.seenCols {
		return pt.seenLay, nil
	}
	l, err := s.layoutFor(scols)
	if err == nil && len(scols) > 0 {
		pt.seenCols, pt.seenLay = &scols[0], l
	}
	return l, err
}

// layoutOf returns the layout of the schema of value, a decoded record's
// value in the wire format.
func (s *Sink) layoutOf(ctx context.Context, value []byte) (*layout, error) {
	scols, err := s.valueColumns(ctx, value)
	if err != nil {
		return nil, fmt.Errorf("parquet sink: the columns of the decoded value: %w", err)
	}
	return s.layoutFor(scols)
}

// layoutFor returns the layout of a schema's columns: one layout per
// distinct list of columns, so two schema ids whose fields give the same
// columns share it.
func (s *Sink) layoutFor(scols []sinks.SchemaColumn) (*layout, error) {
	var key strings.Builder
	for _, c := range scols {
		key.WriteString(c.Name + "\x00" + c.Type + "\x01")
	}
	if l, ok := s.layouts.Load(key.String()); ok {
		return l.(*layout), nil
	}
	var cols []column
	if s.provenance {
		cols = append(cols, provenanceColumns...)
	}
	for _, sc := range scols {
		t, err := parseAnyType(sc.Type)
		if err != nil {
			return nil, fmt.Errorf("parquet sink: field %s of the decoded value: %w", sc.Name, err)
		}
		if slices.ContainsFunc(cols, func(c column) bool { return c.Name == sc.Name }) {
			return nil, fmt.Errorf("parquet sink: the decoded value's field %s has the name of a provenance column: set provenance: false, or list the columns (columns:) to name them", sc.Name)
		}
		cols = append(cols, column{Column: encode.Column{Name: sc.Name, Field: plan.Field{Kind: plan.FieldValuePath, Arg: sc.Name}}, typ: t, optional: true})
	}
	if len(cols) == 0 {
		cols = provenanceColumns // a record or message without fields
	}
	l, _ := s.layouts.LoadOrStore(key.String(), newLayout(cols))
	return l.(*layout), nil
}

// stagedLayout is the layout of partition p's object whose records the
// staging file holds (nil: none): the sink's, or that of the first
// decoded value staged; provenanceColumns when no record has one. The
// file's offset does not move.
func (s *Sink) stagedLayout(ctx context.Context, p int32, staging *os.File) (*layout, error) {
	if s.lay != nil {
		return s.lay, nil
	}
	if staging != nil {
		fr := newFrameReader(io.NewSectionReader(staging, 0, math.MaxInt64), s.topic, p)
		for {
			r, err := fr.next()
			if err == io.EOF || errors.Is(err, errTorn) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("parquet sink: read the staging file %s: %w", staging.Name(), err)
			}
			if d := r.Note.DecodedOrNil(); d != nil && d.Value != nil {
				return s.layoutOf(ctx, r.Value)
			}
		}
	}
	l, _ := s.layouts.LoadOrStore("", newLayout(provenanceColumns))
	return l.(*layout), nil
}
