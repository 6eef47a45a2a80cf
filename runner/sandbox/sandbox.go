// Package sandbox runs an in-process Kafka broker (franz-go's kfake, which
// speaks the real Kafka protocol over TCP) and seeds it with realistic
// order events. It backs `replay demo`, `replay sandbox` and the tests.
package sandbox

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Sandbox is a running in-process Kafka cluster.
type Sandbox struct {
	*kfake.Cluster
	// Addr is the bootstrap address, host:port on the loopback interface.
	Addr string
}

// Start starts a one-broker cluster on 127.0.0.1:port (0 = any free port)
// with the given topics created with partitions each. Close it when done.
func Start(port int, partitions int32, topics ...string) (*Sandbox, error) {
	// A cluster id of its own, as a real cluster has: a run's local record
	// (keyed by cluster id, group and plan) of an earlier sandbox must not
	// stand for this one.
	id := fmt.Sprintf("sandbox-%016x", rand.Uint64())
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.ClusterID(id)} // kfake listens on 127.0.0.1 only
	if port != 0 {
		opts = append(opts, kfake.Ports(port))
	}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(partitions, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start embedded Kafka: %w", err)
	}
	return &Sandbox{Cluster: c, Addr: c.ListenAddrs()[0]}, nil
}

// Order event vocabulary.
var (
	statuses   = []string{"created", "paid", "paid", "paid", "shipped", "cancelled", "refunded"}
	currencies = []string{"EUR", "USD", "GBP", "CHF", "JPY"}
)

// Seed describes order events to produce.
type Seed struct {
	Topic string
	// N is the number of records.
	N int
	// From and To bound the CreateTime timestamps, spread evenly and
	// increasing with each record: [From, To).
	From, To time.Time
	// Rand seeds the content (default 1): the same seed gives the same data.
	Rand uint64
	// Compression is the codec of the produced record batches (Kafka's
	// compression.type: gzip, snappy, lz4, zstd); zero: uncompressed.
	Compression kafka.Compression
}

// Timestamp returns the CreateTime of the i-th seeded record.
func (s Seed) Timestamp(i int) time.Time {
	span := s.To.Sub(s.From)
	return s.From.Add(time.Duration(float64(span) * float64(i) / float64(s.N))).Truncate(time.Millisecond)
}

// Produce writes the seeded records to addr with kafka-go's Writer (a
// Transport of its own, RequiredAcks all, key-hashed partitions, every Message.Time set so
// records carry their CreateTime, not the producer's clock). Timestamps
// increase with the offset in every partition.
func Produce(ctx context.Context, addr string, s Seed) error {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections() // after w.Close
	w := &kafka.Writer{
		Addr:         kafka.TCP(addr),
		Topic:        s.Topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    2000,
		BatchBytes:   4 << 20,
		BatchTimeout: 5 * time.Millisecond,
		Compression:  s.Compression,
		// A transport of its own: kafka-go's default one caches each
		// topic's metadata for the whole process, and a topic deleted
		// and created again under the same name would be written with
		// the old one's partitions and leaders.
		Transport: tr,
	}
	defer w.Close()
	seed := cmp.Or(s.Rand, 1)
	rng := rand.New(rand.NewPCG(seed, seed))
	const chunk = 20000
	msgs := make([]kafka.Message, 0, chunk)
	for i := 0; i < s.N; i++ {
		msgs = append(msgs, Order(rng, i, s.Timestamp(i)))
		if len(msgs) == chunk || i == s.N-1 {
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				return fmt.Errorf("seed %s: %w", s.Topic, err)
			}
			msgs = msgs[:0]
		}
	}
	return nil
}

// Order returns the i-th order event: key "ord-<i>", a JSON value of about
// 280 bytes, a trace header, timestamp ts.
func Order(rng *rand.Rand, i int, ts time.Time) kafka.Message {
	id := "ord-" + strconv.Itoa(i)
	v := fmt.Sprintf(`{"id":%q,"customer":"cus-%05d","status":%q,"amount":%.2f,"currency":%q,"items":%d,`+
		`"created_at":%q,"channel":"web","shipping":{"country":"DE","city":"Berlin","zip":"10%03d"},"fx_rate":%.6f,"note":"replay demo order"}`,
		id, rng.IntN(50000), statuses[rng.IntN(len(statuses))], float64(rng.IntN(100000))/100, currencies[rng.IntN(len(currencies))],
		1+rng.IntN(9), ts.UTC().Format(time.RFC3339Nano), rng.IntN(1000), 0.5+rng.Float64())
	return kafka.Message{
		Key:     []byte(id),
		Value:   []byte(v),
		Time:    ts,
		Headers: []kafka.Header{{Key: "trace-id", Value: []byte(fmt.Sprintf("%016x", rng.Uint64()))}},
	}
}

// Codec maps a codec name (Kafka's compression.type) to kafka-go's
// codec: "" or none is 0 (uncompressed); anything else but gzip, snappy,
// lz4 and zstd is an error that lists them.
func Codec(name string) (kafka.Compression, error) {
	codecs := map[string]kafka.Compression{"": 0, "none": 0, "gzip": kafka.Gzip, "snappy": kafka.Snappy, "lz4": kafka.Lz4, "zstd": kafka.Zstd}
	if c, ok := codecs[name]; ok {
		return c, nil
	}
	return 0, fmt.Errorf("--compression %q: want none, gzip, snappy, lz4 or zstd", name)
}
