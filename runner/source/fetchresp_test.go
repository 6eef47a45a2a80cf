package source

import (
	"slices"
	"testing"
)

// scanAppendTimes notes exactly the whole LOG_APPEND_TIME batches of a
// record set, with their base offsets and MaxTimestamps, and stops at a
// batch the fetch size cut short.
func TestScanAppendTimes(t *testing.T) {
	lat := scriptedBatch{base: 10, last: 12, offsets: span(10, 13), value: 5, attrs: attrLogAppendTime}
	create := scriptedBatch{base: 13, last: 14, offsets: span(13, 15), value: 5}
	lat2 := scriptedBatch{base: 15, last: 19, offsets: []int64{15, 19}, value: 5, attrs: attrLogAppendTime | 4} // zstd bit too: the header is not compressed
	cut := scriptedBatch{base: 20, last: 22, offsets: span(20, 23), value: 5, attrs: attrLogAppendTime}
	var set []byte
	for _, b := range []scriptedBatch{lat, create, lat2} {
		set = append(set, encodeBatch(b)...)
	}
	whole := len(set)
	c := encodeBatch(cut)
	set = append(set, c[:len(c)-3]...)
	first := t0.UnixMilli()
	want := []batchTime{{base: 10, maxTimestamp: first + 2}, {base: 15, maxTimestamp: first + 4}}
	if got := scanAppendTimes(set, nil); !slices.Equal(got, want) {
		t.Errorf("scan: %+v, want %+v", got, want)
	}
	if got := scanAppendTimes(set[:whole-1], nil); !slices.Equal(got, want[:1]) {
		t.Errorf("scan without the last byte of the third batch: %+v, want %+v", got, want[:1])
	}
	if got := scanAppendTimes(set[:5], nil); len(got) != 0 {
		t.Errorf("scan of 5 bytes: %+v", got)
	}
}
