// Package decode turns Confluent-framed record keys and values (magic byte
// 0, a 4-byte big-endian schema id, the payload) into exact JSON by the
// writer's schema from a Schema Registry: Avro, Protobuf, or JSON Schema
// (checked as JSON and passed through). It knows nothing of the runner: a
// Decoder is built from the plan's decode: section and asked, record by
// record, for a key's or a value's JSON.
//
// A record that cannot be decoded (no framing, a schema id the registry
// does not have, a payload that does not decode by its schema) is a
// *BadRecordError; any other error (the registry unreachable past the
// retry budget, refused credentials, a cancelled context) fails the run.
package decode

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replay-tool/replay/internal/decode/avro"
	"github.com/replay-tool/replay/internal/decode/protobuf"
	"github.com/replay-tool/replay/internal/decode/registry"
	"github.com/rs/zerolog"
)

// Format is how one side of a record (key or value) is decoded.
type Format string

// The formats of the plan's decode.key and decode.value.
const (
	// None keeps the bytes as they are: nothing is decoded.
	None Format = "none"
	// SchemaRegistry decodes by whatever type the framed schema id names.
	SchemaRegistry Format = "schema_registry"
	// Avro, Protobuf and JSONSchema decode that type and refuse (as a bad
	// record) a schema id of another type.
	Avro       Format = "avro"
	Protobuf   Format = "protobuf"
	JSONSchema Format = "json_schema"
)

// Formats lists every Format, in the order the docs give them.
var Formats = []Format{None, SchemaRegistry, Avro, Protobuf, JSONSchema}

// The registry's names of the schema types.
const (
	TypeAvro     = "AVRO"
	TypeProtobuf = "PROTOBUF"
	TypeJSON     = "JSON"
)

// Side is the part of a record being decoded.
type Side uint8

const (
	// Value is the record's value.
	Value Side = iota
	// Key is the record's key.
	Key
)

// String returns "value" or "key".
func (s Side) String() string {
	if s == Key {
		return "key"
	}
	return "value"
}

// RegistryConfig says how to reach the Schema Registry.
type RegistryConfig = registry.Config

// Config is the plan's decode: section.
type Config struct {
	Value, Key Format
	Registry   RegistryConfig
	// AvroUnions is "bare" (default: a union renders as its branch's value)
	// or "tagged" (Avro's JSON encoding: {"string": "a"}).
	AvroUnions string
}

// Options are the decoder's dependencies.
type Options struct {
	// RetryBudget is how long a registry request may keep failing
	// transiently (timeouts, 5xx, 429) before the run fails: the plan's
	// retry.max_elapsed.
	RetryBudget time.Duration
	BudgetName  string // registry.Options.BudgetName
	Logger      zerolog.Logger
	// HTTPClient sends the registry requests; nil builds one from
	// Config.Registry's TLS files with registry.DefaultTimeout.
	HTTPClient *http.Client
}

// Decoded is one side of a record, decoded.
type Decoded struct {
	// JSON is the decoded value, one line of JSON.
	JSON []byte
	// SchemaID is the id the framing named.
	SchemaID int32
	// Clean reports that JSON was written by replay's own writer (an Avro
	// or a Protobuf schema): one JSON document, valid UTF-8, with U+2028
	// and U+2029 escaped. A JSON Schema payload is the producer's JSON,
	// compacted, and not Clean.
	Clean bool
}

// NoSchemaID is BadRecordError.SchemaID when the bytes have no framing.
const NoSchemaID int32 = -1

// BadRecordError is a key or value that cannot be decoded: a bad record
// for the plan's on_error, not a failure of the run.
type BadRecordError struct {
	Side Side
	// SchemaID is the framed schema id; NoSchemaID without framing.
	SchemaID int32
	Reason   string
}

func (e *BadRecordError) Error() string {
	if e.SchemaID == NoSchemaID {
		return fmt.Sprintf("decode %s: %s", e.Side, e.Reason)
	}
	return fmt.Sprintf("decode %s (schema id %d): %s", e.Side, e.SchemaID, e.Reason)
}

