package kafka

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
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
// as the Java producer's default partitioner (BuiltInPartitioner,
// Utils.toPositive(Utils.murmur2(key)) % n) puts it; for a null key,
// src modulo n. The Java producer sends key-less records to one "sticky"
// partition per batch (KIP-480, KIP-794); replay's batches are of one
// source partition, so it sticks to the partition that keeps their source
// order, and a re-delivery lands where the first delivery did.
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
// least once and exactly once), on one copy of the record bytes (the
// runner reuses them once Write returns, while a cancelled produce may
// still send):
//
//   - key: the source record's key as is (a null key stays null, an empty
//     key stays empty), unless the plan's key: template replaces it (the
//     message key is then the template's result);
//   - value, headers (order, repeats, null and binary values kept) and
//     timestamp (as CreateTime) are the source record's;
//   - the provenance headers follow the record's own, then HeaderKey with
//     the idempotency key;
//   - the partition is Partition of the message key over n partitions.
//
// A key template failing on a record, and a record larger than limit
// bytes (messageSize), return its *record.Error.
func (s *Sink) records(batch []record.Record, n int, limit int64) ([]*kgo.Record, error) {
	size, nh := 0, 0
	for i := range batch {
		r := &batch[i]
		size += len(r.Key) + len(r.Value) + len(r.Topic) + len(s.planName) + 64
		for _, h := range r.Headers {
			size += len(h.Value)
		}
		nh += len(r.Headers) + 6
	}
	buf := make([]byte, 0, size)
	// clone copies b to buf; nil stays nil (a tombstone, a null header).
	// A slice taken before buf grows keeps pointing at the earlier array.
	clone := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		buf = append(buf, b...)
		return buf[len(buf)-len(b) : len(buf) : len(buf)]
	}
	mark := func(from int) []byte { return buf[from:len(buf):len(buf)] }
	str := func(v string) []byte {
		at := len(buf)
		buf = append(buf, v...)
		return mark(at)
	}
	headers := make([]kgo.RecordHeader, 0, nh)
	out := make([]kgo.Record, len(batch))
	ptrs := make([]*kgo.Record, len(batch))
	for i := range batch {
		r := &batch[i]
		m := &out[i]
		from := len(headers)
		for _, h := range r.Headers {
			headers = append(headers, kgo.RecordHeader{Key: h.Key, Value: clone(h.Value)})
		}
		at := len(buf)
		buf = strconv.AppendInt(buf, int64(r.Partition), 10)
		part := mark(at)
		at = len(buf)
		buf = strconv.AppendInt(buf, r.Offset, 10)
		off := mark(at)
		at = len(buf)
		buf = r.Time.UTC().AppendFormat(buf, encode.TimeLayout)
		ts := mark(at)
		at = len(buf)
		if s.templated {
			k, err := s.keyer.Key(r)
			if err != nil {
				return nil, s.keyError(r, err)
			}
			buf = append(buf, k...)
		} else {
			buf = appendDefaultKey(buf, r)
		}
		idem := mark(at)
		headers = append(headers,
			kgo.RecordHeader{Key: HeaderSourceTopic, Value: str(r.Topic)},
			kgo.RecordHeader{Key: HeaderSourcePartition, Value: part},
			kgo.RecordHeader{Key: HeaderSourceOffset, Value: off},
			kgo.RecordHeader{Key: HeaderSourceTimestamp, Value: ts},
			kgo.RecordHeader{Key: HeaderPlan, Value: str(s.planName)},
			kgo.RecordHeader{Key: HeaderKey, Value: idem},
		)
		m.Headers = headers[from:len(headers):len(headers)]
		if s.templated {
			m.Key = idem
		} else {
			m.Key = clone(r.Key)
		}
		m.Value = clone(r.Value)
		m.Timestamp = r.Time // CreateTime: the source record's
		m.Partition = Partition(s.keep, m.Key, r.Partition, n)
		if size := messageSize(m); size > limit {
			return nil, record.NewError(r, fmt.Errorf("kafka sink: produce to %s: the message (%d bytes of key, value and headers) is larger than the topic's max.message.bytes, %d: %w", s.where, size, s.maxBytes, kerr.MessageTooLarge))
		}
		ptrs[i] = m
	}
	return ptrs, nil
}

// appendDefaultKey appends sinks.DefaultKey(r) without a string.
func appendDefaultKey(b []byte, r *record.Record) []byte {
	b = append(b, r.Topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	b = append(b, '/')
	return strconv.AppendInt(b, r.Offset, 10)
}

// keyError explains a key template that rendered nothing on a null key:
// the kafka sink keeps the source key without key:.
func (s *Sink) keyError(r *record.Record, err error) error {
	var re *record.Error
	if r.Key == nil && errors.As(err, &re) && errors.Is(err, sinks.ErrEmptyKey) {
		return record.NewError(r, fmt.Errorf("kafka sink: %w, and the record's key is null (a key template replaces the message key): drop key: to keep each record's own key, a null key included", re.Err))
	}
	return err
}
