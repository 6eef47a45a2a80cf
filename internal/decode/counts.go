package decode

import (
	"cmp"
	"slices"
	"strings"
)

// SchemaCount is how many values or keys one schema id decoded.
type SchemaCount struct {
	// Side is "value" or "key".
	Side     string `json:"side"`
	SchemaID int32  `json:"schema_id"`
	// Records counts the successful decodes: a record decoded again (a
	// batch re-delivered after a rebalance or a retried fetch) counts
	// again. Bad records are not counted.
	Records int64 `json:"records"`
}

// Counts returns the decodes of each side and schema id so far, values
// first, then by schema id; ids that decoded nothing are left out. It is
// safe to call while records are decoded.
func (d *Decoder) Counts() []SchemaCount {
	d.mu.Lock()
	var out []SchemaCount
	for id, e := range d.cache {
		select {
		case <-e.done:
		default:
			continue // still being fetched: nothing decoded by it yet
		}
		if e.s == nil {
			continue
		}
		for _, side := range []Side{Value, Key} {
			if n := e.s.decoded[side].Load(); n > 0 {
				out = append(out, SchemaCount{Side: side.String(), SchemaID: id, Records: n})
			}
		}
	}
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b SchemaCount) int { // "value" before "key"
		return cmp.Or(strings.Compare(b.Side, a.Side), cmp.Compare(a.SchemaID, b.SchemaID))
	})
	return out
}
