package kafka_test

import (
	"cmp"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/replay-tool/replay/internal/testenv"
	kafkasink "github.com/replay-tool/replay/sinks/kafka"
)

// TestForgottenTransactionEndsAsItsOffsets: a transaction of the sink's
// transactional id is left open on the target partition while its offset
// commit was marked (a broker killed while its coordinator wrote the
// transaction's markers leaves this: the coordinator, restarted, no
// longer closes the target partition). Its records and the group's
// offset after them were one transaction, so the group's offset decides:
// past the first record's source offset, the sink that starts next
// commits the open transaction (its records become visible to
// read_committed consumers, once); not past it, it aborts it. Aborting
// both would lose records whose offsets the group holds. Apache Kafka
// only: the open transaction is made with the brokers' partition
// verification off and a Produce of the version before KIP-890.
func TestForgottenTransactionEndsAsItsOffsets(t *testing.T) {
	if testenv.RealBrokers() == nil {
		t.Skipf("needs Apache Kafka (%s): it writes a transaction its coordinator does not know of", testenv.KafkaBrokersEnv)
	}
	for _, tc := range []struct {
		name      string
		committed int64 // the group's offset for orders/0 in the transaction
		visible   bool
	}{
		{"offset past the records: committed", 10, true},
		{"offset before the records: aborted", 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := testenv.NewKafka(t, testenv.Topics("orders"), testenv.Partitions(1))
			k.CreateTopic(t, "orders-eos", 1, nil)
			k.NoPartitionVerification(t)

			prefix := "forgotten-" + map[bool]string{true: "c", false: "a"}[tc.visible]
			id := prefix + "-0"
			cl := k.Client(t, kgo.TransactionalID(id), kgo.MaxVersions(kversion.V3_9_0()))
			pid, epoch, err := cl.ProducerID(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			openRecords(t, k, id, pid, epoch)
			// Its offset commit, through the coordinator, marked committed.
			add := kmsg.NewPtrAddOffsetsToTxnRequest()
			add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, pid, epoch, "replay.orders"
			if r, err := add.RequestWith(t.Context(), cl); err != nil || r.ErrorCode != 0 {
				t.Fatalf("AddOffsetsToTxn: %v %v", err, kerr.ErrorForCode(r.ErrorCode))
			}
			commitOffset(t, cl, id, pid, epoch, tc.committed)
			end := kmsg.NewPtrEndTxnRequest()
			end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
			if r, err := end.RequestWith(t.Context(), cl); err != nil || r.ErrorCode != 0 {
				t.Fatalf("EndTxn: %v %v", err, kerr.ErrorForCode(r.ErrorCode))
			}
			open := func() int { return k.OpenTransactions(t, "orders-eos", pid) }
			testenv.Eventually(t, 10*time.Second, 50*time.Millisecond, func() bool {
				o := k.Committed(t, "replay.orders", "orders")
				return o[0].At == tc.committed
			}, "the offset commit marked")
			if open() != 1 {
				t.Fatal("the records' transaction is not open: the test proves nothing")
			}

			startForgottenSink(t, k.Addr, prefix)
			if n := open(); n != 0 {
				t.Errorf("%d transactions left open", n)
			}
			got := 0
			for _, r := range k.ReadTopic(t, "orders-eos", kgo.FetchIsolationLevel(kgo.ReadCommitted())) {
				if !r.Attrs.IsControl() {
					got++
				}
			}
			if want := map[bool]int{true: 2, false: 0}[tc.visible]; got != want {
				t.Errorf("read_committed sees %d records of the open transaction, want %d", got, want)
			}
		})
	}
}

