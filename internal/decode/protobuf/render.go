package protobuf

import (
	"cmp"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/replay-tool/replay/internal/decode/jsonw"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// AppendJSON decodes payload, one message of type md in Protobuf's binary
// encoding (the Confluent message-index array already read), and appends
// it to b as JSON. A payload that does not parse, or holds fields the
// schema does not define (the writer's schema defines every field it
// writes), is an error; b's extension is then garbage.
func (s *Schema) AppendJSON(b []byte, md protoreflect.MessageDescriptor, payload []byte) ([]byte, error) {
	m, err := unmarshal(md, payload)
	if err != nil {
		return b, fmt.Errorf("payload does not parse as %s: %w", md.FullName(), err)
	}
	r := renderer{s: s}
	return r.message(b, m)
}

// unmarshal parses payload as a message of type md. A panic of the
// protobuf runtime on malformed input (a map entry whose key has another
// wire type panics in google.golang.org/protobuf v1.36's dynamic-message
// path) is that payload's error: bytes from a topic never crash the run.
func unmarshal(md protoreflect.MessageDescriptor, payload []byte) (m *dynamicpb.Message, err error) {
	defer func() {
		if p := recover(); p != nil {
			m, err = nil, fmt.Errorf("malformed payload (%v)", p)
		}
	}()
	m = dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{RecursionLimit: 1000}).Unmarshal(payload, m); err != nil {
		return nil, err
	}
	return m, nil
}

type renderer struct {
	s *Schema
}

func (r renderer) message(b []byte, m protoreflect.Message) ([]byte, error) {
	md := m.Descriptor()
	if len(m.GetUnknown()) > 0 {
		return b, fmt.Errorf("%s holds fields its schema does not define", md.FullName())
	}
	if wkt := wellKnown(md.FullName()); wkt != nil {
		return wkt(r, b, m)
	}
	b = append(b, '{')
	first := true
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() && !m.Has(fd) {
			continue // a oneof shows the member that is set
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = jsonw.String(b, string(fd.Name()))
		b = append(b, ':')
		var err error
		if b, err = r.field(b, m, fd); err != nil {
			return b, fmt.Errorf("%s: %w", fd.Name(), err)
		}
	}
	return append(b, '}'), nil
}

func (r renderer) field(b []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor) ([]byte, error) {
	switch {
	case fd.IsMap():
		return r.mapField(b, m.Get(fd).Map(), fd)
	case fd.IsList():
		l := m.Get(fd).List()
		b = append(b, '[')
		for i := range l.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = r.single(b, fd, l.Get(i)); err != nil {
				return b, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return append(b, ']'), nil
	case fd.HasPresence() && !m.Has(fd):
		return append(b, "null"...), nil
	}
	return r.single(b, fd, m.Get(fd))
}

func (r renderer) mapField(b []byte, mp protoreflect.Map, fd protoreflect.FieldDescriptor) ([]byte, error) {
	keys := make([]protoreflect.MapKey, 0, mp.Len())
	mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	slices.SortFunc(keys, compareKeys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		ks := k.String()
		if fd.MapKey().Kind() == protoreflect.StringKind && !utf8.ValidString(ks) {
			return b, errors.New("map key is not valid UTF-8")
		}
		b = jsonw.String(b, ks)
		b = append(b, ':')
		var err error
		if b, err = r.single(b, fd.MapValue(), mp.Get(k)); err != nil {
			return b, fmt.Errorf("[%q]: %w", ks, err)
		}
	}
	return append(b, '}'), nil
}

// compareKeys orders map keys: numbers by value, strings by bytes, false
// before true; the JSON of a map is deterministic.
func compareKeys(a, b protoreflect.MapKey) int {
	switch x := a.Interface().(type) {
	case bool:
		y := b.Bool()
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case int32, int64:
		return cmp.Compare(a.Int(), b.Int())
	case uint32, uint64:
		return cmp.Compare(a.Uint(), b.Uint())
	}
	return strings.Compare(a.String(), b.String())
}

// single renders one value of fd's type (an item of a list or a map).
func (r renderer) single(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) ([]byte, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v.Bool()), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(b, v.Int(), 10), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(b, v.Uint(), 10), nil
	case protoreflect.FloatKind:
		return jsonw.Float(b, v.Float(), 32), nil
	case protoreflect.DoubleKind:
		return jsonw.Float(b, v.Float(), 64), nil
	case protoreflect.StringKind:
		if !utf8.ValidString(v.String()) {
			return b, errors.New("string is not valid UTF-8")
		}
		return jsonw.String(b, v.String()), nil
	case protoreflect.BytesKind:
		return jsonw.Base64(b, v.Bytes()), nil
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return jsonw.String(b, string(ev.Name())), nil
		}
		return strconv.AppendInt(b, int64(v.Enum()), 10), nil
	}
	return r.message(b, v.Message())
}

type wktFunc func(renderer, []byte, protoreflect.Message) ([]byte, error)

// wellKnown returns the renderer of a well-known type that JSON has a form
// for; nil for any other message.
func wellKnown(name protoreflect.FullName) wktFunc {
	switch name {
	case "google.protobuf.Timestamp":
		return timestamp
	case "google.protobuf.Duration":
		return duration
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
		"google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
		"google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		return wrapper
	case "google.protobuf.Struct":
		return structValue
	case "google.protobuf.Value":
		return value
	case "google.protobuf.ListValue":
		return listValue
	case "google.protobuf.FieldMask":
		return fieldMask
	case "google.protobuf.Any":
		return anyValue
	case "confluent.type.Decimal":
		return confluentDecimal
	}
	return nil
}