// SchemaInfo describes a schema id for review output.
type SchemaInfo struct {
	ID int32
	// Subject and Version are the first subject's version that holds the
	// id ("" and 0 offline).
	Subject string
	Version int
	// Type is AVRO, PROTOBUF or JSON.
	Type string
	// Deleted says that Subject's Version was soft-deleted since: the
	// registry lists no version that holds the id otherwise.
	Deleted bool
}

// source is where schemas come from: the registry, or a directory.
type source interface {
	SchemaByID(ctx context.Context, id int32) (registry.Schema, error)
	SchemaByVersion(ctx context.Context, subject string, version int) (registry.SubjectSchema, error)
	VersionsByID(ctx context.Context, id int32, deleted bool) ([]registry.SubjectVersion, error)
	Check(ctx context.Context) error
}

// Decoder decodes framed keys and values. It is safe for concurrent use:
// each schema id is fetched and compiled once, by the first record that
// names it, while the others naming it wait.
type Decoder struct {
	cfg  Config
	src  source
	log  zerolog.Logger
	opts avro.Options

	mu    sync.Mutex
	cache map[int32]*entry
	// ready holds the schemas compiled so far, by id: a copy replaced
	// (under mu) as one is added, so that a record's lookup takes no lock.
	ready atomic.Pointer[map[int32]*compiled]
}

// entry is one schema id's fetch: done closes when s or err is set.
type entry struct {
	done chan struct{}
	s    *compiled
	err  error
}

// compiled is a schema ready to decode with.
type compiled struct {
	typ   string
	avro  *avro.Schema
	proto *protobuf.Schema
	// decoded counts the values ([Value]) and keys ([Key]) decoded by
	// the schema (Counts).
	decoded [2]atomic.Int64
	columnsCache
}

// schemaError is a schema id that cannot decode any record: unknown to the
// registry, or a schema that does not parse. It is kept (a negative cache)
// and each record naming the id is a bad record.
type schemaError struct{ reason string }

func (e *schemaError) Error() string { return e.reason }

