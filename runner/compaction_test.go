package runner

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// A range whose last offsets were compacted away still finishes: a record at
// or past the end proves the gap. Regression: the reader skipped records past
// the end without advancing, so such a partition hung until the no-progress
// watchdog failed it.
func TestCompactedTailFinishes(t *testing.T) {
	sb := newTestCluster(t, 1)
	if err := sb.CreateTopic("orders", 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(sb.Addr), Topic: "orders", RequiredAcks: kafka.RequireAll, BatchSize: 1}
	defer w.Close()
	// Offsets 0-9 have unique keys; 10-14 use keys "dup-0".."dup-4" that are
	// written again at 15-19, so compaction may remove 10-14 (kfake keeps
	// the record at 14, so the window ends at 14: [10, 14) is the hole).
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("k-%d", i)
		if i >= 10 {
			key = fmt.Sprintf("dup-%d", i%5)
		}
		if err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte(key), Value: []byte(fmt.Sprint(i)), Time: t0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	sb.Compact()
	survivors := kcatOffsets(t, sb.Addr, "orders")
	if slices.Contains(survivors, "0/10") || !slices.Contains(survivors, "0/14") {
		t.Fatalf("compaction did not leave the expected hole at 10-13: %v", survivors)
	}
	p, out := filePlan(t, sb, "  offsets: {0: {from: 5, to: 14}}")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, rep, err := runPlan(t, ctx, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := readCoords(t, out)
	want := []string{"0/5", "0/6", "0/7", "0/8", "0/9"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if pr := rep.Partitions[0]; pr.Next != 14 || !pr.Done {
		t.Fatalf("partition finished at %d (done=%v), want 14", pr.Next, pr.Done)
	}
}

// kcatOffsets lists every record of a topic as "partition/offset" with kcat.
func kcatOffsets(t *testing.T, addr, topic string) []string {
	t.Helper()
	requireKcat(t)
	out, err := exec.Command("kcat", "-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-q", "-f", `%p/%o\n`).Output()
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	return strings.Fields(string(out))
}
