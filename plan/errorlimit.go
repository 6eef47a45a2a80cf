package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ErrorLimit is max_errors: how many records that cannot be processed a
// run tolerates under on_error skip or dead_letter, as a count (100) or as
// a percentage ("1%") of the records in the run's ranges. The zero value
// sets no limit.
type ErrorLimit struct {
	set     bool
	count   int64
	percent float64
}

// ErrorCount returns a limit of n records.
func ErrorCount(n int64) ErrorLimit { return ErrorLimit{set: true, count: n} }

// ErrorPercent returns a limit of pct percent of the records.
func ErrorPercent(pct float64) ErrorLimit { return ErrorLimit{set: true, percent: pct, count: -1} }

// IsSet reports whether a limit is set.
func (l ErrorLimit) IsSet() bool { return l.set }

// Allowed returns how many errors the limit tolerates in a run of records
// records; -1 when there is no limit.
func (l ErrorLimit) Allowed(records int64) int64 {
	switch {
	case !l.set:
		return -1
	case l.count >= 0:
		return l.count
	}
	return int64(math.Floor(float64(records) * l.percent / 100))
}

// String renders the limit as in a plan: 100 or 1%.
func (l ErrorLimit) String() string {
	switch {
	case !l.set:
		return ""
	case l.count >= 0:
		return strconv.FormatInt(l.count, 10)
	}
	return strconv.FormatFloat(l.percent, 'f', -1, 64) + "%"
}

// UnmarshalYAML accepts a whole number of records (>= 0) or a percentage
// between 0% and 100%.
func (l *ErrorLimit) UnmarshalYAML(n *yaml.Node) error {
	v := strings.TrimSpace(n.Value)
	if n.Kind != yaml.ScalarNode || v == "" {
		return fmt.Errorf("want a number of records (e.g. 100) or a percentage of the records read (e.g. 1%%)")
	}
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		switch {
		case err != nil || math.IsNaN(f):
			return fmt.Errorf("%q is not a percentage: write e.g. 1%% or 0.5%%", v)
		case f < 0 || f > 100:
			return fmt.Errorf("%s: a percentage of the records read is between 0%% and 100%%", v)
		}
		*l = ErrorPercent(f)
		return nil
	}
	i, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err == nil && i < 0:
		return fmt.Errorf("%d: a number of records is 0 or more", i)
	case err == nil:
		*l = ErrorCount(i)
		return nil
	}
	if f, ferr := strconv.ParseFloat(v, 64); ferr == nil && f > 0 && f < 1 {
		return fmt.Errorf("%s: a ratio is written as a percentage: %s%%", v, strconv.FormatFloat(f*100, 'f', -1, 64))
	}
	return fmt.Errorf("%q: want a whole number of records (e.g. 100) or a percentage of the records read (e.g. 1%%)", v)
}

// MarshalYAML writes the limit back in plan form.
func (l ErrorLimit) MarshalYAML() (any, error) {
	if l.set && l.count >= 0 {
		return l.count, nil
	}
	return l.String(), nil
}
