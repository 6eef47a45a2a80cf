package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamplePlansValidate is how CI checks the example plans: every file in
// plans/ passes `replay validate` with the environment they document.
func TestExamplePlansValidate(t *testing.T) {
	t.Setenv("REPLAY_DEMO_BROKERS", "127.0.0.1:9092")
	t.Setenv("KAFKA_BROKERS", "kafka-1:9092")
	t.Setenv("ORDERS_DSN", "postgres://replay@db:5432/shop")
	t.Setenv("CUSTOMERS_DSN", "postgres://replay@db:5432/crm")
	t.Setenv("TARGET_KAFKA_BROKERS", "kafka-dr-1:9093,kafka-dr-2:9093")
	t.Setenv("TARGET_KAFKA_PASSWORD", "s3cret")
	t.Setenv("ORDERS_API_URL", "https://orders.internal/api/replay")
	t.Setenv("ORDERS_API_TOKEN", "t0ken")
	files, err := filepath.Glob("../../plans/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found only %v in plans/", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := replay(t, "validate", f)
			if r.code != exitOK || r.stdout != "1 plan(s) valid\n" {
				t.Errorf("want a clean exit 0, got %s", r)
			}
		})
	}
	// All at once, as CI calls it.
	if r := replay(t, append([]string{"validate"}, files...)...); r.code != exitOK {
		t.Errorf("replay validate plans/*: %s", r)
	}
}

// TestExamplePlansNeedTheirEnvironment: without the variables they
// reference, the example plans still validate offline (exit 0), with a
// notice naming the variables; the commands that use the plan (run, plan,
// status, reset) refuse it, each missing variable named at its position.
func TestExamplePlansNeedTheirEnvironment(t *testing.T) {
	for _, v := range []string{"REPLAY_DEMO_BROKERS", "KAFKA_BROKERS", "ORDERS_DSN"} {
		t.Setenv(v, "") // restored after the test
		os.Unsetenv(v)
	}
	r := replay(t, "validate", "../../plans/demo.yaml", "../../plans/orders-to-postgres.yaml")
	if r.code != exitOK {
		t.Fatalf("validate: want exit 0, got %s", r)
	}
	for _, want := range []string{
		"../../plans/demo.yaml: notice: needs REPLAY_DEMO_BROKERS (unset here)",
		"../../plans/orders-to-postgres.yaml: notice: needs KAFKA_BROKERS, ORDERS_DSN (unset here)",
		"2 plan(s) valid",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("validate: stdout lacks %q:\n%s", want, r)
		}
	}
	t.Logf("replay validate:\n%s", r.stdout)
	gh := replay(t, "validate", "--format", "github", "../../plans/orders-to-postgres.yaml")
	if want := "::notice file=../../plans/orders-to-postgres.yaml,title=replay validate::needs KAFKA_BROKERS, ORDERS_DSN (unset here)"; gh.code != exitOK || !strings.Contains(gh.stdout, want) {
		t.Errorf("validate --format github: want %q in %s", want, gh)
	}
	for _, cmd := range [][]string{{"plan"}, {"run", "--yes"}, {"status"}, {"reset", "--yes"}} {
		r := replay(t, append(cmd, "../../plans/orders-to-postgres.yaml")...)
		out := r.stdout + r.stderr
		if r.code != exitInvalid || !strings.Contains(out, "environment variable KAFKA_BROKERS is not set") ||
			!strings.Contains(out, "sink.dsn: environment variable ORDERS_DSN is not set") {
			t.Errorf("%s without the variables: want exit %d naming both, got %s", cmd[0], exitInvalid, r)
		}
	}
}
