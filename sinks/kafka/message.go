package kafka

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/encode"
)

// Murmur2 is the 32-bit murmur2 hash of b as the Java client computes it
// (org.apache.kafka.common.utils.Utils.murmur2, seed 0x9747b28c), the hash
// of the Java producer's default partitioner.
func Murmur2(b []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(b)
	h := seed ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch tail := b[n&^3:]; len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// Partition is the target partition of a message whose key is key (nil: a
// null key), from source partition src, on a target topic of n
// partitions: src itself with keep (keep_partition); else, for a key (an
// empty key too), murmur2 of the key with the sign bit cleared, modulo n,
// as the Java producer's default partitioner puts it; for a null key, src
// modulo n (where a re-delivery lands too, in source order).
func Partition(keep bool, key []byte, src int32, n int) int32 {
	switch {
	case keep:
		return src
	case n <= 0:
		return 0
	case key == nil:
		return src % int32(n)
	}
	return int32(int64(Murmur2(key)&0x7fffffff) % int64(n))
}

// messageSize is what a message adds to a record batch, as the sink's
// limit check counts it: key, value, and header keys and values.
func messageSize(r *kgo.Record) int64 {
	size := int64(len(r.Key) + len(r.Value))
	for _, h := range r.Headers {
		size += int64(len(h.Key) + len(h.Value))
	}
	return size
}

// records builds the messages of batch, the same for both producers (at
// least once and exactly once):
//
//   - key: the source record's key as is (a null key stays null, an empty
//     key stays empty), unless the plan's key: template replaces it (the
//     message key is then the template's result);
//   - value, headers (order, repeats, null and binary values kept) and
//     timestamp (as CreateTime) are the source record's; under a mapping
//     the value is the mapped value (record.Record.Mapped);
//   - the provenance headers follow the record's own, then HeaderMapped
//     for a mapped value, then HeaderKey with the idempotency key;
//   - the partition is Partition of the message key over the partitions.
//
// The messages share the record bytes: Write returns only once kgo
// finished every message. A record larger than max.message.bytes less
// kafkaBatchOverhead (messageSize) returns its *record.Error.
func (s *Sink) records(batch []record.Record) ([]*kgo.Record, error) {
	s.mu.Lock()
	n := s.partitions
	s.mu.Unlock()
	nh := 0
	for i := range batch {
		nh += len(batch[i].Headers) + 7
	}
	// buf holds what the sink adds (provenance values, idempotency keys).
	buf := make([]byte, 0, len(batch)*(len(batch[0].Topic)+64))
	// add keeps b, buf with bytes appended, as buf and returns those bytes.
	add := func(b []byte) []byte { at := len(buf); buf = b; return b[at:len(b):len(b)] }
	topic, topicBytes := "", []byte(nil)
	plan := []byte(s.planName)
	headers := make([]kgo.RecordHeader, 0, nh)
	out := make([]kgo.Record, len(batch))
	ptrs := make([]*kgo.Record, len(batch))
	now := time.Now()
	for i := range batch {
		r := &batch[i]
		m := &out[i]
		from := len(headers)
		for _, h := range r.Headers {
			headers = append(headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		if r.Topic != topic || topicBytes == nil {
			topic, topicBytes = r.Topic, []byte(r.Topic)
		}
		part := add(strconv.AppendInt(buf, int64(r.Partition), 10))
		off := add(strconv.AppendInt(buf, r.Offset, 10))
		ts := add(encode.AppendTimestamp(buf, r.Time))
		idem := add(r.AppendIdempotencyKey(buf))
		headers = append(headers,
			kgo.RecordHeader{Key: HeaderSourceTopic, Value: topicBytes},
			kgo.RecordHeader{Key: HeaderSourcePartition, Value: part},
			kgo.RecordHeader{Key: HeaderSourceOffset, Value: off},
			kgo.RecordHeader{Key: HeaderSourceTimestamp, Value: ts},
			kgo.RecordHeader{Key: HeaderPlan, Value: plan},
		)
		if r.Mapped() {
			headers = append(headers, kgo.RecordHeader{Key: HeaderMapped, Value: mappedValue})
		}
		headers = append(headers, kgo.RecordHeader{Key: HeaderKey, Value: idem})
		m.Headers = headers[from:len(headers):len(headers)]
		if s.templated {
			m.Key = idem
		} else {
			m.Key = r.Key
		}
		m.Value = r.Value
		m.Timestamp = r.Time // CreateTime: the source record's
		m.Partition = Partition(s.keep, m.Key, r.Partition, n)
		if size := messageSize(m); size > s.maxBytes-kafkaBatchOverhead {
			return nil, record.NewError(r, fmt.Errorf("kafka sink: produce to %s: the message (%d bytes of key, value and headers) is larger than the topic's max.message.bytes, %d: %w", s.where, size, s.maxBytes, kerr.MessageTooLarge))
		}
		if err := s.checkTimestamp(r.Time, now); err != nil {
			return nil, record.NewError(r, err)
		}
		ptrs[i] = m
	}
	return ptrs, nil
}

// checkTimestamp refuses a timestamp the target topic's broker would
// refuse at now (INVALID_TIMESTAMP): further than message.timestamp.
// before.max.ms before now or after.max.ms after it (readTopicConfig).
func (s *Sink) checkTimestamp(ts, now time.Time) error {
	var far, lim time.Duration
	var name string
	switch {
	case s.tsBefore > 0 && now.Sub(ts) > s.tsBefore:
		far, lim, name = now.Sub(ts), s.tsBefore, "before"
	case s.tsAfter > 0 && ts.Sub(now) > s.tsAfter:
		far, lim, name = ts.Sub(now), s.tsAfter, "after"
	default:
		return nil
	}
	return fmt.Errorf("kafka sink: produce to %s: the record's timestamp %s is %s %s now, beyond the topic's message.timestamp.%s.max.ms (%s); raise it on the target topic to take such records: %w",
		s.where, ts.UTC().Format(time.RFC3339Nano), far.Round(time.Second), name, name, lim, kerr.InvalidTimestamp)
}
