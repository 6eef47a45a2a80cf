package main

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `replay test --schemas DIR` decodes framed fixture values by the
// schemas of DIR before the filter and the key template; a value without
// the framing or with an unknown id is an error naming why.
func TestTestCommandDecodes(t *testing.T) {
	schemas := t.TempDir()
	avsc := `{"type":"record","name":"O","fields":[{"name":"id","type":"long"},{"name":"status","type":"string"}]}`
	if err := os.WriteFile(filepath.Join(schemas, "11.avsc"), []byte(avsc), 0o644); err != nil {
		t.Fatal(err)
	}
	framed := func(id uint32, orderID int64, status string) string {
		b := binary.BigEndian.AppendUint32([]byte{0}, id)
		b = binary.AppendVarint(b, orderID)
		b = binary.AppendVarint(b, int64(len(status)))
		return base64.StdEncoding.EncodeToString(append(b, status...))
	}
	line := func(v, expect string) string {
		return fmt.Sprintf(`{"value": %q, "value_encoding": "base64", "timestamp": "2026-11-03T10:00:00Z", "expect": %q}`+"\n", v, expect)
	}
	records := line(framed(11, 9007199254740993, "paid"), "pass") + line(framed(11, 2, "open"), "filtered") +
		line(base64.StdEncoding.EncodeToString([]byte(`{"id":3}`)), "error") + line(framed(12, 4, "paid"), "error")
	p, r := writeTestFiles(t, "decode: {value: avro, schema_registry: {url: https://sr:8081}}\non_error: skip\n", records)

	res := replay(t, "test", p, "--records", r, "--schemas", schemas)
	if res.code != exitOK {
		t.Fatalf("want exit 0: %s", res)
	}
	for _, want := range []string{
		`pass  key "9007199254740993"`,
		`"value":{"id":9007199254740993,"status":"paid"},"value_schema_id":11`,
		`error  decode value: not in the Confluent wire format (first byte 0x7b`,
		`error  decode value (schema id 12): schema id 12 has no schema in `,
		"4 records: 1 pass, 1 filtered, 2 error",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, res.stdout)
		}
	}
	if res := replay(t, "test", p, "--records", r); res.code != exitInvalid || !strings.Contains(res.stderr, "--schemas DIR") {
		t.Errorf("without --schemas: %s", res)
	}
}

// `replay test --schemas DIR` with two files for one schema id (1.avsc and
// 1.proto) is refused (exit 2) naming both: it read the .avsc silently.
func TestTestCommandTwoSchemaFilesForOneID(t *testing.T) {
	schemas := t.TempDir()
	avsc := `{"type":"record","name":"O","fields":[{"name":"id","type":"long"}]}`
	proto := "syntax = \"proto3\";\nmessage O { int64 id = 1; }\n"
	for name, text := range map[string]string{"1.avsc": avsc, "1.proto": proto} {
		if err := os.WriteFile(filepath.Join(schemas, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := binary.AppendVarint(binary.BigEndian.AppendUint32([]byte{0}, 1), 7)
	records := fmt.Sprintf(`{"value": %q, "value_encoding": "base64", "timestamp": "2026-11-03T10:00:00Z"}`+"\n", base64.StdEncoding.EncodeToString(b))
	p, r := writeTestFiles(t, "decode: {value: avro, schema_registry: {url: https://sr:8081}}\n", records)
	res := replay(t, "test", p, "--records", r, "--schemas", schemas)
	if want := "schema id 1 has 2 schema files: " + filepath.Join(schemas, "1.avsc") + " and " + filepath.Join(schemas, "1.proto"); res.code != exitInvalid || !strings.Contains(res.text(), want) {
		t.Errorf("want exit %d and %q, got %s", exitInvalid, want, res)
	}
}
