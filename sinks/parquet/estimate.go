package parquet

import (
	"fmt"
	"sort"

	"github.com/replay-tool/replay/plan"
)

// smallObject is the average object size under which `replay plan` warns:
// readers (Spark, Trino, DuckDB) pay per object, and an object store per
// request.
const smallObject = 8 << 20

// notes estimates, for `replay plan`, the objects a section writes for
// the resolved ranges: each partition's range is cut into objects of
// max_rows_per_file rows, and an object's size is its rows times the
// average key and value bytes of the records sampled at its range's ends.
// That is the size before compression, an upper bound: when even that is
// below smallObject on average, a warning says what to change.
func notes(ps *plan.Sink, ranges []plan.RangeSize) []plan.SinkNote {
	maxRows := section(ps).maxRowsPerFile()
	if maxRows <= 0 {
		maxRows = DefaultMaxRowsPerFile
	}
	// objectsAt is how many objects the ranges make at n rows per object.
	objectsAt := func(n int64) (objects int64) {
		for _, r := range ranges {
			if r.Records > 0 {
				objects += (r.Records + n - 1) / n
			}
		}
		return objects
	}
	var parts, longest int64
	var bytes float64
	exact := true
	for _, r := range ranges {
		if r.Records <= 0 {
			continue
		}
		parts++
		longest = max(longest, r.Records)
		bytes += float64(r.Records) * r.BytesPerRecord
		exact = exact && r.Exact
	}
	objects := objectsAt(maxRows)
	if objects == 0 {
		return nil
	}
	from := "the records sampled at the ranges' ends"
	if exact {
		from = "every record's size"
	}
	avg := bytes / float64(objects)
	out := []plan.SinkNote{{Text: fmt.Sprintf("parquet: about %d objects (%d partitions, max_rows_per_file %d), %s on average before compression (key and value bytes, from %s)",
		objects, parts, maxRows, sizeText(avg), from)}}
	if avg >= smallObject || bytes == 0 {
		return out
	}
	fix := "each partition's range is one object already, as large as this window's objects can be"
	if objects > parts {
		fix = fmt.Sprintf("set max_rows_per_file: %d for one object per partition (%d objects, %s on average), as large as this window's objects can be",
			longest, parts, sizeText(bytes/float64(parts)))
		if bytes/float64(parts) >= smallObject {
			// The longest range cut into k objects of equal rows, k as
			// large as keeps the objects at 8 MiB on average (k = 1: one
			// object per partition does): the average only falls as k
			// grows, and an even cut leaves no sliver of a few rows.
			rowsFor := func(k int64) int64 { return (longest + k - 1) / k }
			avgFor := func(k int64) float64 { return bytes / float64(objectsAt(rowsFor(k))) }
			k := int64(sort.Search(int(min(longest, int64(bytes/smallObject)+1)), func(i int) bool { return avgFor(int64(i)+2) < smallObject })) + 1
			fix = fmt.Sprintf("set max_rows_per_file: %d for fewer, larger objects (%d objects, %s on average)", rowsFor(k), objectsAt(rowsFor(k)), sizeText(avgFor(k)))
		}
	}
	return append(out, plan.SinkNote{Warning: true, Text: fmt.Sprintf("parquet: small objects: %s on average, below %s even before compression (readers and object stores pay per object): %s",
		sizeText(avg), sizeText(smallObject), fix)})
}

// sizeText renders n bytes in IEC units.
func sizeText(n float64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", n/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f B", n)
}