// New returns a Decoder for cfg, reaching the registry over HTTP. It does
// not connect: Check does.
func New(cfg Config, opts Options) (*Decoder, error) {
	c, err := registry.New(cfg.Registry, registry.Options{RetryBudget: opts.RetryBudget, BudgetName: opts.BudgetName, HTTPClient: opts.HTTPClient, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	return newDecoder(cfg, c, opts.Logger), nil
}

func newDecoder(cfg Config, src source, log zerolog.Logger) *Decoder {
	cfg.Value, cfg.Key = cmp.Or(cfg.Value, None), cmp.Or(cfg.Key, None)
	return &Decoder{cfg: cfg, src: src, log: log, opts: avro.Options{TaggedUnions: cfg.AvroUnions == "tagged"}, cache: map[int32]*entry{}}
}

// Decodes reports whether side is decoded (its Format is not None).
func (d *Decoder) Decodes(side Side) bool { return d.format(side) != None }

func (d *Decoder) format(side Side) Format {
	if side == Key {
		return d.cfg.Key
	}
	return d.cfg.Value
}

// Check reaches the registry once: a wrong URL or refused credentials fail
// here, before any record is read.
func (d *Decoder) Check(ctx context.Context) error {
	err := d.src.Check(ctx)
	switch {
	case err == nil:
		return nil
	case strings.HasPrefix(err.Error(), "schema registry: "): // a budget spent says so already
		return fmt.Errorf("decode: %w", err)
	}
	return fmt.Errorf("decode: schema registry: %w", err)
}

// Decode decodes b, one side of a record, to JSON. b must not be nil (a
// tombstone or a missing key is not decoded). A key or value that cannot
// be decoded is a *BadRecordError; another error fails the run.
func (d *Decoder) Decode(ctx context.Context, side Side, b []byte) (Decoded, error) {
	return d.AppendDecode(ctx, side, make([]byte, 0, 2*len(b)+64), b)
}

// AppendDecode is Decode appending the JSON to dst: Decoded.JSON is dst
// extended by it (a new array when dst's capacity did not hold it). It
// lets a caller decode record after record into one buffer it owns.
func (d *Decoder) AppendDecode(ctx context.Context, side Side, dst, b []byte) (Decoded, error) {
	id, c, err := d.framed(ctx, side, b)
	if err != nil {
		return Decoded{}, err
	}
	if want := wantType(d.format(side)); want != "" && want != c.typ {
		return Decoded{}, &BadRecordError{Side: side, SchemaID: id, Reason: fmt.Sprintf("the schema is %s, and decode.%s: %s decodes only %s schemas (schema_registry decodes any type)", c.typ, side, d.format(side), want)}
	}
	out, err := c.decode(dst, b[5:], d.opts)
	if err != nil {
		return Decoded{}, &BadRecordError{Side: side, SchemaID: id, Reason: err.Error()}
	}
	c.decoded[side].Add(1)
	return Decoded{JSON: out, SchemaID: id, Clean: c.typ != TypeJSON}, nil
}

// framed returns the schema id of b's framing and its compiled schema: a
// *BadRecordError when b is not framed or the id cannot decode anything.
func (d *Decoder) framed(ctx context.Context, side Side, b []byte) (int32, *compiled, error) {
	if len(b) < 5 || b[0] != 0 {
		return NoSchemaID, nil, &BadRecordError{Side: side, SchemaID: NoSchemaID, Reason: framingReason(side, b)}
	}
	id := FramedID(b)
	c, err := d.schema(ctx, id)
	if err != nil {
		if se := (*schemaError)(nil); errors.As(err, &se) {
			return id, nil, &BadRecordError{Side: side, SchemaID: id, Reason: se.reason}
		}
		return id, nil, fmt.Errorf("decode %s: schema id %d: %w", side, id, err)
	}
	return id, c, nil
}

// FramedID returns the schema id of b in the Confluent wire format (magic
// byte 0, the 4-byte big-endian id); -1 when b is not framed (nil, shorter
// than the header, or another first byte).
func FramedID(b []byte) int32 {
	if len(b) < 5 || b[0] != 0 {
		return -1
	}
	return int32(binary.BigEndian.Uint32(b[1:5]))
}

func framingReason(side Side, b []byte) string {
	if len(b) > 0 && b[0] != 0 {
		return fmt.Sprintf("not in the Confluent wire format (first byte 0x%02x, not the magic byte 0): the bytes were not written by a Schema Registry serializer; decode.%s: none keeps them as they are", b[0], side)
	}
	return fmt.Sprintf("not in the Confluent wire format: %d bytes, shorter than the 5 of its header (magic byte 0, 4-byte schema id)", len(b))
}

func wantType(f Format) string {
	switch f {
	case Avro:
		return TypeAvro
	case Protobuf:
		return TypeProtobuf
	case JSONSchema:
		return TypeJSON
	}
	return ""
}

// Describe returns what the registry says of id, for review output.
func (d *Decoder) Describe(ctx context.Context, id int32) (SchemaInfo, error) {
	info := SchemaInfo{ID: id}
	c, err := d.schema(ctx, id)
	if err != nil {
		return info, fmt.Errorf("schema id %d: %w", id, err)
	}
	info.Type = c.typ
	vs, err := d.src.VersionsByID(ctx, id, false)
	if err == nil && len(vs) == 0 {
		vs, err = d.src.VersionsByID(ctx, id, true)
		info.Deleted = len(vs) > 0
	}
	if err != nil {
		return info, fmt.Errorf("schema id %d: subjects: %w", id, err)
	}
	if len(vs) > 0 {
		info.Subject, info.Version = vs[0].Subject, vs[0].Version
	}
	return info, nil
}
