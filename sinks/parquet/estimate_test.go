package parquet

import (
	"strings"
	"testing"

	"github.com/replay-tool/replay/plan"
)

// TestNotes: the objects' count and average size follow from the ranges'
// records, max_rows_per_file and the bytes per record; small objects are
// warned of with the max_rows_per_file that cuts the longest range evenly
// into as many objects as keep 8 MiB on average, or, when even one object
// per partition is smaller, with one object per partition.
func TestNotes(t *testing.T) {
	sink := func(maxRows int64) *plan.Sink {
		s := &Section{Path: "out/"}
		if maxRows > 0 {
			s.MaxRowsPerFile = &maxRows
		}
		return &plan.Sink{Type: Type, Config: s}
	}
	ranges := []plan.RangeSize{{Partition: 0, Records: 250000, BytesPerRecord: 100}, {Partition: 1, Records: 150000, BytesPerRecord: 100},
		{Partition: 2, Records: 0}}
	for _, tc := range []struct {
		name    string
		maxRows int64
		want    []string
		warn    string
	}{
		{"one object a partition", 0, []string{"about 2 objects (2 partitions, max_rows_per_file 1000000), 19.1 MiB on average"}, ""},
		{"cut small", 20000, []string{"about 21 objects (2 partitions, max_rows_per_file 20000), 1.8 MiB on average", "sampled at the ranges' ends"},
			"set max_rows_per_file: 125000 for fewer, larger objects (4 objects, 9.5 MiB on average)"},
		// Three ranges of about 12 MiB cut at 60000 rows: a second object
		// of each is a remainder; one object per partition is the cut.
		{"remainders", 60000, []string{"about 6 objects (3 partitions, max_rows_per_file 60000), 6.0 MiB on average"},
			"set max_rows_per_file: 84422 for fewer, larger objects (3 objects, 11.9 MiB on average)"},
		{"small ranges", 0, nil, ""},
		{"short ranges cut small", 0, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := ranges
			if tc.name == "small ranges" {
				rs = []plan.RangeSize{{Partition: 0, Records: 1000, BytesPerRecord: 100, Exact: true}, {Partition: 1, Records: 2000, BytesPerRecord: 100, Exact: true}}
				tc.want = []string{"about 2 objects (2 partitions, max_rows_per_file 1000000), 146.5 KiB on average", "from every record's size"}
				tc.warn = "each partition's range is one object already"
			}
			if tc.name == "remainders" {
				rs = []plan.RangeSize{{Partition: 0, Records: 83296, BytesPerRecord: 150}, {Partition: 1, Records: 84422, BytesPerRecord: 150},
					{Partition: 2, Records: 82282, BytesPerRecord: 150}}
			}
			if tc.name == "short ranges cut small" {
				// max_rows_per_file for 8 MiB would exceed the longest range:
				// the warning says so instead of suggesting it.
				rs = []plan.RangeSize{{Partition: 0, Records: 1000, BytesPerRecord: 100}, {Partition: 1, Records: 3000, BytesPerRecord: 100}}
				tc.maxRows = 500
				tc.want = []string{"about 8 objects (2 partitions, max_rows_per_file 500), 48.8 KiB on average"}
				tc.warn = "set max_rows_per_file: 3000 for one object per partition (2 objects, 195.3 KiB on average), as large as this window's objects can be"
			}
			got := notes(sink(tc.maxRows), rs)
			if len(got) == 0 || got[0].Warning {
				t.Fatalf("notes: %+v", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got[0].Text, w) {
					t.Errorf("%q does not say %q", got[0].Text, w)
				}
			}
			switch {
			case tc.warn == "" && len(got) != 1:
				t.Errorf("a warning for objects of 8 MiB or more: %+v", got)
			case tc.warn != "" && (len(got) != 2 || !got[1].Warning || !strings.Contains(got[1].Text, tc.warn)):
				t.Errorf("want a warning saying %q, got %+v", tc.warn, got)
			}
		})
	}
	if got := notes(sink(0), []plan.RangeSize{{Partition: 0}}); got != nil {
		t.Errorf("empty ranges: %+v", got)
	}
}
