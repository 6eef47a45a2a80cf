package registry

import (
	"testing"
)

// Every driver has a descriptor with a type of its own: a type listed
// twice would make the second driver unreachable.
func TestDriverTypesAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range drivers {
		if d.desc.Type == "" || d.open == nil {
			t.Errorf("driver %+v: no type or no constructor", d.desc.Type)
		}
		if seen[string(d.desc.Type)] {
			t.Errorf("sink type %q is listed twice", d.desc.Type)
		}
		seen[string(d.desc.Type)] = true
	}
}

// The catalog is the caller's: changing a descriptor it returned does not
// change the next one.
func TestCatalogIsACopy(t *testing.T) {
	c := Catalog()
	c[0].Type, c[0].Fields[0].Name = "changed", "changed"
	again := Catalog()
	if again[0].Type == "changed" || again[0].Fields[0].Name == "changed" {
		t.Error("a descriptor changed through a returned catalog")
	}
}
