package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPlanSinkNotes: `replay plan` prints what the sink's descriptor says
// it would write for the resolved ranges (a parquet sink's objects, from
// the ranges' records and max_rows_per_file), in the table's text and in
// its JSON, and warns of small objects with what to change.
func TestPlanSinkNotes(t *testing.T) {
	sb, seed := newCluster(t, 3, 3000)
	dir := t.TempDir()
	spec := planSpec{name: "notes", addr: sb.Addr, from: seed.From, to: seed.To.Add(-time.Second),
		sink: fmt.Sprintf("{type: parquet, path: %q, max_rows_per_file: 100}", filepath.Join(dir, "out"))}
	file := writePlan(t, dir, spec)

	js := replay(t, "plan", file, "-o", "json")
	if js.code != exitOK {
		t.Fatalf("plan -o json: %s", js)
	}
	var v struct {
		Partitions []struct{ Records int64 }
		SinkNotes  []struct {
			Text    string
			Warning bool
		} `json:"sink_notes"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &v); err != nil {
		t.Fatal(err)
	}
	var objects int64
	for _, p := range v.Partitions {
		objects += (p.Records + 99) / 100
	}
	if objects < 4 || len(v.SinkNotes) != 2 || !strings.HasPrefix(v.SinkNotes[0].Text, fmt.Sprintf("parquet: about %d objects (3 partitions, max_rows_per_file 100)", objects)) ||
		!v.SinkNotes[1].Warning || !strings.Contains(v.SinkNotes[1].Text, "set max_rows_per_file: ") {
		t.Fatalf("%d objects expected, sink notes %+v", objects, v.SinkNotes)
	}

	r := replay(t, "plan", file)
	if r.code != exitOK || !strings.Contains(r.stdout, "\n"+v.SinkNotes[0].Text+"\n") || !strings.Contains(r.stdout, "\nwarning: "+v.SinkNotes[1].Text+"\n") {
		t.Fatalf("the notes are not printed:\n%s", r)
	}
}
