package docgen

import (
	"fmt"
	"strings"

	"github.com/replay-tool/replay/sinks/registry"
)

// SinkTypeNames returns the sink types, one page docs/sinks/<type>.md each.
func SinkTypeNames() []string {
	types := registry.Catalog()
	out := make([]string, len(types))
	for i, d := range types {
		out[i] = string(d.Type)
	}
	return out
}

// Blocks is BlocksOf the drivers' catalog.
func Blocks() map[string]string { return BlocksOf(registry.Catalog()) }

const (
	beginPrefix = "<!-- BEGIN GENERATED: "
	beginSuffix = " -->"
	end         = "<!-- END GENERATED -->"
)

// Splice returns page with every generated block replaced by what blocks
// holds under its name, and the names of the blocks it found. A block
// whose name blocks does not know, a BEGIN without its END or an END
// without its BEGIN is an error.
func Splice(page string, blocks map[string]string) (string, []string, error) {
	var out strings.Builder
	var names []string
	rest := page
	for {
		i := strings.Index(rest, beginPrefix)
		if j := strings.Index(rest, end); j >= 0 && (i < 0 || j < i) {
			return "", nil, fmt.Errorf("%q without %q before it", end, beginPrefix+"NAME"+beginSuffix)
		}
		if i < 0 {
			out.WriteString(rest)
			return out.String(), names, nil
		}
		line, after, ok := strings.Cut(rest[i:], "\n")
		name, ok2 := strings.CutSuffix(strings.TrimPrefix(line, beginPrefix), beginSuffix)
		if !ok || !ok2 {
			return "", nil, fmt.Errorf("malformed marker %q: want %q on a line of its own", line, beginPrefix+"NAME"+beginSuffix)
		}
		body, ok := blocks[name]
		if !ok {
			return "", nil, fmt.Errorf("%q: no generated block of that name", line)
		}
		k := strings.Index(after, end)
		if k < 0 {
			return "", nil, fmt.Errorf("%q without %q", line, end)
		}
		if n := strings.Index(after[:k], beginPrefix); n >= 0 {
			return "", nil, fmt.Errorf("%q: another BEGIN before its END", line)
		}
		names = append(names, name)
		out.WriteString(rest[:i])
		out.WriteString(line + "\n" + body + end)
		rest = after[k+len(end):]
	}
}
