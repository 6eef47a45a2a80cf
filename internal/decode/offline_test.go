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
