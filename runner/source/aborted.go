package source

import (
	"cmp"
	"slices"

	"github.com/segmentio/kafka-go/protocol/fetch"
)

// abortedTxns follows a Fetch response's aborted transactions (KIP-98) as
// its batches go by, as the Java consumer does: before each batch, the
// transactions that start at or before the batch's last offset are
// aborted ones of their producers (upTo); a data batch of such a producer
// is dropped (drop); the producer's ABORT marker ends its aborted range
// (ended). The list names every aborted transaction that overlaps the
// fetched range, also one whose data was read by an earlier fetch and
// whose marker opens this one: adding it only at the next data batch
// (after the marker was passed) would drop that producer's next,
// committed, transaction.
type abortedTxns struct {
	list      []fetch.ResponseTransaction // by FirstOffset, not yet reached
	producers map[int64]bool
}

// newAbortedTxns returns the tracker of list (nil: nothing is aborted;
// read_uncommitted reads never drop).
func newAbortedTxns(readCommitted bool, list []fetch.ResponseTransaction) *abortedTxns {
	if !readCommitted || len(list) == 0 {
		return nil
	}
	l := slices.Clone(list)
	slices.SortFunc(l, func(a, b fetch.ResponseTransaction) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return &abortedTxns{list: l, producers: map[int64]bool{}}
}

// upTo takes in the aborted transactions that start at or before last.
func (a *abortedTxns) upTo(last int64) {
	if a == nil {
		return
	}
	for len(a.list) > 0 && a.list[0].FirstOffset <= last {
		a.producers[a.list[0].ProducerID] = true
		a.list = a.list[1:]
	}
}

// drop reports whether a data batch of producer pid, transactional or not,
// belongs to an aborted transaction.
func (a *abortedTxns) drop(transactional bool, pid int64) bool {
	return a != nil && transactional && a.producers[pid]
}

// ended closes pid's aborted range at its ABORT marker.
func (a *abortedTxns) ended(pid int64) {
	if a != nil {
		delete(a.producers, pid)
	}
}