// TestForgottenOffsetCommitEndsAsItsRecords: the mirror of
// TestForgottenTransactionEndsAsItsOffsets. A transaction's offset commit
// is left open on the offsets topic while its records on the target
// partition were marked (a broker killed while its coordinator wrote the
// markers leaves this too). The records decide: visible to read_committed
// consumers (committed), the sink that starts next commits the offset
// commit, so that the batch is not written again (a duplicate); aborted,
// it aborts it. Apache Kafka only (partition verification off, requests
// of the versions before KIP-890).
func TestForgottenOffsetCommitEndsAsItsRecords(t *testing.T) {
	if testenv.RealBrokers() == nil {
		t.Skipf("needs Apache Kafka (%s): it writes a transaction its coordinator does not know of", testenv.KafkaBrokersEnv)
	}
	for _, tc := range []struct {
		name    string
		visible bool // the records' marker: commit or abort
	}{
		{"records committed: offsets committed", true},
		{"records aborted: offsets aborted", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := testenv.NewKafka(t, testenv.Topics("orders"), testenv.Partitions(1))
			k.CreateTopic(t, "orders-eos", 1, nil)
			k.NoPartitionVerification(t)

			prefix := "forgotten-offsets-" + map[bool]string{true: "c", false: "a"}[tc.visible]
			id := prefix + "-0"
			old := kgo.MaxVersions(kversion.V3_9_0())
			cl := k.Client(t, kgo.TransactionalID(id), old)
			pid, epoch, err := cl.ProducerID(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			openRecords(t, k, id, pid, epoch)
			// Its offset commit, on the offsets topic, without the
			// coordinator (no AddOffsetsToTxn).
			commitOffset(t, k.Client(t, old), id, pid, epoch, 7)
			// The records' marker alone.
			ps, err := k.Admin(t).DescribeProducers(t.Context(), kadm.TopicsSet{"orders-eos": nil})
			if err != nil {
				t.Fatal(err)
			}
			var coordEpoch int32 = -1
			ps.EachPartition(func(p kadm.DescribedProducersPartition) {
				for _, pr := range p.ActiveProducers {
					if pr.ProducerID == pid {
						coordEpoch = pr.CoordinatorEpoch
					}
				}
			})
			ts := kadm.TopicsSet{}
			ts.Add("orders-eos", 0)
			mr, err := k.Admin(t).WriteTxnMarkers(t.Context(), kadm.TxnMarkers{ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coordEpoch, Commit: tc.visible, Topics: ts})
			if err == nil {
				mr.EachPartition(func(p kadm.TxnMarkersPartitionResponse) { err = cmp.Or(err, p.Err) })
			}
			if err != nil {
				t.Fatalf("WriteTxnMarkers: %v", err)
			}
			if n := k.OpenTransactions(t, "orders-eos", pid); n != 0 {
				t.Fatalf("%d transactions open on the target after its marker", n)
			}
			if n := k.OpenTransactions(t, "__consumer_offsets", pid); n != 1 {
				t.Fatalf("the offset commit is not open (%d): the test proves nothing", n)
			}

			startForgottenSink(t, k.Addr, prefix)
			if n := k.OpenTransactions(t, "__consumer_offsets", pid); n != 0 {
				t.Errorf("%d transactions left open on the offsets topic", n)
			}
			o, ok := k.Committed(t, "replay.orders", "orders")[0]
			switch {
			case tc.visible && (!ok || o.At != 7):
				t.Errorf("the records are visible, yet the group's offset for orders/0 is %+v, want 7 (the batch would be written again: a duplicate)", o)
			case !tc.visible && ok && o.At == 7:
				t.Errorf("the records were aborted, yet the group's offset for orders/0 is 7 (the batch would be lost)")
			}
		})
	}
}

// forgottenMeta is the commit metadata of the forgotten transactions'
// offset commits, and of the sink that finds them.
const forgottenMeta = `{"tool":"replay","plan":"orders","start":0,"end":1000}`

// openRecords produces two records of source partition 0 (source offsets
// 5 and 6) to orders-eos/0 in a transaction of producer pid/epoch that its
// coordinator never hears of (Produce v11, partition verification off).
func openRecords(t *testing.T, k *testenv.Kafka, id string, pid int64, epoch int16) {
	t.Helper()
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	now := time.Now().UnixMilli()
	var recs []byte
	for i := range 2 {
		recs = testenv.AppendRecord(recs, kmsg.Record{OffsetDelta: int32(i), Value: []byte("replayed"), Headers: []kmsg.Header{
			{Key: kafkasink.HeaderSourcePartition, Value: []byte("0")}, {Key: kafkasink.HeaderSourceOffset, Value: []byte{byte('5' + i)}}}})
	}
	raw := testenv.SealBatch(kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x10, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, LastOffsetDelta: 1, NumRecords: 2, Records: recs})
	prod := kmsg.NewPtrProduceRequest()
	prod.TransactionID, prod.Acks, prod.TimeoutMillis = &id, -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders-eos"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = raw
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)
	resp, err := prod.RequestWith(t.Context(), k.Client(t, kgo.MaxVersions(vs)))
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("produce the open transaction's records: %v", err)
	}
}

// commitOffset commits offset for orders/0 of group replay.orders in the
// transaction of producer pid/epoch (TxnOffsetCommit through via).
func commitOffset(t *testing.T, via *kgo.Client, id string, pid int64, epoch int16, offset int64) {
	t.Helper()
	meta := forgottenMeta
	oc := kmsg.NewPtrTxnOffsetCommitRequest()
	oc.TransactionalID, oc.Group, oc.ProducerID, oc.ProducerEpoch, oc.Generation = id, "replay.orders", pid, epoch, -1
	ot := kmsg.NewTxnOffsetCommitRequestTopic()
	ot.Topic = "orders"
	op := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	op.Offset, op.LeaderEpoch, op.Metadata = offset, -1, &meta
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	if r, err := oc.RequestWith(t.Context(), via); err != nil || kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode) != nil {
		t.Fatalf("TxnOffsetCommit: %v %+v", err, r)
	}
}

// startForgottenSink starts and closes the exactly-once sink of the
// forgotten-transaction tests (transactional ids prefix, group
// replay.orders, source orders/0 into orders-eos): starting, it ends the
// transactions its earlier incarnations left open.
func startForgottenSink(t *testing.T, addr, prefix string) {
	t.Helper()
	s, err := kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{addr}, Topic: "orders-eos", PlanName: "orders",
		Log: zerolog.New(zerolog.NewTestWriter(t)), ExactlyOnce: true, TransactionalID: prefix, Group: "replay.orders",
		SourceTopic: "orders", Partitions: []int32{0}, RetryBudget: time.Minute,
		CommitMetadata: func(int32) string { return forgottenMeta }})
	if err != nil {
		t.Fatalf("the sink did not start: %v", err)
	}
	s.Close()
}
