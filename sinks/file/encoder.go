package file

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/encode"
)

// encoder is the format of a file sink: how records become staging lines,
// each a JSON object holding the record's "offset", and staging lines the
// output's. It keeps no state (a partition's lineBuf is passed in) and is
// safe for concurrent use.
type encoder interface {
	// header is what an output file starts with (nil for none).
	header() []byte
	// encode puts batch's staging lines in lb.buf, replacing what it held;
	// a record it cannot encode fails the whole batch (its *record.Error).
	encode(lb *lineBuf, batch []record.Record) error
	// verbatim reports whether the output's lines are the staging lines.
	verbatim() bool
	// copyLines writes the output lines of the complete staging lines src
	// holds to dst.
	copyLines(dst io.Writer, src io.Reader) error
}

// lineBuf is the encoding buffer of one partition.
type lineBuf struct {
	buf []byte
	row *csvRow // nil until a CSV encoder needs it
}

// lineBufs are encoding buffers shared by all partitions, each held only
// while a batch is encoded.
var lineBufs = make(chan []byte, 8)

// reset empties lb.buf, taking a shared buffer when it has none.
func (lb *lineBuf) reset() {
	if lb.buf == nil {
		select {
		case lb.buf = <-lineBufs:
		default:
		}
	}
	lb.buf = lb.buf[:0]
}

// release gives the buffer back to the shared ones, dropping one over 4 MiB.
func (lb *lineBuf) release() {
	if lb.buf != nil && cap(lb.buf) <= 4<<20 {
		select {
		case lineBufs <- lb.buf[:0]:
		default:
		}
	}
	lb.buf = nil
}

// jsonlEncoder writes newline-delimited JSON (AppendJSONL).
type jsonlEncoder struct{ format encode.ValueFormat }

func (jsonlEncoder) header() []byte { return nil }

func (e jsonlEncoder) encode(lb *lineBuf, batch []record.Record) error {
	if err := encode.CheckBatch(batch, e.format); err != nil {
		return err
	}
	lb.reset()
	for i := range batch {
		lb.buf = encode.AppendJSONLChecked(lb.buf, &batch[i], e.format)
	}
	return nil
}

func (jsonlEncoder) verbatim() bool { return true }

func (jsonlEncoder) copyLines(dst io.Writer, src io.Reader) error {
	_, err := io.Copy(dst, src)
	return err
}

// csvEncoder writes CSV (see Sink); its staging lines are
// {"offset":N,"csv":"<row>"}.
type csvEncoder struct {
	cols  []encode.Column
	keyed bool // a column holds the idempotency key
}

type csvRow struct {
	b      bytes.Buffer
	w      *csv.Writer
	fields []string
}

func (e *csvEncoder) header() []byte {
	var b bytes.Buffer
	names := make([]string, len(e.cols))
	for i, c := range e.cols {
		names[i] = c.Name
	}
	_ = writeCSVRow(csv.NewWriter(&b), names) // a bytes.Buffer does not fail
	return b.Bytes()
}

func (e *csvEncoder) encode(lb *lineBuf, batch []record.Record) error {
	lb.reset()
	if lb.row == nil {
		lb.row = &csvRow{fields: make([]string, len(e.cols))}
		lb.row.w = csv.NewWriter(&lb.row.b)
	}
	row := lb.row
	for i := range batch {
		r := &batch[i]
		cs := encode.Cells{Record: r}
		if e.keyed {
			cs.Key = r.IdempotencyKey()
		}
		for c, col := range e.cols {
			if err := csvLossless(r, col); err != nil {
				return err
			}
			row.fields[c], _ = cs.Text(col) // NULL is an empty field
		}
		row.b.Reset()
		if err := writeCSVRow(row.w, row.fields); err != nil {
			return fmt.Errorf("file sink: partition %d offset %d: %w", r.Partition, r.Offset, err)
		}
		lb.buf = append(lb.buf, `{"offset":`...)
		lb.buf = strconv.AppendInt(lb.buf, r.Offset, 10)
		lb.buf = append(lb.buf, `,"csv":`...)
		lb.buf = encode.AppendJSONBytes(lb.buf, row.b.Bytes())
		lb.buf = append(lb.buf, "}\n"...)
	}
	return nil
}

func (e *csvEncoder) verbatim() bool { return false }

// copyLines writes the row of each staging line.
func (e *csvEncoder) copyLines(dst io.Writer, src io.Reader) error {
	r := bufio.NewReaderSize(src, 1<<20)
	for {
		line, err := readLine(r)
		if len(line) > 0 {
			row := gjson.GetBytes(line, "csv")
			if row.Type != gjson.String {
				return errors.New("staging line without its csv row: the staging file is not replay's")
			}
			if _, err := io.WriteString(dst, row.Str); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func writeCSVRow(w *csv.Writer, fields []string) error {
	if err := w.Write(fields); err != nil {
		return err
	}
	w.Flush()
	return w.Error()
}

// readLine reads the next line, '\n' included (io.EOF after a last line
// without one), valid until the next call; a line longer than r's buffer
// is copied.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	long := append([]byte(nil), line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = r.ReadSlice('\n')
		long = append(long, line...)
	}
	return long, err
}

// csvLossless returns a *record.Error when the bytes col takes from r are
// not UTF-8, which a CSV cell would hold as U+FFFD (a value column reads
// the decoded or mapped value, not the record's bytes).
func csvLossless(r *record.Record, col encode.Column) error {
	bad := func(what string) error {
		return record.NewError(r, fmt.Errorf("column %s: the record's %s is not UTF-8 text, which a CSV cell cannot hold byte for byte: write it with format: jsonl (base64, value_encoding), or map another field", col.Name, what))
	}
	switch col.Field.Kind {
	case plan.FieldKafkaKey:
		if !utf8.Valid(r.Key) {
			return bad("key")
		}
	case plan.FieldValue, plan.FieldValuePath:
		if !utf8.Valid(r.JSONValue()) {
			return bad("value")
		}
	case plan.FieldHeader:
		for _, h := range r.Headers {
			if h.Key == col.Field.Arg && !utf8.Valid(h.Value) {
				return bad("header " + strconv.Quote(h.Key))
			}
		}
	}
	return nil
}
