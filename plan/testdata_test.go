package plan

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/invalid/*.err from the current output")

// testNow is the fixed clock of every test: the day after the plans' windows.
var testNow = time.Date(2026, 11, 5, 12, 0, 0, 0, time.UTC)

// testEnv is the fixed environment of every test.
var testEnv = map[string]string{
	"KAFKA_BROKERS":  "kafka-1:9092,kafka-2:9092",
	"KAFKA_USER":     "replay",
	"KAFKA_PASSWORD": "s3cret",
	"ORDERS_DSN":     "postgres://app:s3cret@db.internal:5432/orders",
	"PGHOST":         "db.internal",
	"RATE":           "2000",
	// The http sink's token (testdata/valid/http-bearer.yaml).
	"ORDERS_API_TOKEN": "t0ken",
	// The Schema Registry of testdata/valid/decode-avro.yaml.
	"SCHEMA_REGISTRY_URL": "https://sr-1:8081,https://sr-2:8081",
	"SR_PASSWORD":         "sr-s3cret",
	// A DSN without a password (testdata/invalid/sink-field-for-another-type.yaml).
	"ORDERS_DSN_NOPW": "postgres://app@db.internal:5432/orders",
}

func testOptions() LoadOptions {
	return LoadOptions{
		Sinks: testSinks,
		Now:   func() time.Time { return testNow },
		LookupEnv: func(k string) (string, bool) {
			v, ok := testEnv[k]
			return v, ok
		},
	}
}

func TestValidPlans(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	if len(files) < 6 {
		t.Fatalf("want at least 6 valid plans, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p, err := Load(f, testOptions())
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if p.Fingerprint() == "" {
				t.Error("empty fingerprint")
			}
		})
	}
}

func TestInvalidPlans(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) < 20 {
		t.Fatalf("want at least 20 invalid plans, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := Load(f, testOptions())
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Load: want *InvalidError, got %v", err)
			}
			got := inv.Error() + "\n"
			golden := strings.TrimSuffix(f, ".yaml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run go test ./plan -update to create it): %v", err)
			}
			if got != string(want) {
				t.Errorf("Load(%s) problems:\n%s\nwant:\n%s", f, got, want)
			}
		})
	}
}
