// Package plans holds the example plans. They are validated by the tests;
// demo.yaml is also embedded in the binary so `replay demo` works outside a
// checkout of this repository.
package plans

import _ "embed"

// Demo is plans/demo.yaml, the plan `replay demo` runs.
//
//go:embed demo.yaml
var Demo []byte
