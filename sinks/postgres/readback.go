package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/encode"
)

// Querier is what ReadRecords reads through: a *pgx.Conn, a *pgxpool.Pool
// or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ReadRecords reads back the records a table of the default layout holds,
// with their exact bytes: the key is kafka_key, the value value_bytes
// (NULL is a tombstone, a null key), each header the key and value of an
// element of headers decoded with encode.DecodeField (base64 where the
// element says so). It is the documented decoding, in Go; in SQL:
//
//	SELECT topic, partition, "offset", "timestamp", kafka_key, value_bytes,
//	       headers FROM <table>
//
// table is an SQL name as in Config.Table. The records come in no
// particular order.
func ReadRecords(ctx context.Context, q Querier, table string) ([]record.Record, error) {
	t, err := encode.QuoteTable(table)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, `SELECT topic, partition, "offset", "timestamp", kafka_key, value_bytes, headers::text FROM `+t)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []record.Record
	for rows.Next() {
		var r record.Record
		var ts time.Time
		var headers string
		if err := rows.Scan(&r.Topic, &r.Partition, &r.Offset, &ts, &r.Key, &r.Value, &headers); err != nil {
			return nil, err
		}
		r.Time = ts.UTC()
		if r.Headers, err = DecodeHeaders([]byte(headers)); err != nil {
			return nil, fmt.Errorf("%s/%d/%d: headers: %w", r.Topic, r.Partition, r.Offset, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// DecodeHeaders reads back the headers column (of the default layout, or
// a column mapped to headers): a JSON array of {"key","value"} objects
// whose key or value is base64 where "key_encoding" or "value_encoding"
// says "base64"; a null value is a header without a value.
func DecodeHeaders(b []byte) ([]record.Header, error) { return encode.DecodeHeadersJSON(b) }
