// Package plan defines a replay plan: the reviewed YAML document that names
// the source topic, the dedicated replay consumer group, the window to
// re-read, the throttle and the sink. The package is pure: it loads,
// defaults and validates plans, and never touches the network.
package plan

import "fmt"

// Isolation levels accepted in source.isolation (Kafka's isolation.level, KIP-98).
const (
	ReadCommitted   = "read_committed"
	ReadUncommitted = "read_uncommitted"
)

// Error policies accepted in on_error.
const (
	OnErrorFail       = "fail"
	OnErrorSkip       = "skip"
	OnErrorDeadLetter = "dead_letter"
)

// Plan is one replay plan, as decoded from YAML and completed by defaults.
// Field names are a contract (DESIGN.md §1): they may be added to, never renamed.
type Plan struct {
	Version     int    `yaml:"version"`
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Owner       string `yaml:"owner"`
	Ticket      string `yaml:"ticket"`

	Source   Source   `yaml:"source"`
	Group    string   `yaml:"group"`
	Window   Window   `yaml:"window"`
	Throttle Throttle `yaml:"throttle"`
	Filter   string   `yaml:"filter"`
	Sink     Sink     `yaml:"sink"`

	// OnError decides what happens to a record that cannot be processed
	// (a key template that fails on it, a row the sink rejects): fail (default),
	// skip (counted in the report) or dead_letter (written to DeadLetter).
	OnError    string `yaml:"on_error"`
	DeadLetter *Sink  `yaml:"dead_letter"`

	// AllowDataLoss accepts a window whose start was already deleted by
	// retention: the replay starts at the log start offset and reports the gap.
	AllowDataLoss bool `yaml:"allow_data_loss"`

	// File is the path the plan was loaded from ("" for in-memory plans).
	File string `yaml:"-"`
	// pos maps a field path such as "window.from" to where its value is written.
	pos map[string]Pos
	// fromEnv records the field paths whose value came from a ${VAR}.
	fromEnv map[string]bool
	// envRaw holds, for those fields, the value as written (before expansion).
	envRaw map[string]string
	// bad records the fields that failed to decode (already reported).
	bad map[string]bool
	// problems holds what Load found, warnings included.
	problems []Problem
}

// Source names the Kafka cluster and topic to re-read.
type Source struct {
	// Brokers are bootstrap addresses, host:port.
	Brokers []string `yaml:"brokers"`
	Topic   string   `yaml:"topic"`
	// Partitions selects partitions: "all" (default) or a list of partition numbers.
	Partitions PartitionSet `yaml:"partitions"`
	// Isolation is read_committed (default: aborted transactions and control
	// records never reach the sink) or read_uncommitted.
	Isolation string `yaml:"isolation"`
	TLS       TLS    `yaml:"tls"`
	SASL      SASL   `yaml:"sasl"`
	// ClientID is sent to the brokers so operators can tell replay traffic apart.
	ClientID string `yaml:"client_id"`
}

// TLS configures an encrypted connection. Files are PEM encoded.
type TLS struct {
	Enabled            bool   `yaml:"enabled"`
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// SASL configures authentication: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (KIP-84).
// The password must come from the environment (${VAR}).
type SASL struct {
	Mechanism string `yaml:"mechanism"`
	Username  string `yaml:"username"`
	Password  string `yaml:"password"`
}

// Window is the part of the topic to replay: exactly one of a time window
// (From, optional To) or per-partition Offsets.
type Window struct {
	// From is inclusive: the first offset whose timestamp is >= From.
	From TimeSpec `yaml:"from"`
	// To is exclusive; unset means the high watermark at resolution time.
	To TimeSpec `yaml:"to"`
	// Offsets gives explicit per-partition offset ranges [from, to).
	Offsets map[int32]OffsetRange `yaml:"offsets"`
	// StrictTimestamps also drops records whose own timestamp is outside [From, To).
	StrictTimestamps bool `yaml:"strict_timestamps"`
	// SkewMargin widens the offset search by this much on both sides, then
	// filters strictly by record timestamp (producer clock skew).
	SkewMargin Duration `yaml:"skew_margin"`
}

// IsTime reports whether the window is given by time bounds.
func (w Window) IsTime() bool { return w.From.IsSet() || w.To.IsSet() }

// OffsetRange is an explicit offset range [From, To) of one partition.
type OffsetRange struct {
	From OffsetSpec `yaml:"from"`
	To   OffsetSpec `yaml:"to"`
}

// Throttle limits the replay across all partitions of one process.
// Zero means unlimited.
type Throttle struct {
	RecordsPerSecond float64  `yaml:"records_per_second"`
	BytesPerSecond   ByteSize `yaml:"bytes_per_second"`
}

// Sink is where replayed records go. Which fields apply depends on Type.
type Sink struct {
	// Type is one of postgres, file, stdout.
	Type string `yaml:"type"`

	// Path is the output file of a file sink.
	Path string `yaml:"path"`

	// DSN is the PostgreSQL connection string; a password must come from ${VAR}.
	DSN string `yaml:"dsn"`
	// Table is the target table of a database sink, optionally schema-qualified.
	Table string `yaml:"table"`
	// OnConflict is update (default: the replayed record wins) or ignore.
	OnConflict string `yaml:"on_conflict"`
	// CreateTable creates the table with the default layout when it is missing.
	CreateTable bool `yaml:"create_table"`

	// Key is the idempotency key: a Go text/template over the record
	// ({{ .Key }}, {{ .Value.id }}, {{ index .Headers "h" }}, {{ .Partition }},
	// {{ .Offset }}, {{ .Topic }}); default "<topic>/<partition>/<offset>".
	Key string `yaml:"key"`

	// BatchSize is the largest number of records handed to the sink in one
	// durable write, and so between two commits. Default 1000.
	BatchSize int `yaml:"batch_size"`
}

// Pos is a position in the plan file, 1-based.
type Pos struct{ Line, Col int }

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Position returns where the value of field (a dotted path such as
// "window.from") is written, or the zero Pos when it is not in the file.
func (p *Plan) Position(field string) Pos { return p.pos[field] }

// FromEnv reports whether the value of field came from a ${VAR} expansion.
func (p *Plan) FromEnv(field string) bool { return p.fromEnv[field] }

// DefaultBatchSize is the sink batch size when the plan sets none: large
// enough to amortise a database round trip and a commit, small enough that a
// crash re-delivers little.
const DefaultBatchSize = 1000

// applyDefaults fills every unset field with its safe default. It is the only
// place defaults live.
func (p *Plan) applyDefaults() {
	if !p.Source.Partitions.All && len(p.Source.Partitions.List) == 0 {
		// Documented default: a plan that names no partitions replays them all.
		p.Source.Partitions.All = true
	}
	if p.Source.Isolation == "" {
		// Aborted transactions must never reach a sink unless asked for.
		p.Source.Isolation = ReadCommitted
	}
	if p.Source.ClientID == "" {
		p.Source.ClientID = "replay"
	}
	if p.OnError == "" {
		// A record that cannot be processed stops the run: nothing is lost silently.
		p.OnError = OnErrorFail
	}
	if p.Sink.BatchSize == 0 {
		p.Sink.BatchSize = DefaultBatchSize
	}
	if p.Sink.OnConflict == "" {
		// A replay exists to overwrite what the buggy run wrote.
		p.Sink.OnConflict = "update"
	}
	if p.DeadLetter != nil && p.DeadLetter.BatchSize == 0 {
		p.DeadLetter.BatchSize = DefaultBatchSize
	}
}
