package decode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// A schemas directory with two files for one id (1.avsc and 1.proto) is
// refused, naming both, instead of silently reading the first; files that
// are not <id>.<ext> (imports, 01.avsc) and one file per id are fine.
func TestOfflineTwoFilesForOneID(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"1.avsc", "1.proto", "2.json", "01.avsc", "common.proto", "3.proto", "3.json", "3.avsc"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := NewOffline(dir, Config{Value: Avro}, zerolog.Nop())
	if err == nil {
		t.Fatal("two files for schema id 1: want an error")
	}
	msg := err.Error()
	for _, want := range []string{
		"schema id 1 has 2 schema files: " + filepath.Join(dir, "1.avsc") + " and " + filepath.Join(dir, "1.proto") + "; keep the one",
		"schema id 3 has 3 schema files: " + filepath.Join(dir, "3.avsc") + " and " + filepath.Join(dir, "3.json") + " and " + filepath.Join(dir, "3.proto"),
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "schema id 2") || strings.Contains(msg, "01.avsc") {
		t.Errorf("error %q names a file that is alone for its id", msg)
	}

	for _, name := range []string{"1.proto", "3.json", "3.proto"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewOffline(dir, Config{Value: Avro}, zerolog.Nop()); err != nil {
		t.Fatalf("one file per id: %v", err)
	}
}

// An Avro schema that uses a named type of another schema (a registry's
// reference) finds it in <full name>.avsc of the directory, and that one
// its own the same way.
func TestOfflineAvroReferences(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"3.avsc":             `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"price","type":"shop.Money"}]}`,
		"shop.Money.avsc":    `{"type":"record","name":"Money","namespace":"shop","fields":[{"name":"cents","type":"long"},{"name":"currency","type":"shop.Currency"}]}`,
		"shop.Currency.avsc": `{"type":"enum","name":"Currency","namespace":"shop","symbols":["EUR","USD"]}`,
		"shop.Unused.avsc":   `{"type":"fixed","name":"Unused","namespace":"shop","size":1}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := NewOffline(dir, Config{Value: Avro}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	// magic byte, id 3, cents 1234 (zigzag varint a4 13), currency USD (index 1: 02)
	got, err := d.Decode(t.Context(), Value, []byte{0, 0, 0, 0, 3, 0xa4, 0x13, 0x02})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"price":{"cents":1234,"currency":"USD"}}`; string(got.JSON) != want {
		t.Errorf("decoded %s, want %s", got.JSON, want)
	}
}
