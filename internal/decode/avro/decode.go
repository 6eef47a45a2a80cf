package avro

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/replay-tool/replay/internal/decode/jsonw"
	"github.com/replay-tool/replay/internal/jsonscan"
)

// MaxDepth bounds the nesting of a decoded value (records in records,
// arrays in arrays): a recursive schema is walked at most this deep, so
// that a payload cannot exhaust the stack.
const MaxDepth = 1000

// maxZeroSizeItems bounds the items of an array whose items encode to no
// bytes (nulls, empty records): their count is not bounded by the payload.
const maxZeroSizeItems = 1 << 20

// Options say how a value renders.
type Options struct {
	// TaggedUnions renders a union's non-null value as Avro's JSON encoding
	// does, {"<branch name>": value}; false renders the value alone.
	TaggedUnions bool
}

// AppendJSON decodes payload, one value of schema s in Avro's binary
// encoding, and appends it to b as JSON. A payload that does not decode,
// or that has bytes left after the value, is an error saying where (the
// field path) and what is wrong; b's extension is then garbage.
func AppendJSON(b []byte, s *Schema, payload []byte, opts Options) ([]byte, error) {
	d := &decoder{buf: payload, opts: opts}
	b, err := d.value(b, s)
	if err != nil {
		return b, err
	}
	if d.pos != len(d.buf) {
		return b, fmt.Errorf("%d bytes left over after the value (%d bytes)", len(d.buf)-d.pos, d.pos)
	}
	return b, nil
}

type decoder struct {
	buf   []byte
	pos   int
	depth int
	opts  Options
}

// pathError is a decoding failure and the path of the value it is in.
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string {
	if e.path == "" {
		return e.err.Error()
	}
	return "at " + e.path[1:] + ": " + e.err.Error()
}

func (e *pathError) Unwrap() error { return e.err }

// within prefixes elem to err's path.
func within(err error, elem string) error {
	var pe *pathError
	if errors.As(err, &pe) {
		pe.path = elem + pe.path
		return pe
	}
	return &pathError{path: elem, err: err}
}

var errTruncated = errors.New("payload ends inside a value (truncated)")

func (d *decoder) value(b []byte, s *Schema) ([]byte, error) {
	switch s.Kind {
	case Null:
		return append(b, "null"...), nil
	case Boolean:
		if d.pos >= len(d.buf) {
			return b, errTruncated
		}
		c := d.buf[d.pos]
		d.pos++
		switch c {
		case 0:
			return append(b, "false"...), nil
		case 1:
			return append(b, "true"...), nil
		}
		return b, fmt.Errorf("boolean byte %d is neither 0 nor 1", c)
	case Int:
		v, err := d.int()
		if err != nil {
			return b, err
		}
		return appendInt(b, s, v)
	case Long:
		v, err := d.long()
		if err != nil {
			return b, err
		}
		return appendLong(b, s, v)
	case Float:
		if len(d.buf)-d.pos < 4 {
			return b, errTruncated
		}
		f := math.Float32frombits(binary.LittleEndian.Uint32(d.buf[d.pos:]))
		d.pos += 4
		return jsonw.Float(b, float64(f), 32), nil
	case Double:
		if len(d.buf)-d.pos < 8 {
			return b, errTruncated
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(d.buf[d.pos:]))
		d.pos += 8
		return jsonw.Float(b, f, 64), nil
	case Bytes, String, Fixed:
		return d.blob(b, s)
	case Enum:
		i, err := d.long()
		if err != nil {
			return b, err
		}
		if i < 0 || i >= int64(len(s.Symbols)) {
			return b, fmt.Errorf("enum %s index %d is outside its %d symbols", s.Name, i, len(s.Symbols))
		}
		return append(b, s.symbols[i]...), nil
	}
	return d.nested(b, s)
}

// nested decodes the types that hold values: record, array, map, union.
func (d *decoder) nested(b []byte, s *Schema) ([]byte, error) {
	if d.depth++; d.depth > MaxDepth {
		return b, fmt.Errorf("value nested deeper than %d levels", MaxDepth)
	}
	var err error
	switch s.Kind {
	case Record:
		b, err = d.record(b, s)
	case Array:
		b, err = d.array(b, s)
	case Map:
		b, err = d.mapValue(b, s)
	default:
		b, err = d.union(b, s)
	}
	d.depth--
	return b, err
}

