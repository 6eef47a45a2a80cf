package docgen

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var update = flag.Bool("update", os.Getenv("REPLAY_UPDATE_DOCS") != "", "rewrite the generated blocks of the docs from the sink descriptors")

const root = "../.."

// pages returns the Markdown files under docs/, relative to root.
func pages(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDocs: the generated blocks of the docs are what the sink descriptors
// render now, every sink type has its page with its field table, and no
// page describes a sink type the descriptors do not know. Run
// `go test ./internal/docgen -run TestDocs -update` (or with
// REPLAY_UPDATE_DOCS=1) to rewrite the blocks.
func TestDocs(t *testing.T) {
	want := map[string][]string{"docs/plan.md": {"sink-types", "common-fields"}}
	for _, typ := range SinkTypeNames() {
		want["docs/sinks/"+typ+".md"] = []string{"fields: " + typ}
	}
	blocks := Blocks()
	for _, p := range append(pages(t), "README.md") {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		got, names, err := Splice(string(b), blocks)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		for _, n := range want[p] {
			if !slices.Contains(names, n) {
				t.Errorf("%s: no generated block %q: add a line %q and a line %q, then run go test ./internal/docgen -run TestDocs -update", p, n, beginPrefix+n+beginSuffix, end)
			}
		}
		delete(want, p)
		if strings.HasPrefix(p, "docs/sinks/") && !slices.Contains(SinkTypeNames(), strings.TrimSuffix(strings.TrimPrefix(p, "docs/sinks/"), ".md")) {
			t.Errorf("%s: not a sink type (the descriptors have %v)", p, SinkTypeNames())
		}
		if got == string(b) {
			continue
		}
		if *update {
			if err := os.WriteFile(filepath.Join(root, p), []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: rewrote its generated blocks", p)
			continue
		}
		t.Errorf("%s: its generated blocks differ from the sink descriptors; run go test ./internal/docgen -run TestDocs -update\n%s", p, firstDiff(string(b), got))
	}
	for p := range want {
		t.Errorf("%s is missing: every sink type has a page with its generated field table", p)
	}
}

// firstDiff shows the first line where have and want differ.
func firstDiff(have, want string) string {
	h, w := strings.Split(have, "\n"), strings.Split(want, "\n")
	for i := range min(len(h), len(w)) {
		if h[i] != w[i] {
			return "line " + strconv.Itoa(i+1) + ":\n  have: " + h[i] + "\n  want: " + w[i]
		}
	}
	return "the lengths differ"
}

var link = regexp.MustCompile(`\]\(([^)#\s]*)(#[^)\s]*)?\)`)

// anchors returns the anchors GitHub gives the headings of a Markdown page:
// lower case, punctuation other than - and _ dropped, spaces as -.
func anchors(page string) []string {
	var out []string
	fence := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#"))) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// TestDocsLinks: README links to every page under docs/, and every relative
// link of README and the docs names a file of the repository.
func TestDocsLinks(t *testing.T) {
	linked := map[string]bool{}
	for _, p := range append(pages(t), "README.md") {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			if strings.Contains(m[1], "://") || strings.HasPrefix(m[1], "mailto:") {
				continue
			}
			rel := p // #anchor: a heading of the page itself
			if m[1] != "" {
				rel = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p), m[1])))
			}
			if strings.HasPrefix(rel, "../") {
				t.Errorf("%s: link %q leaves the repository", p, m[1])
				continue
			}
			target, err := os.ReadFile(filepath.Join(root, rel))
			if err != nil {
				t.Errorf("%s: link %q: no file %s", p, m[1], rel)
				continue
			}
			if a := strings.TrimPrefix(m[2], "#"); a != "" && strings.HasSuffix(rel, ".md") && !slices.Contains(anchors(string(target)), a) {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", p, m[1]+m[2], rel, a)
			}
			if p == "README.md" {
				linked[rel] = true
			}
		}
	}
	for _, p := range pages(t) {
		if !linked[p] {
			t.Errorf("README.md does not link to %s", p)
		}
	}
}

// TestSplice: a block is replaced whole, text around it is kept, and a
// broken marker is an error rather than a silent skip.
func TestSplice(t *testing.T) {
	blocks := map[string]string{"x": "new\n"}
	got, names, err := Splice("a\n<!-- BEGIN GENERATED: x -->\nold\nolder\n<!-- END GENERATED -->\nb\n", blocks)
	if err != nil || got != "a\n<!-- BEGIN GENERATED: x -->\nnew\n<!-- END GENERATED -->\nb\n" || !slices.Equal(names, []string{"x"}) {
		t.Errorf("Splice = %q, %v, %v", got, names, err)
	}
	for _, bad := range []string{
		"<!-- BEGIN GENERATED: y -->\n<!-- END GENERATED -->\n",
		"<!-- BEGIN GENERATED: x -->\nno end\n",
		"<!-- END GENERATED -->\n<!-- BEGIN GENERATED: x -->\n<!-- END GENERATED -->\n",
		"<!-- BEGIN GENERATED: x -->\n<!-- BEGIN GENERATED: x -->\n<!-- END GENERATED -->\n",
	} {
		if _, _, err := Splice(bad, blocks); err == nil {
			t.Errorf("Splice(%q): no error", bad)
		}
	}
}
