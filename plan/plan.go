// Package plan defines a replay plan: the reviewed YAML document that names
// the source topic, the dedicated replay consumer group, the window to
// re-read, the throttle and the sink. The package is pure: it loads,
// defaults and validates plans, and never touches the network.
package plan

import (
	"cmp"
	"fmt"
	"time"

	"github.com/replay-tool/replay/internal/filter"
	"github.com/replay-tool/replay/internal/mapping"
)

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
// Its field names are a contract: fields may be added, never renamed.
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
	// Retry bounds how long the run rides out the source cluster's
	// passing errors (a leader moving, a dropped connection).
	Retry Retry `yaml:"retry"`
	// Decode turns Schema Registry framed keys and values into JSON
	// before the filter.
	Decode Decode `yaml:"decode"`
	Filter string `yaml:"filter"`
	// Mapping changes the value of each record the filter passes (set,
	// rename, drop) before the key template, the columns and the sink.
	Mapping Mapping `yaml:"mapping"`
	Sink    Sink    `yaml:"sink"`
	// Overrides change, per topic of source.topics, the filter, mapping,
	// key and the sink's table, path or target topic (TopicOverride).
	Overrides map[string]TopicOverride `yaml:"overrides"`

	// OnError decides what happens to a record that cannot be processed
	// (a failing key template, a rejected row): fail (default), skip
	// (counted in the report) or dead_letter (written to DeadLetter).
	OnError    string `yaml:"on_error"`
	DeadLetter *Sink  `yaml:"dead_letter"`
	// MaxErrors stops the run when more records than this were skipped or
	// dead-lettered: a count, or a percentage of the run's records. Unset: no limit.
	MaxErrors ErrorLimit `yaml:"max_errors"`

	// AllowDataLoss accepts a window whose start retention deleted: the
	// replay starts at the log start offset and reports the gap.
	AllowDataLoss bool `yaml:"allow_data_loss"`

	// File is the path the plan was loaded from ("" for in-memory plans).
	File     string            `yaml:"-"`
	pos      map[string]Pos    // field path ("window.from") -> where its value is
	fromEnv  map[string]bool   // field paths whose value came from a ${VAR}
	envRaw   map[string]string // their values as written, before expansion
	unsetEnv []string          // variables left unset (LoadOptions.AllowUnsetEnv)
	// emptyEnv maps the field paths where a ${VAR} expanded to "" to the
	// variable's name: allowed (an optional suffix), but warned about.
	emptyEnv map[string]string
	bad      map[string]bool // fields that failed to decode (already reported)
	problems []Problem       // what Load found, warnings included
	filter   *filter.Program // Filter compiled by validation (nil without one)
	sinks    SinkCatalog     // the sink types the plan was loaded against
	// fixedFingerprint is the fingerprint of the plan of several topics
	// that ForTopic derived this one from ("" for a plan as loaded).
	fixedFingerprint string
}

