package runner

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/plan"
)

// The reader cuts record bytes from recycled arena chunks, given back once
// the sink wrote their records. A chunk given back too early would show as
// records carrying another record's bytes. Every key and value written,
// over many small batches and values of every size class (inside a chunk,
// across chunk ends, larger than a quarter chunk, larger than a chunk),
// must equal what kcat, an independent client, reads.
func TestRecordBytesMatchKcat(t *testing.T) {
	requireKcat(t)
	const arenaChunk = 64 << 10 // the reader's chunk size (package source)
	const partitions, n = 3, 3000
	sb := newTestCluster(t, partitions, "orders")
	sizes := []int{1, 90, 700, 5000, arenaChunk/4 + 1, arenaChunk + 3, 33}
	w := &kafka.Writer{Addr: kafka.TCP(sb.Addr), Topic: "orders", RequiredAcks: kafka.RequireAll, Balancer: &kafka.Hash{},
		BatchSize: 50, BatchBytes: 900_000, BatchTimeout: 5 * time.Millisecond}
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		size := sizes[i%len(sizes)]
		// Printable, not JSON: stored as a JSON string, read back exactly.
		v := fmt.Sprintf("v%d-", i) + strings.Repeat(string(rune('a'+i%26)), size)
		msgs[i] = kafka.Message{Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v), Time: t0.Add(time.Duration(i) * time.Second)}
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatalf("seed: %.300v", err)
	}
	w.Close()

	out := t.TempDir() + "/out.jsonl"
	p := testPlan(t, sb, fmt.Sprintf(`
version: 1
name: arena
source: {brokers: ["%%ADDR%%"], topic: orders}
group: replay.arena
window: {offsets: {0: {from: earliest, to: latest}, 1: {from: earliest, to: latest}, 2: {from: earliest, to: latest}}}
sink: {type: file, path: %s, batch_size: 37}
`, out))
	if _, _, err := runPlan(t, context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}

	got := map[string]string{} // "partition/offset" -> key TAB value
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		r := gjson.ParseBytes(sc.Bytes())
		got[fmt.Sprintf("%d/%d", r.Get("partition").Int(), r.Get("offset").Int())] = r.Get("key").String() + "\t" + r.Get("value").String()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	kc, err := exec.Command("kcat", "-C", "-b", sb.Addr, "-t", "orders", "-o", "beginning", "-e", "-q", "-f", `%p/%o\t%k\t%s\n`).Output()
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	want := strings.Split(strings.TrimSuffix(string(kc), "\n"), "\n")
	if len(want) != n || len(got) != n {
		t.Fatalf("kcat read %d records, replay wrote %d; want %d each", len(want), len(got), n)
	}
	bad := 0
	for _, line := range want {
		coords, rest, _ := strings.Cut(line, "\t")
		if g, ok := got[coords]; !ok || g != rest {
			if bad++; bad <= 3 {
				t.Errorf("record %s: replay wrote %.60q..., kcat read %.60q...", coords, g, rest)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d records differ from kcat's", bad, n)
	}
}

// Every bootstrap broker is tried in turn: one that is down or hangs up on
// the probe does not fail the run while another answers (the runner's probe
// stopped at the first broker that did not refuse the connection outright).
func TestConnectTriesEveryBootstrapBroker(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close() // hangs up on the probe
		}
	}()
	c, err := Connect(context.Background(), plan.Source{Brokers: []string{"127.0.0.1:1", l.Addr().String(), sb.Addr}, Topic: "orders"})
	if err != nil {
		t.Fatalf("a broker down and one hanging up before one that answers: %v", err)
	}
	defer c.Close()
	// kafka-go bootstraps from any address that accepts a connection, the
	// one that hangs up included: the run leaves the failed ones out.
	if !slices.Equal(c.Brokers, []string{sb.Addr}) || len(c.Warnings) != 2 || !strings.Contains(c.Warnings[1], l.Addr().String()) {
		t.Errorf("bootstrap brokers %v, warnings %q: want only %s, and a warning for each broker left out", c.Brokers, c.Warnings, sb.Addr)
	}
	for range 20 {
		if _, err := c.Partitions(context.Background(), "orders"); err != nil {
			t.Fatalf("metadata after the probe: %v", err)
		}
	}
}
