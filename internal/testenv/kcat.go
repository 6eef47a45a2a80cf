package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Kcat runs kcat with args and returns its standard output; it fails t
// when kcat fails (with its standard error) and skips t, loudly, when kcat
// is not installed, or fails it when CI is set.
func Kcat(t testing.TB, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("kcat")
	if err != nil {
		bin, err = exec.LookPath("kafkacat")
	}
	if err != nil && inCI() {
		t.Fatal("kcat is not installed and CI is set (apt-get install -y kcat)")
	} else if err != nil {
		t.Skip("!!! KCAT NOT INSTALLED: skipping a cross-check against kcat (apt-get install -y kcat) !!!")
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// KcatCoords returns what kcat, an independent client, reads of topic in
// the time window [from, to) (kcat -o s@FROM -o e@TO, milliseconds): the
// "partition/offset" of every record, in kcat's order. partition < 0 reads
// every partition. Meaningful on topics whose timestamps increase with the
// offset.
func KcatCoords(t testing.TB, broker, topic string, partition int32, from, to time.Time) []string {
	t.Helper()
	return strings.Fields(string(kcatConsume(t, broker, topic, partition, `%p/%o\n`,
		"-o", fmt.Sprintf("s@%d", from.UnixMilli()), "-o", fmt.Sprintf("e@%d", to.UnixMilli()))))
}

// kcatConsume runs kcat as a quiet consumer of topic (partition < 0: every
// partition) from offsets to the end, printing each record in format.
func kcatConsume(t testing.TB, broker, topic string, partition int32, format string, offsets ...string) []byte {
	t.Helper()
	args := slices.Concat([]string{"-C", "-b", broker, "-t", topic}, offsets, []string{"-e", "-q", "-f", format})
	if partition >= 0 {
		args = append(args, "-p", strconv.Itoa(int(partition)))
	}
	return Kcat(t, args...)
}

// KcatRecord is one record as kcat read it. Key and Value are the exact
// bytes (nil for a null key or value).
type KcatRecord struct {
	Partition int32
	Offset    int64
	// Timestamp is in milliseconds since the epoch.
	Timestamp  int64
	Key, Value []byte
}

// kcatFormat prints a header line with the lengths, then the raw key and
// value bytes and a newline: binary-safe, unlike printing the bytes alone.
const kcatFormat = `%p %o %T %K %S\n%k%s\n`

// KcatRecords returns every record of topic from the start to the end
// (partition < 0: every partition) with its key and value bytes, for checks
// of what a sink wrote byte for byte.
func KcatRecords(t testing.TB, broker, topic string, partition int32) []KcatRecord {
	t.Helper()
	recs, err := parseKcat(kcatConsume(t, broker, topic, partition, kcatFormat, "-o", "beginning"))
	if err != nil {
		t.Fatalf("kcat output of %s: %v", topic, err)
	}
	return recs
}

// parseKcat parses the output of kcatFormat.
func parseKcat(out []byte) ([]KcatRecord, error) {
	r := bufio.NewReader(bytes.NewReader(out))
	var recs []KcatRecord
	for {
		head, err := r.ReadString('\n')
		if err == io.EOF && head == "" {
			return recs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("record %d: header: %w", len(recs), err)
		}
		var rec KcatRecord
		var klen, vlen int
		if _, err := fmt.Sscanf(head, "%d %d %d %d %d\n", &rec.Partition, &rec.Offset, &rec.Timestamp, &klen, &vlen); err != nil {
			return nil, fmt.Errorf("record %d: header %q: %w", len(recs), head, err)
		}
		if rec.Key, err = readN(r, klen); err == nil {
			rec.Value, err = readN(r, vlen)
		}
		if err == nil {
			var nl byte
			if nl, err = r.ReadByte(); err == nil && nl != '\n' {
				err = fmt.Errorf("got %q after the value, want a newline", nl)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("record %d/%d: %w", rec.Partition, rec.Offset, err)
		}
		recs = append(recs, rec)
	}
}

// readN reads n bytes (n < 0: a null, nil).
func readN(r io.Reader, n int) ([]byte, error) {
	if n < 0 {
		return nil, nil
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}
