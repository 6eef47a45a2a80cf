package wire

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AbortedTxn is one entry of a Fetch response's aborted transactions
// (KIP-98): a producer's transaction that starts at FirstOffset and was
// aborted.
type AbortedTxn = kmsg.FetchResponseTopicPartitionAbortedTransaction

// Aborted follows a Fetch response's aborted transactions as its batches
// go by, as the Java consumer does: before each batch, the transactions
// that start at or before the batch's last offset are aborted ones of
// their producers (UpTo); a data batch of such a producer is dropped
// (Drop); the producer's ABORT marker ends its aborted range (Ended). The
// list names every aborted transaction that overlaps the fetched range,
// also one whose data was read by an earlier fetch and whose marker opens
// this one: adding it only at the next data batch (after the marker was
// passed) would drop that producer's next, committed, transaction.
//
// A nil *Aborted drops nothing.
type Aborted struct {
	list      []AbortedTxn // by FirstOffset, not yet reached
	producers map[int64]bool
}

// NewAborted returns the tracker of a response's aborted transactions
// (nil: nothing is aborted; read_uncommitted reads never drop). The list
// is not kept.
func NewAborted(readCommitted bool, list []AbortedTxn) *Aborted {
	if !readCommitted || len(list) == 0 {
		return nil
	}
	l := slices.Clone(list)
	slices.SortFunc(l, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return &Aborted{list: l, producers: map[int64]bool{}}
}

// UpTo takes in the aborted transactions that start at or before last.
func (a *Aborted) UpTo(last int64) {
	if a == nil {
		return
	}
	for len(a.list) > 0 && a.list[0].FirstOffset <= last {
		a.producers[a.list[0].ProducerID] = true
		a.list = a.list[1:]
	}
}

// Drop reports whether a data batch of producer pid, transactional or not,
// belongs to an aborted transaction.
func (a *Aborted) Drop(transactional bool, pid int64) bool {
	return a != nil && transactional && a.producers[pid]
}

// Ended closes pid's aborted range at its ABORT marker.
func (a *Aborted) Ended(pid int64) {
	if a != nil {
		delete(a.producers, pid)
	}
}
