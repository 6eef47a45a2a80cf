package decode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/replay-tool/replay/internal/decode/avro"
	"github.com/replay-tool/replay/internal/decode/protobuf"
	"github.com/replay-tool/replay/internal/decode/registry"
)

// schema returns id's compiled schema, fetching it once: the first caller
// fetches while the others wait for its result (one request in flight per
// id). A *schemaError (404, a schema that does not parse) is kept for the
// run; any other failure is forgotten so that a later record tries again.
func (d *Decoder) schema(ctx context.Context, id int32) (*compiled, error) {
	if m := d.ready.Load(); m != nil {
		if c, ok := (*m)[id]; ok {
			return c, nil
		}
	}
	d.mu.Lock()
	e, ok := d.cache[id]
	if ok {
		d.mu.Unlock()
		select {
		case <-e.done:
			return e.s, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e = &entry{done: make(chan struct{})}
	d.cache[id] = e
	d.mu.Unlock()

	e.s, e.err = d.load(ctx, id)
	var se *schemaError
	switch {
	case e.err == nil:
		d.publish(id, e.s)
	case !errors.As(e.err, &se):
		d.mu.Lock()
		delete(d.cache, id)
		d.mu.Unlock()
	}
	close(e.done)
	return e.s, e.err
}

// publish adds c, id's compiled schema, to the lock-free read path.
func (d *Decoder) publish(id int32, c *compiled) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := map[int32]*compiled{id: c}
	if old := d.ready.Load(); old != nil {
		maps.Copy(m, *old)
	}
	d.ready.Store(&m)
}

func (d *Decoder) load(ctx context.Context, id int32) (*compiled, error) {
	s, err := d.src.SchemaByID(ctx, id)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, &schemaError{fmt.Sprintf("schema id %d is not in the schema registry (HTTP 404): a schema deleted since, or a registry other than the one the producer wrote to", id)}
	}
	if err != nil {
		return nil, err // a *schemaError offline, kept; else the run's failure
	}
	c := &compiled{typ: s.Type}
	switch s.Type {
	case TypeAvro:
		names := avro.Names{}
		if err := d.avroRefs(ctx, s.References, names, map[string]bool{}); err != nil {
			return nil, err
		}
		sch, warnings, err := avro.Parse(s.Schema, names)
		if err != nil {
			return nil, &schemaError{fmt.Sprintf("schema id %d does not parse: %v", id, err)}
		}
		if !d.opts.TaggedUnions {
			for _, w := range warnings {
				d.log.Warn().Int32("schema_id", id).Msg(w)
			}
		}
		c.avro = sch
	case TypeProtobuf:
		files := map[string]string{}
		if err := d.protoRefs(ctx, s.References, files); err != nil {
			return nil, err
		}
		sch, err := protobuf.Compile(ctx, s.Schema, files)
		if err != nil {
			return nil, &schemaError{fmt.Sprintf("schema id %d: %v", id, err)}
		}
		c.proto = sch
	case TypeJSON:
	default:
		return nil, &schemaError{fmt.Sprintf("schema id %d has type %q, which replay does not decode (AVRO, PROTOBUF, JSON)", id, s.Type)}
	}
	return c, nil
}

// reference fetches a schema's reference; one the registry does not have
// is a *schemaError.
func (d *Decoder) reference(ctx context.Context, ref registry.Reference) (registry.SubjectSchema, error) {
	ss, err := d.src.SchemaByVersion(ctx, ref.Subject, ref.Version)
	if errors.Is(err, registry.ErrNotFound) {
		return ss, &schemaError{fmt.Sprintf("the schema's reference %q (subject %q version %d) is not in the schema registry", ref.Name, ref.Subject, ref.Version)}
	}
	return ss, err
}

// avroRefs parses refs (their own references first) into names.
func (d *Decoder) avroRefs(ctx context.Context, refs []registry.Reference, names avro.Names, seen map[string]bool) error {
	for _, ref := range refs {
		k := fmt.Sprintf("%s/%d", ref.Subject, ref.Version)
		if seen[k] {
			continue
		}
		seen[k] = true
		ss, err := d.reference(ctx, ref)
		if err != nil {
			return err
		}
		if err := d.avroRefs(ctx, ss.References, names, seen); err != nil {
			return err
		}
		if _, _, err := avro.Parse(ss.Schema.Schema, names); err != nil {
			return &schemaError{fmt.Sprintf("the schema's reference %q (subject %q version %d) does not parse: %v", ref.Name, ref.Subject, ref.Version, err)}
		}
	}
	return nil
}

// protoRefs gathers refs (and theirs) as import path -> .proto source.
func (d *Decoder) protoRefs(ctx context.Context, refs []registry.Reference, files map[string]string) error {
	for _, ref := range refs {
		if _, ok := files[ref.Name]; ok {
			continue
		}
		ss, err := d.reference(ctx, ref)
		if err != nil {
			return err
		}
		files[ref.Name] = ss.Schema.Schema
		if err := d.protoRefs(ctx, ss.References, files); err != nil {
			return err
		}
	}
	return nil
}

// decode decodes payload, the bytes after the framing's header, appending
// the JSON to dst.
func (c *compiled) decode(dst, payload []byte, opts avro.Options) ([]byte, error) {
	switch c.typ {
	case TypeAvro:
		return avro.AppendJSON(dst, c.avro, payload, opts)
	case TypeProtobuf:
		idx, rest, err := protobuf.ReadIndexes(payload)
		if err != nil {
			return nil, err
		}
		md, err := c.proto.Message(idx)
		if err != nil {
			return nil, err
		}
		return c.proto.AppendJSON(dst, md, rest)
	}
	// JSON Schema: the payload is JSON, checked and made one line; the
	// schema does not validate it.
	out := bytes.NewBuffer(dst)
	if err := json.Compact(out, payload); err != nil {
		return nil, fmt.Errorf("payload is not JSON: %v", err)
	}
	return out.Bytes(), nil
}