func (d *decoder) record(b []byte, s *Schema) ([]byte, error) {
	if len(s.Fields) == 0 {
		return append(b, "{}"...), nil
	}
	for i := range s.Fields {
		f := &s.Fields[i]
		b = append(b, f.key...) // with the '{' or ',' before it
		var err error
		if b, err = d.value(b, f.Type); err != nil {
			return b, within(err, "."+f.Name)
		}
	}
	return append(b, '}'), nil
}

func (d *decoder) union(b []byte, s *Schema) ([]byte, error) {
	i, err := d.long()
	if err != nil {
		return b, err
	}
	if i < 0 || i >= int64(len(s.Branches)) {
		return b, fmt.Errorf("union branch %d is outside its %d branches", i, len(s.Branches))
	}
	br := s.Branches[i]
	if !d.opts.TaggedUnions || br.Kind == Null {
		return d.value(b, br)
	}
	b = append(b, '{')
	b = jsonw.String(b, BranchName(br))
	b = append(b, ':')
	if b, err = d.value(b, br); err != nil {
		return b, err
	}
	return append(b, '}'), nil
}

func (d *decoder) array(b []byte, s *Schema) ([]byte, error) {
	b = append(b, '[')
	n := 0
	for {
		count, err := d.blockCount(s.itemMin, "array block of %d items")
		if err != nil {
			return b, err
		}
		if count == 0 {
			return append(b, ']'), nil
		}
		if s.itemMin == 0 && count > maxZeroSizeItems-int64(n) {
			return b, fmt.Errorf("array of more than %d items that encode to no bytes", maxZeroSizeItems)
		}
		for range count {
			if n > 0 {
				b = append(b, ',')
			}
			if b, err = d.value(b, s.Items); err != nil {
				return b, within(err, "["+strconv.Itoa(n)+"]")
			}
			n++
		}
	}
}

func (d *decoder) mapValue(b []byte, s *Schema) ([]byte, error) {
	b = append(b, '{')
	n := 0
	for {
		count, err := d.blockCount(1, "map block of %d entries") // each key takes a byte at least
		if err != nil {
			return b, err
		}
		if count == 0 {
			return append(b, '}'), nil
		}
		for range count {
			if n > 0 {
				b = append(b, ',')
			}
			key, err := d.str()
			if err != nil {
				return b, within(err, "{key "+strconv.Itoa(n)+"}")
			}
			b = jsonw.String(b, key)
			b = append(b, ':')
			if b, err = d.value(b, s.Items); err != nil {
				return b, within(err, "["+strconv.Quote(key)+"]")
			}
			n++
		}
	}
}

// blockCount reads an array or map block's item count; a negative count is
// followed by the block's size in bytes, which is skipped. A count of
// items of at least minItem bytes each (0: no bound) that the bytes left
// cannot hold is an error, the block named by what (a format of the count).
func (d *decoder) blockCount(minItem int, what string) (int64, error) {
	count, err := d.long()
	if err != nil {
		return 0, err
	}
	if count < 0 {
		if count == math.MinInt64 {
			return 0, fmt.Errorf("block count %d is out of range", count)
		}
		count = -count
		if _, err := d.long(); err != nil {
			return 0, err
		}
	}
	if minItem > 0 && count > int64(len(d.buf)-d.pos)/int64(minItem) {
		return 0, fmt.Errorf(what+" is longer than the %d bytes left", count, len(d.buf)-d.pos)
	}
	return count, nil
}

func (d *decoder) blob(b []byte, s *Schema) ([]byte, error) {
	var v []byte
	if s.Kind == Fixed {
		if len(d.buf)-d.pos < s.Size {
			return b, errTruncated
		}
		v = d.buf[d.pos : d.pos+s.Size]
		d.pos += s.Size
	} else {
		var err error
		if v, err = d.bytes(); err != nil {
			return b, err
		}
	}
	switch {
	case s.Logical == Decimal && len(v) <= 8:
		return jsonw.DecimalInt64(b, smallTwosComplement(v), s.Scale), nil
	case s.Logical == Decimal:
		return jsonw.Decimal(b, twosComplement(v), s.Scale), nil
	case s.Kind == String:
		return appendString(b, v)
	case s.Logical == UUID:
		return appendUUID(b, v), nil
	}
	return jsonw.Base64(b, v), nil
}

// errNotUTF8 is a string's bytes that are not UTF-8.
var errNotUTF8 = errors.New("string is not valid UTF-8")