func fieldOf(m protoreflect.Message, name protoreflect.Name) protoreflect.FieldDescriptor {
	return m.Descriptor().Fields().ByName(name)
}

func timestamp(_ renderer, b []byte, m protoreflect.Message) ([]byte, error) {
	sec, nanos := m.Get(fieldOf(m, "seconds")).Int(), m.Get(fieldOf(m, "nanos")).Int()
	if nanos < 0 || nanos >= 1e9 {
		return b, fmt.Errorf("google.protobuf.Timestamp nanos %d is outside 0 to 999999999", nanos)
	}
	return jsonw.Timestamp(b, time.Unix(sec, nanos), 9, true), nil
}

func duration(_ renderer, b []byte, m protoreflect.Message) ([]byte, error) {
	sec, nanos := m.Get(fieldOf(m, "seconds")).Int(), m.Get(fieldOf(m, "nanos")).Int()
	if nanos <= -1e9 || nanos >= 1e9 || sec > 0 && nanos < 0 || sec < 0 && nanos > 0 {
		return b, fmt.Errorf("google.protobuf.Duration %ds %dns: nanos out of range or of the other sign", sec, nanos)
	}
	b = append(b, '"')
	if sec < 0 || nanos < 0 {
		b = append(b, '-')
	}
	b = strconv.AppendUint(b, absU(sec), 10)
	if nanos != 0 {
		frac := fmt.Sprintf("%09d", absU(nanos))
		for strings.HasSuffix(frac, "000") {
			frac = frac[:len(frac)-3]
		}
		b = append(append(b, '.'), frac...)
	}
	return append(b, `s"`...), nil
}

func absU(v int64) uint64 {
	if v < 0 {
		return uint64(-v)
	}
	return uint64(v)
}

func wrapper(r renderer, b []byte, m protoreflect.Message) ([]byte, error) {
	fd := fieldOf(m, "value")
	return r.single(b, fd, m.Get(fd))
}

func structValue(r renderer, b []byte, m protoreflect.Message) ([]byte, error) {
	return r.mapField(b, m.Get(fieldOf(m, "fields")).Map(), fieldOf(m, "fields"))
}

func listValue(r renderer, b []byte, m protoreflect.Message) ([]byte, error) {
	return r.field(b, m, fieldOf(m, "values"))
}

func value(r renderer, b []byte, m protoreflect.Message) ([]byte, error) {
	fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("kind"))
	if fd == nil || fd.Name() == "null_value" {
		return append(b, "null"...), nil
	}
	return r.single(b, fd, m.Get(fd))
}

func fieldMask(_ renderer, b []byte, m protoreflect.Message) ([]byte, error) {
	l := m.Get(fieldOf(m, "paths")).List()
	paths := make([]string, l.Len())
	for i := range paths {
		paths[i] = l.Get(i).String()
	}
	return jsonw.String(b, strings.Join(paths, ",")), nil
}

// confluentDecimal renders a confluent.type.Decimal (value: the unscaled
// integer in big-endian two's complement) as a JSON number with its scale
// kept (12.30); a negative scale multiplies by a power of ten.
func confluentDecimal(_ renderer, b []byte, m protoreflect.Message) ([]byte, error) {
	v := m.Get(fieldOf(m, "value")).Bytes()
	scale := m.Get(fieldOf(m, "scale")).Int()
	if scale < -1000 || scale > 1000 {
		return b, fmt.Errorf("confluent.type.Decimal scale %d is out of range", scale)
	}
	n := new(big.Int).SetBytes(v)
	if len(v) > 0 && v[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(v))))
	}
	if scale < 0 {
		n.Mul(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(-scale), nil))
		scale = 0
	}
	return jsonw.Decimal(b, n, int(scale)), nil
}

// anyValue renders an Any whose type the schema's files define as that
// message with "@type" first; another as {"@type": url, "value": base64}.
func anyValue(r renderer, b []byte, m protoreflect.Message) ([]byte, error) {
	url := m.Get(fieldOf(m, "type_url")).String()
	raw := m.Get(fieldOf(m, "value")).Bytes()
	b = append(b, `{"@type":`...)
	b = jsonw.String(b, url)
	name := url[strings.LastIndexByte(url, '/')+1:]
	d, err := r.s.resolver.FindDescriptorByName(protoreflect.FullName(name))
	md, ok := d.(protoreflect.MessageDescriptor)
	if err != nil || !ok {
		b = append(b, `,"value":`...)
		return append(jsonw.Base64(b, raw), '}'), nil
	}
	inner, err := unmarshal(md, raw)
	if err != nil {
		return b, fmt.Errorf("google.protobuf.Any of %s does not parse: %w", name, err)
	}
	body, err := r.message(nil, inner)
	if err != nil {
		return b, err
	}
	if wellKnown(md.FullName()) != nil || len(body) <= 2 || body[0] != '{' {
		b = append(b, `,"value":`...)
		return append(append(b, body...), '}'), nil
	}
	b = append(b, ',')
	return append(b, body[1:]...), nil
}
