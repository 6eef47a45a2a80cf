package plan

import (
	"net/url"
	"reflect"
	"regexp"
	"strings"
)

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

// hasPassword reports whether a PostgreSQL DSN (URL or key=value form) carries a password.
func hasPassword(dsn string) bool {
	_, ok := dsnPassword(dsn)
	return ok
}

var (
	redactKV       = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:\\.|[^'])*'|\S+)`)
	redactQuery    = regexp.MustCompile(`(?i)([?&]password=)[^&#]*`)
	redactUserinfo = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*://[^:/?#@]*:)[^/?#]*@`)
)

// RedactDSN returns dsn with any password replaced by "xxxxx".
func RedactDSN(dsn string) string {
	if !strings.Contains(dsn, "://") {
		return redactKV.ReplaceAllString(dsn, "${1}xxxxx")
	}
	if u, err := url.Parse(dsn); err == nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			dsn = u.String()
		}
	} else {
		dsn = redactUserinfo.ReplaceAllString(dsn, "${1}xxxxx@")
	}
	return redactQuery.ReplaceAllString(dsn, "${1}xxxxx")
}