// appendString appends the Avro string v as a JSON string; v must be
// UTF-8. Plain ASCII (no byte to escape) is copied at once.
func appendString(b, v []byte) ([]byte, error) {
	for _, c := range v[jsonscan.PlainRun(v):] {
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			if !utf8.Valid(v) {
				return b, errNotUTF8
			}
			return jsonw.String(b, unsafe.String(unsafe.SliceData(v), len(v))), nil
		}
	}
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"'), nil
}

func (d *decoder) bytes() ([]byte, error) {
	n, err := d.long()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("negative length %d", n)
	}
	if n > int64(len(d.buf)-d.pos) {
		return nil, fmt.Errorf("length %d is longer than the %d bytes left", n, len(d.buf)-d.pos)
	}
	v := d.buf[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return v, nil
}

func (d *decoder) str() (string, error) {
	v, err := d.bytes()
	if err != nil {
		return "", err
	}
	if !utf8.Valid(v) {
		return "", errNotUTF8
	}
	return string(v), nil
}

// long reads a zig-zag varint of at most 10 bytes.
func (d *decoder) long() (int64, error) {
	var u uint64
	for shift := uint(0); ; shift += 7 {
		if d.pos >= len(d.buf) {
			return 0, errTruncated
		}
		c := d.buf[d.pos]
		d.pos++
		if shift == 63 && c > 1 {
			return 0, errors.New("varint overflows 64 bits")
		}
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return int64(u>>1) ^ -int64(u&1), nil
}

func (d *decoder) int() (int32, error) {
	v, err := d.long()
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("int %d is out of the 32-bit range", v)
	}
	return int32(v), nil
}

// twosComplement reads v as a big-endian two's-complement integer; empty
// is 0.
func twosComplement(v []byte) *big.Int {
	n := new(big.Int).SetBytes(v)
	if len(v) > 0 && v[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(v))))
	}
	return n
}

// smallTwosComplement is twosComplement of at most 8 bytes.
func smallTwosComplement(v []byte) int64 {
	var n int64
	if len(v) > 0 && v[0]&0x80 != 0 {
		n = -1
	}
	for _, c := range v {
		n = n<<8 | int64(c)
	}
	return n
}

func appendUUID(b, v []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i, c := range v {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&0xf])
	}
	return append(b, '"')
}

func appendInt(b []byte, s *Schema, v int32) ([]byte, error) {
	switch s.Logical {
	case Date:
		return jsonw.Date(b, time.Unix(int64(v)*86400, 0)), nil
	case TimeMillis:
		if v < 0 || v >= 86400_000 {
			return b, fmt.Errorf("time-millis %d is outside a day (0 to 86399999)", v)
		}
		return jsonw.TimeOfDay(b, int64(v)*1e6, 3), nil
	}
	return strconv.AppendInt(b, int64(v), 10), nil
}

func appendLong(b []byte, s *Schema, v int64) ([]byte, error) {
	switch s.Logical {
	case TimeMicros:
		if v < 0 || v >= 86400_000_000 {
			return b, fmt.Errorf("time-micros %d is outside a day (0 to 86399999999)", v)
		}
		return jsonw.TimeOfDay(b, v*1e3, 6), nil
	case TimestampMillis, LocalTimestampMillis:
		return appendTimestamp(b, v, 1e3, 3, s.Logical == TimestampMillis), nil
	case TimestampMicros, LocalTimestampMicros:
		return appendTimestamp(b, v, 1e6, 6, s.Logical == TimestampMicros), nil
	case TimestampNanos, LocalTimestampNanos:
		return appendTimestamp(b, v, 1e9, 9, s.Logical == TimestampNanos), nil
	}
	return strconv.AppendInt(b, v, 10), nil
}

// appendTimestamp appends the timestamp v units of 1/perSecond s (1e3,
// 1e6 or 1e9) after the Unix epoch with digits fraction digits.
func appendTimestamp(b []byte, v, perSecond int64, digits int, zone bool) []byte {
	var sec, frac int64
	switch perSecond { // constant divisors: no division instruction
	case 1e3:
		sec, frac = v/1e3, v%1e3
	case 1e6:
		sec, frac = v/1e6, v%1e6
	default:
		sec, frac = v/1e9, v%1e9
	}
	if frac < 0 {
		sec--
		frac += perSecond
	}
	return jsonw.TimestampUnix(b, sec, frac*(1e9/perSecond), digits, zone)
}