// Source names the Kafka cluster and topic to re-read.
type Source struct {
	// Brokers are bootstrap addresses, host:port.
	Brokers []string `yaml:"brokers"`
	Topic   string   `yaml:"topic"`
	// Topics lists several topics read under one window, group and
	// throttle, in replay order; exclusive with Topic (a list of one is Topic).
	Topics []string `yaml:"topics"`
	// Partitions selects partitions: "all" (default) or a list of partition numbers.
	Partitions PartitionSet `yaml:"partitions"`
	// Isolation is read_committed (default: aborted transactions and control
	// records never reach the sink) or read_uncommitted.
	Isolation string `yaml:"isolation"`
	TLS       TLS    `yaml:"tls"`
	SASL      SASL   `yaml:"sasl"`
	// ClientID is sent to the brokers so operators can tell replay traffic apart.
	ClientID string `yaml:"client_id"`
	// OpenTransactionTimeout is how long, under read_committed, a partition
	// held at its last stable offset (KIP-98) below the range end waits for
	// an open transaction before the run fails (exit 1, resumable); default
	// DefaultOpenTransactionTimeout, 0 fails at once. Not fingerprinted.
	OpenTransactionTimeout Duration `yaml:"open_transaction_timeout"`
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
// (From, optional To), per-partition Offsets, or a schedule (Every, Zone,
// Start, Delay) of contiguous calendar intervals.
type Window struct {
	// From is inclusive: the first offset whose timestamp is >= From.
	From TimeSpec `yaml:"from"`
	// To is exclusive; unset means the high watermark at resolution time.
	To TimeSpec `yaml:"to"`
	// Offsets gives explicit per-partition offset ranges [from, to).
	Offsets map[int32]OffsetRange `yaml:"offsets"`
	// OffsetsAll is offsets: {all: {from, to}}: one range for every
	// partition source.partitions selects, instead of per-partition keys.
	OffsetsAll *OffsetRange `yaml:"-"`
	// StrictTimestamps also drops records whose own timestamp is outside [From, To).
	StrictTimestamps bool `yaml:"strict_timestamps"`
	// SkewMargin widens the offset search by this much on both sides, then
	// filters strictly by record timestamp (producer clock skew).
	SkewMargin Duration `yaml:"skew_margin"`
	// Last is a calendar window instead of From and To: the last N whole
	// minutes, hours or days before resolution, in Zone (see Last).
	Last Last `yaml:"last"`

	// Every makes the window a schedule of intervals this long, aligned to
	// the wall clock of Zone (see Every).
	Every Every `yaml:"every"`
	// Zone is the IANA time zone of the intervals and of the calendar
	// bounds today, yesterday and Last; default UTC.
	Zone string `yaml:"zone"`
	// Start is the first interval's start, an absolute time on an interval
	// boundary: catch-up never goes earlier.
	Start TimeSpec `yaml:"start"`
	// Delay is how long after its end an interval becomes due (late
	// producers); default 0.
	Delay Duration `yaml:"delay"`
}

// WindowKind says how a window is given.
type WindowKind int

// The kinds of window. A valid plan's window is not WindowUnset.
const (
	WindowUnset    WindowKind = iota // neither time bounds nor offsets
	WindowTime                       // From (optional To) or Last
	WindowOffsets                    // offset ranges (Offsets, OffsetsAll)
	WindowSchedule                   // intervals (Every, Zone, Start, Delay), each replayed once due
)

// String returns "time", "offsets", "schedule" or "unset".
func (k WindowKind) String() string {
	if k < WindowTime || k > WindowSchedule {
		return "unset"
	}
	return [...]string{WindowTime: "time", WindowOffsets: "offsets", WindowSchedule: "schedule"}[k]
}

// Kind reports how the window is given. A window with both time bounds and
// offsets (which validation refuses) is WindowTime; one with a schedule
// field (every, start) is WindowSchedule, whatever else it has.
func (w Window) Kind() WindowKind {
	switch {
	case w.Every.IsSet() || w.Start.IsSet():
		return WindowSchedule
	case w.From.IsSet() || w.To.IsSet() || w.Last.IsSet():
		return WindowTime
	case len(w.Offsets) > 0 || w.OffsetsAll != nil:
		return WindowOffsets
	}
	return WindowUnset
}

// OffsetRangeOf returns the offsets window's range of partition part:
// OffsetsAll when set, else its entry in Offsets.
func (w Window) OffsetRangeOf(part int32) OffsetRange {
	if w.OffsetsAll != nil {
		return *w.OffsetsAll
	}
	return w.Offsets[part]
}

// IsTime reports whether the window is given by time bounds (or last): Kind() == WindowTime.
func (w Window) IsTime() bool { return w.Kind() == WindowTime }

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
	// MaxBatchWait is, under a limit, the longest a partition goes without
	// writing and committing what it read; default DefaultMaxBatchWait,
	// within [MinMaxBatchWait, MaxMaxBatchWait].
	MaxBatchWait Duration `yaml:"max_batch_wait"`
}

// Bounds and default of Throttle.MaxBatchWait.
const (
	DefaultMaxBatchWait = time.Second
	MinMaxBatchWait     = 10 * time.Millisecond
	MaxMaxBatchWait     = time.Hour
)

// Limited reports whether t sets a records or bytes limit.
func (t Throttle) Limited() bool { return t.RecordsPerSecond > 0 || t.BytesPerSecond > 0 }

// Defaults and bounds of Retry.MaxElapsed and Source.OpenTransactionTimeout.
// The defaults are long enough for a slow producer, short enough for a
// stuck one to be noticed. A cluster down for longer than a day needs a
// person, not a waiting run; a day covers any transaction.max.timeout.ms
// (15 minutes by default).
const (
	DefaultRetryMaxElapsed        = 5 * time.Minute
	MaxRetryMaxElapsed            = 24 * time.Hour
	DefaultOpenTransactionTimeout = 5 * time.Minute
	MaxOpenTransactionTimeout     = 24 * time.Hour
)

// Retry says how broker calls to the source cluster that fail with an
// error Kafka calls retriable are retried.
type Retry struct {
	// MaxElapsed is how long one request may keep failing, from its first
	// failure, before the run fails; default DefaultRetryMaxElapsed, 0
	// fails at the first error.
	MaxElapsed Duration `yaml:"max_elapsed"`
}

