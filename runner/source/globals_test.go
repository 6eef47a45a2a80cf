package source

import (
	"bytes"
	"encoding/binary"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Importing the package (this test binary does) leaves kafka-go's
// process-wide tables as kafka-go sets them: each compression codec is
// kafka-go's own, and a Fetch response sent through any kafka-go transport
// decodes to kafka-go's fetch.Response.
func TestKafkaGoGlobalsAreKafkaGos(t *testing.T) {
	for c, want := range map[compress.Compression]compress.Codec{
		compress.Gzip: &compress.GzipCodec, compress.Snappy: &compress.SnappyCodec,
		compress.Lz4: &compress.Lz4Codec, compress.Zstd: &compress.ZstdCodec,
	} {
		if got := c.Codec(); got != want {
			t.Errorf("kafka-go's %s codec is %T, not kafka-go's own", c, got)
		}
	}

	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 11
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "orders"
	rp := kmsg.NewFetchResponseTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	body := resp.AppendTo(binary.BigEndian.AppendUint32(nil, 7)) // correlation id, then the body
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	_, m, err := protocol.ReadResponse(bytes.NewReader(frame), protocol.Fetch, 11)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := m.(*fetch.Response); !ok || len(r.Topics) != 1 || r.Topics[0].Topic != "orders" {
		t.Errorf("kafka-go decodes a Fetch response to %T %+v, want its own *fetch.Response", m, m)
	}
}

// No file of the package or of its wire package has an init function: a
// package that only reads has nothing to set up at import.
func TestNoInit(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	wire, _ := filepath.Glob(filepath.Join("wire", "*.go"))
	if len(files) == 0 || len(wire) == 0 {
		t.Fatalf("no source files found (%d, %d)", len(files), len(wire))
	}
	for _, name := range append(files, wire...) {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				t.Errorf("%s has an init function", name)
			}
		}
	}
}
