package testenv

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EndTransaction ends cl's open transaction (commit or abort) and waits,
// up to 30 s, until no partition of topic still holds it open. A broker
// answers EndTxn once the coordinator has logged the decision and writes
// the commit or abort markers to the partitions afterwards (Apache Kafka
// does; kfake writes them before it answers), so a record produced right
// after EndTransaction can land before the marker and the offsets a test
// expects move. The wait asks each partition's leader which producers
// hold a transaction open (DescribeProducers, KIP-664); a broker that
// cannot answer it is not waited for.
func EndTransaction(ctx context.Context, cl *kgo.Client, commit bool, topic string) error {
	id, _, err := cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(30 * time.Second)
	for {
		described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: nil})
		if err != nil {
			return nil // the broker does not describe producers: nothing to wait on
		}
		open := false
		described.EachProducer(func(p kadm.DescribedProducer) {
			open = open || p.ProducerID == id && p.CurrentTxnStartOffset >= 0
		})
		if !open {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the transaction of producer id %d is still open on %s 30s after EndTxn: its markers are not written", id, topic)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
