package decode

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/replay-tool/replay/internal/decode/protobuf"
	"github.com/replay-tool/replay/internal/decode/registry"
	"github.com/rs/zerolog"
)

// NewOffline returns a Decoder reading schemas from dir instead of a
// registry, for framed test fixtures: <id>.avsc (Avro; the named types it
// uses from other schemas are read from <full name>.avsc), <id>.proto
// (Protobuf; its imports are read from dir by their import path) or
// <id>.json (JSON Schema). cfg's Registry is not used. An id without a
// file is a bad record, as an id the registry does not have; an id with
// two files (1.avsc and 1.proto) is refused, naming them.
func NewOffline(dir string, cfg Config, log zerolog.Logger) (*Decoder, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("schemas directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("schemas directory %s is not a directory", dir)
	}
	if err := checkOneFilePerID(dir); err != nil {
		return nil, err
	}
	return newDecoder(cfg, offline{dir: dir}, log), nil
}

// checkOneFilePerID refuses a directory holding two schema files for one
// id (1.avsc and 1.proto): which one the records were written with is not
// for the reader to guess.
func checkOneFilePerID(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("schemas directory: %w", err)
	}
	files := map[int64][]string{}
	for _, e := range entries {
		for _, et := range extTypes {
			base, ok := strings.CutSuffix(e.Name(), et.ext)
			id, err := strconv.ParseInt(base, 10, 32)
			if !ok || err != nil || strconv.FormatInt(id, 10) != base {
				continue // not a file SchemaByID reads
			}
			files[id] = append(files[id], filepath.Join(dir, e.Name()))
		}
	}
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(files)) {
		if fs := files[id]; len(fs) > 1 {
			errs = append(errs, fmt.Errorf("schema id %d has %d schema files: %s; keep the one its records were written with and move the others out of %s",
				id, len(fs), strings.Join(fs, " and "), dir))
		}
	}
	return errors.Join(errs...)
}

// offline is a source reading dir.
type offline struct{ dir string }

var extTypes = []struct{ ext, typ string }{{".avsc", TypeAvro}, {".proto", TypeProtobuf}, {".json", TypeJSON}}

func (o offline) SchemaByID(_ context.Context, id int32) (registry.Schema, error) {
	for _, et := range extTypes {
		text, err := os.ReadFile(filepath.Join(o.dir, strconv.Itoa(int(id))+et.ext))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return registry.Schema{}, err
		}
		return o.schema(strconv.Itoa(int(id))+et.ext, string(text), et.typ), nil
	}
	return registry.Schema{}, &schemaError{fmt.Sprintf("schema id %d has no schema in %s (%d.avsc, %d.proto or %d.json)", id, o.dir, id, id, id)}
}

// imports lists the imports of a .proto source that are not built in as references
// to files of dir (subject: the import path).
func (o offline) imports(text string) []registry.Reference {
	var refs []registry.Reference
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "import ") {
			continue
		}
		q1, q2 := strings.IndexByte(line, '"'), strings.LastIndexByte(line, '"')
		if q1 < 0 || q2 <= q1 {
			continue
		}
		path := line[q1+1 : q2]
		if protobuf.Builtin(path) {
			continue
		}
		refs = append(refs, registry.Reference{Name: path, Subject: path, Version: 1})
	}
	return refs
}

func (o offline) SchemaByVersion(_ context.Context, subject string, _ int) (registry.SubjectSchema, error) {
	text, err := os.ReadFile(filepath.Join(o.dir, filepath.FromSlash(subject)))
	if errors.Is(err, os.ErrNotExist) {
		return registry.SubjectSchema{}, &registry.StatusError{URL: filepath.Join(o.dir, subject), Status: 404, Message: "no such file"}
	}
	if err != nil {
		return registry.SubjectSchema{}, err
	}
	typ := TypeProtobuf
	if strings.HasSuffix(subject, ".avsc") {
		typ = TypeAvro
	}
	return registry.SubjectSchema{Subject: subject, Version: 1, Schema: o.schema(subject, string(text), typ)}, nil
}

// schema is the schema of file name in dir with its references: a .proto
// source's imports, or the Avro named types it uses that other files of
// dir define, each in <full name>.avsc (shop.Money.avsc for "shop.Money").
func (o offline) schema(name, text, typ string) registry.Schema {
	s := registry.Schema{Schema: text, Type: typ}
	switch typ {
	case TypeProtobuf:
		s.References = o.imports(text)
	case TypeAvro:
		files, _ := filepath.Glob(filepath.Join(o.dir, "*.avsc"))
		for _, f := range files {
			file := filepath.Base(f)
			full := strings.TrimSuffix(file, ".avsc")
			if _, err := strconv.Atoi(full); err == nil || file == name || !strings.Contains(text, strconv.Quote(full)) {
				continue // a schema id's own file, this one, or a type it does not name
			}
			s.References = append(s.References, registry.Reference{Name: full, Subject: file, Version: 1})
		}
	}
	return s
}

func (offline) VersionsByID(context.Context, int32, bool) ([]registry.SubjectVersion, error) {
	return nil, nil
}

func (offline) Check(context.Context) error { return nil }
