// Package protobuf decodes Protobuf payloads to JSON by the writer's .proto
// schema, compiled from source with protocompile: field names as in the
// .proto, every field emitted (at its default value too), 64-bit integers
// as JSON integers, the well-known types as docs/decoding.md lays out.
package protobuf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Schema is a compiled .proto file, with the files it imports.
type Schema struct {
	File     protoreflect.FileDescriptor
	resolver linker.Resolver
}

// Compile compiles the .proto source main, importing from files (import
// path -> source), from the standard imports (google/protobuf/*.proto)
// and from the files Confluent's serializers import without a reference
// (confluent/meta.proto, confluent/type/decimal.proto, google/type/date,
// timeofday, money, latlng, dayofweek and month).
// An error quotes the compiler's first complaints.
func Compile(ctx context.Context, main string, files map[string]string) (*Schema, error) {
	const mainPath = "<schema>.proto"
	srcs := maps.Clone(builtins)
	srcs[mainPath] = main
	maps.Copy(srcs, files) // a reference replaces a built-in
	var errs []error
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(srcs)}),
		Reporter: reporter.NewReporter(func(err reporter.ErrorWithPos) error {
			if errs = append(errs, err); len(errs) >= 3 {
				return err
			}
			return nil
		}, nil),
	}
	fds, err := c.Compile(ctx, mainPath)
	if err != nil {
		if len(errs) > 0 {
			err = errors.Join(errs...)
		}
		return nil, fmt.Errorf("protobuf schema does not compile: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return &Schema{File: fds[0], resolver: linker.ResolverFromFile(fds[0])}, nil
}

// ReadIndexes reads the message-index array that starts a Confluent-framed
// Protobuf payload: a zig-zag varint count, then as many zig-zag varint
// indexes (the first into the file's top-level messages, each next into
// the previous one's nested messages). A count of 0 stands for [0]. It
// returns the indexes and the rest of b, the message's bytes.
func ReadIndexes(b []byte) ([]int, []byte, error) {
	count, n := binary.Varint(b)
	if n <= 0 {
		return nil, nil, errors.New("message-index array: truncated count")
	}
	b = b[n:]
	switch {
	case count < 0:
		return nil, nil, fmt.Errorf("message-index array: negative count %d", count)
	case count == 0:
		return []int{0}, b, nil
	case count > int64(len(b)):
		return nil, nil, fmt.Errorf("message-index array: count %d is more than the %d bytes left (truncated)", count, len(b))
	}
	idx := make([]int, count)
	for i := range idx {
		v, n := binary.Varint(b)
		if n <= 0 {
			return nil, nil, fmt.Errorf("message-index array: index %d of %d is truncated", i, count)
		}
		if v < 0 || v > 1<<31 {
			return nil, nil, fmt.Errorf("message-index array: index %d is %d, out of range", i, v)
		}
		idx[i] = int(v)
		b = b[n:]
	}
	return idx, b, nil
}

// Message returns the message the indexes name in s.
func (s *Schema) Message(idx []int) (protoreflect.MessageDescriptor, error) {
	msgs := s.File.Messages()
	var md protoreflect.MessageDescriptor
	for depth, i := range idx {
		if i >= msgs.Len() {
			where := "the file"
			if md != nil {
				where = string(md.FullName())
			}
			return nil, fmt.Errorf("message-index array %v: index %d at depth %d is out of range (%s has %d messages)", idx, i, depth, where, msgs.Len())
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	return md, nil
}
