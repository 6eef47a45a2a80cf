package decode

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/replay-tool/replay/internal/testenv"
)

// oraclePython returns the Python of the oracle venv (testenv.OraclePython).
func oraclePython(t *testing.T) string { return testenv.OraclePython(t) }

// runOracle runs a script of testdata/oracle with the oracle's Python,
// writing into a new directory it returns.
func runOracle(t *testing.T, script string, args ...string) string {
	t.Helper()
	py := oraclePython(t)
	out := t.TempDir()
	cmd := exec.Command(py, append([]string{filepath.Join("testdata", "oracle", script), out}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	return out
}

// oracleCase is one payload and what the oracle decoded from it.
type oracleCase struct {
	Payload string          `json:"payload"`
	Bare    json.RawMessage `json:"bare"`
	Tagged  json.RawMessage `json:"tagged"`
	// Message names the Protobuf message (its index path).
	Indexes []int `json:"indexes"`
}

func readCases(t *testing.T, path string) []oracleCase {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []oracleCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// frame puts payload in the Confluent wire format under id.
func frame(id int32, payload []byte) []byte {
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(id))
	return append(b, payload...)
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseNumbers(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return v
}

// diffJSON compares got (replay's JSON) with want (the oracle's rendering)
// value by value, and returns the differences and the leaves compared.
// Numbers: integers by their exact text, others as float64; the markers
// {"$decimal": "12.30"} (got's exact text) and {"$f32": x} (equal as
// float32).
func diffJSON(path string, want, got any) (diffs []string, leaves int) {
	if m, ok := want.(map[string]any); ok && len(m) == 1 {
		if d, ok := m["$decimal"]; ok {
			n, isNum := got.(json.Number)
			if !isNum || string(n) != d.(string) {
				return []string{fmt.Sprintf("%s: got %v, want the number %s", path, got, d)}, 1
			}
			return nil, 1
		}
		if f, ok := m["$f32"]; ok {
			w, _ := f.(json.Number).Float64()
			n, isNum := got.(json.Number)
			g, err := n.Float64()
			if !isNum || err != nil || float32(g) != float32(w) || math.Signbit(g) != math.Signbit(w) {
				return []string{fmt.Sprintf("%s: got %v, want the float32 %v", path, got, w)}, 1
			}
			return nil, 1
		}
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}, 1
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			d, n := diffJSON(path+"."+k, w[k], g[k])
			diffs, leaves = append(diffs, d...), leaves+n
		}
		return diffs, leaves
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}, 1
		}
		for i := range w {
			d, n := diffJSON(path+"["+strconv.Itoa(i)+"]", w[i], g[i])
			diffs, leaves = append(diffs, d...), leaves+n
		}
		return diffs, leaves
	case json.Number:
		g, ok := got.(json.Number)
		if !ok {
			return []string{fmt.Sprintf("%s: got %v, want the number %s", path, got, w)}, 1
		}
		if !strings.ContainsAny(string(w), ".eE") {
			if string(g) != string(w) {
				return []string{fmt.Sprintf("%s: got %s, want the integer %s", path, g, w)}, 1
			}
			return nil, 1
		}
		wf, _ := w.Float64()
		gf, err := g.Float64()
		if err != nil || gf != wf || math.Signbit(gf) != math.Signbit(wf) {
			return []string{fmt.Sprintf("%s: got %s, want %s", path, g, w)}, 1
		}
		return nil, 1
	}
	if want != got {
		return []string{fmt.Sprintf("%s: got %#v, want %#v", path, got, want)}, 1
	}
	return nil, 1
}