// DefaultSinkRetryMaxElapsed is SinkRetry.MaxElapsed when the plan leaves
// it out: long enough for a database failover or a broker restart.
const DefaultSinkRetryMaxElapsed = 5 * time.Minute

// SinkRetry says how long writes to a sink that fail with a transient
// error (a lost connection, a failover, lock contention) are retried.
type SinkRetry struct {
	// MaxElapsed is how long one batch may keep failing before the
	// partition fails; default DefaultSinkRetryMaxElapsed, at most
	// MaxRetryMaxElapsed, 0 fails at the first error.
	MaxElapsed Duration `yaml:"max_elapsed"`
}

// Sink is where replayed records go: a section of the plan (sink, or
// dead_letter). It holds the fields every sink type takes; the type's own
// are in Config, a struct its driver declares (sinks/<driver>) and its
// descriptor makes (SinkDescriptor).
type Sink struct {
	// Type is one of the types of the SinkCatalog the plan is loaded with.
	Type SinkType `yaml:"type"`

	// Key is the idempotency key: a Go text/template over the record
	// ({{ .Key }}, {{ .Value.id }}, {{ index .Headers "h" }}, {{ .Partition }},
	// {{ .Offset }}, {{ .Topic }}); default "<topic>/<partition>/<offset>".
	Key string `yaml:"key"`
	// BatchSize is the largest number of records handed to the sink in one
	// durable write, and so between two commits. Default 1000.
	BatchSize int `yaml:"batch_size"`

	// Retry bounds the retries of writes that fail with a transient error.
	Retry SinkRetry `yaml:"retry"`

	// Config holds the section's fields of its type: the pointer its
	// descriptor's NewConfig returns, decoded from the same mapping (nil
	// for a type without fields of its own). Drivers read it with ConfigOf.
	Config any `yaml:"-"`
}

// Pos is a position in the plan file, 1-based.
type Pos struct{ Line, Col int }

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Position returns where the value of field (a dotted path such as
// "window.from") is written, or the zero Pos when it is not in the file.
func (p *Plan) Position(field string) Pos { return p.pos[field] }

// FilterProgram returns the plan's filter, compiled when the plan was
// validated (compiled now for a plan built in memory); nil when the plan
// has no filter.
func (p *Plan) FilterProgram() (*filter.Program, error) {
	if p.filter != nil || p.Filter == "" {
		return p.filter, nil
	}
	return compileFilter(p)
}

// MappingProgram returns the plan's mapping, compiled; nil when the plan
// has none.
func (p *Plan) MappingProgram() (*mapping.Mapping, error) { return p.Mapping.Compile() }

// FromEnv reports whether the value of field came from a ${VAR} expansion.
func (p *Plan) FromEnv(field string) bool { return p.fromEnv[field] }

// DefaultBatchSize is the sink batch size when the plan sets none.
const DefaultBatchSize = 1000

// applyDefaults fills every unset field with its safe default. It is the only
// place defaults live. A written 0 (batch_size, a duration) is no unset field.
func (p *Plan) applyDefaults() {
	if p.Source.Topic == "" && len(p.Source.Topics) == 1 {
		p.Source.Topic, p.Source.Topics = p.Source.Topics[0], nil
	}
	if !p.Source.Partitions.All && len(p.Source.Partitions.List) == 0 {
		p.Source.Partitions.All = true // a plan that names no partitions replays them all
	}
	// Aborted transactions must never reach a sink unless asked for.
	p.Source.Isolation = cmp.Or(p.Source.Isolation, ReadCommitted)
	p.Source.ClientID = cmp.Or(p.Source.ClientID, "replay")
	// A cluster's bad minutes (a broker restart, a leader election) pass,
	// and a producer's transaction may take a while to commit.
	setUnwritten(p, "retry.max_elapsed", &p.Retry.MaxElapsed, Duration(DefaultRetryMaxElapsed))
	setUnwritten(p, "source.open_transaction_timeout", &p.Source.OpenTransactionTimeout, Duration(DefaultOpenTransactionTimeout))
	p.Decode.defaults()
	// A record that cannot be processed stops the run: nothing is lost silently.
	p.OnError = cmp.Or(p.OnError, OnErrorFail)
	setUnwritten(p, "throttle.max_batch_wait", &p.Throttle.MaxBatchWait, Duration(DefaultMaxBatchWait))
	p.applySinkDefaults("sink", &p.Sink)
	if p.DeadLetter != nil {
		p.applySinkDefaults("dead_letter", p.DeadLetter)
	}
}

// setUnwritten sets *v to def when it is zero and field is not written.
func setUnwritten[T comparable](p *Plan, field string, v *T, def T) {
	var zero T
	if _, written := p.pos[field]; *v == zero && !written {
		*v = def
	}
}
