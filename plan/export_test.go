package plan

// testSinks are the sink types the package's own tests load plans
// against: the drivers' catalog, which TestMain (catalog_test.go) sets,
// package plan being below the drivers.
var testSinks SinkCatalog

// SetTestSinks sets the sink types the package's own tests load plans
// against.
func SetTestSinks(c SinkCatalog) { testSinks = c }
