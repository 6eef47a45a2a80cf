package sinks

import "github.com/replay-tool/replay/plan"

// ConnectionsField describes connections, the field of the sinks that
// write through several connections at once (postgres, http).
var ConnectionsField = plan.FieldDescriptor{Name: "connections",
	Doc: "postgres and http: connections written through at once, 1..64 (default 1); records are sharded by idempotency key (a key always goes through one connection, in order), and a commit covers only what every connection made durable."}

// MaxConnections bounds a sink's connections.
const MaxConnections = 64

// CheckConnections checks n, the connections of the section c checks:
// unset is 1.
func CheckConnections(c *plan.SinkCheck, n int) {
	if c.Present("connections") && (n < 1 || n > MaxConnections) {
		c.Add("connections", "%d: want 1..%d connections", n, MaxConnections)
	}
}
