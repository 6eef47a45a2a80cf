package sqlcheckpoint_test

import (
	"errors"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/sinktest"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// A batch is answered with the remembered error of its first rejected
// record, a record whose contents changed is not taken for it, and a batch
// without any makes the partition's be forgotten.
func TestRejected(t *testing.T) {
	var r sqlcheckpoint.Rejected
	batch := []record.Record{sinktest.Rec(0, 1, "a", "1"), sinktest.Rec(0, 2, "b", "2"), sinktest.Rec(0, 3, "c", "3"), sinktest.Rec(0, 4, "", "4")}
	errs := []*record.Error{record.NewError(&batch[1], errors.New("two")), record.NewError(&batch[2], errors.New("three")), record.NewError(&batch[3], errors.New("four"))}
	r.Remember([]*record.Record{&batch[1], &batch[2], &batch[3]}, errs)
	if err := r.First([]record.Record{sinktest.Rec(1, 2, "b", "2")}); err != nil { // another partition
		t.Errorf("partition 1: %v, want nil", err)
	}
	if err := r.First(batch); err != errs[0] {
		t.Errorf("First = %v, want %v", err, errs[0])
	}
	if err := r.First(batch[2:]); err != errs[1] {
		t.Errorf("First without offset 2 = %v, want %v", err, errs[1])
	}
	changed := []record.Record{sinktest.Rec(0, 3, "c", "33"), sinktest.Rec(0, 4, "\x00", "4")}
	changed[1].Key = []byte{} // an empty key, not the null one remembered
	if err := r.First(changed); err != nil {
		t.Errorf("changed records: %v, want nil", err)
	}
	if err := r.First(batch[2:]); err != nil {
		t.Errorf("after a batch without rejected records: %v, want nil (forgotten)", err)
	}
}
