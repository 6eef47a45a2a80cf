package plan

import "reflect"

// testSinks are the sink types the package's own tests load plans
// against: the drivers' catalog, which TestMain (catalog_test.go) sets,
// package plan being below the drivers.
var testSinks SinkCatalog

// SetTestSinks sets the sink types the package's own tests load plans
// against.
func SetTestSinks(c SinkCatalog) { testSinks = c }

// sinkValue returns the value of the field name (its yaml name) of section
// s, a common field or one of its type's; nil when s has none.
func sinkValue(s *Sink, name string) any {
	f, ok := s.field(name)
	if !ok {
		return nil
	}
	return f.value.Interface()
}

// setSinkValue sets the field name of section s, which must have it.
func setSinkValue(s *Sink, name string, val any) {
	f, ok := s.field(name)
	if !ok {
		panic("no sink field " + name)
	}
	f.value.Set(reflect.ValueOf(val))
}
