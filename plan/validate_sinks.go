package plan

import (
	"fmt"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// sinkFieldsApply reports fields written for a sink type that does not use
// them (topic: on a postgres sink, table: on a file sink): a setting that
// would silently do nothing is a mistake in the plan. Only fields written in
// the file count: a default (on_conflict: update) is not a mistake.
func (v *validator) sinkFieldsApply(field string, s *Sink) {
	for _, f := range sinkFieldTable {
		if len(f.Types) == 0 || !v.present(field+"."+f.Name) || slices.Contains(f.Types, s.Type) {
			continue
		}
		v.add(field+"."+f.Name, "does not apply to %s sink (only %s sinks take it): remove it", article(s.Type), strings.Join(typeStrings(f.Types), " and "))
	}
}

// sinkRequired reports the fields the sink's type requires that are not set.
func (v *validator) sinkRequired(field string, s *Sink, d SinkDescriptor) {
	for _, name := range d.Required {
		if !s.isSet(name) {
			v.add(field+"."+name, "%s", d.missing[name])
		}
	}
}

// isSet reports whether the field with yaml name name holds a value: a
// non-empty string, list or map, or any other non-zero value.
func (s *Sink) isSet(name string) bool {
	v := reflect.ValueOf(s).Elem()
	for i := 0; i < v.NumField(); i++ {
		if strings.Split(v.Type().Field(i).Tag.Get("yaml"), ",")[0] != name {
			continue
		}
		switch f := v.Field(i); f.Kind() {
		case reflect.Slice, reflect.Map, reflect.String:
			return f.Len() > 0
		default:
			return !f.IsZero()
		}
	}
	return false
}

// article returns "a kafka", "an http".
func article(sinkType SinkType) string {
	if sinkType == SinkHTTP {
		return "an " + string(sinkType)
	}
	return "a " + string(sinkType)
}

func (v *validator) sqlite(field string, s *Sink) {
	if s.Table != "" && !tableRe.MatchString(s.Table) {
		v.add(field+".table", "%q is not a plain table name ([schema.]name of letters, digits, _)", s.Table)
	}
	v.enum(field+".on_conflict", s.OnConflict, []string{"update", "ignore"})
	v.database(field, s)
}

// database checks what the postgres and sqlite sinks share: the column
// mapping and the checkpoint table.
func (v *validator) database(field string, s *Sink) {
	v.columns(field, s, true)
	ct := s.CheckpointTable
	switch {
	case !v.present(field + ".checkpoint_table"):
	case ct == "":
		v.add(field+".checkpoint_table", "empty: name the table, e.g. replay_checkpoints, or remove the field")
	case !tableRe.MatchString(ct):
		v.add(field+".checkpoint_table", "%q is not a plain table name ([schema.]name of letters, digits, _)", ct)
	case strings.EqualFold(ct, s.Table):
		v.add(field+".checkpoint_table", "is the sink's own table: name another table, e.g. replay_checkpoints")
	case field == "dead_letter":
		v.add(field+".checkpoint_table", "applies to the sink only: dead letters do not say where the run is; remove it")
	case v.p.OnError == OnErrorDeadLetter:
		v.warn(field+".checkpoint_table", "not used to resume with on_error: dead_letter: dead letters are written after the sink's transaction, so resuming from its checkpoint could lose them; a resume starts from the Kafka commit and re-writes the records after it (idempotently)")
	}
	if v.present(field + ".on_tombstone") {
		v.enum(field+".on_tombstone", s.OnTombstone, OnTombstones)
	}
	v.version(field, s)
	if s.Type == SinkPostgres && (s.CopyThreshold < 1 || s.CopyThreshold > 1000000) {
		v.add(field+".copy_threshold", "%d: want 1..1000000 rows (batches with more rows go through COPY)", s.CopyThreshold)
	}
}

// versionFields are the fields that can order a key's updates, for
// messages.
const versionFields = "offset, timestamp, value.<path> or header.<name>"

// version checks a database sink's version field, and warns where an
// upsert may rewind rows: on_conflict: update without version (a replay of
// last week's records overwrites this week's rows) unless overwrite says
// so, and version: offset under a key that can move between partitions.
func (v *validator) version(field string, s *Sink) {
	f := field + ".version"
	if s.Version == "" {
		if v.present(f) {
			v.add(f, "empty: name the field that orders a key's updates, e.g. value.updated_at, or remove version")
			return
		}
		if field == "sink" && s.OnConflict != "ignore" && !s.Overwrite {
			v.warn(field+".on_conflict", "update without version: a replayed record overwrites its row even when the row is newer (the live pipeline may have updated it since); add version: <field> (e.g. value.updated_at) to change rows only for a greater version, or overwrite: true to accept it")
		}
		return
	}
	fl, err := ParseField(s.Version)
	if err != nil {
		// The hint names only fields that can order updates.
		msg := fmt.Sprintf("unknown field %q: want %s", s.Version, versionFields)
		if hint := suggest(s.Version, []string{"offset", "timestamp"}); hint != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", hint)
		} else if hint := suggestField(s.Version); strings.HasPrefix(hint, "value.") || strings.HasPrefix(hint, "header.") {
			msg += fmt.Sprintf(" (did you mean %q?)", hint)
		}
		v.add(f, "%s", msg)
		return
	}
	switch fl.Kind {
	case FieldOffset, FieldTimestamp, FieldValuePath, FieldHeader:
	default:
		v.add(f, "%q cannot order updates: want %s", s.Version, versionFields)
		return
	}
	if fl.Kind == FieldTimestamp {
		v.warn(f, "timestamps order updates only to the millisecond, and on a topic with message.timestamp.type=LogAppendTime every record of a batch carries the batch's time: of two updates of a key with one timestamp the first wins (an equal version is a duplicate); prefer a field of the value that the producer increments, e.g. value.updated_at")
	}
	if fl.Kind == FieldOffset && s.Key != "" {
		v.warn(f, "offsets order updates only within one partition: with key %q a key may move between partitions, and a record of another partition with a smaller offset would be taken for stale; prefer a field of the value, e.g. value.updated_at", s.Key)
	}
}

// columnNameRe is a plain SQL column name; the database sinks fold it to
// lower case, as SQL does.
var columnNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// columns checks sink.columns: every field is one a record has; a database
// sink maps its idempotency key to exactly one column (the table's unique
// key, the target of ON CONFLICT), and its column names are plain SQL names.
func (v *validator) columns(field string, s *Sink, db bool) {
	f := field + ".columns"
	keys := 0
	folded := map[string]string{}
	for _, c := range s.Columns {
		cf := f + "." + c.Name
		if _, ok := v.p.pos[cf]; !ok && c.pos.Line > 0 {
			v.p.pos[cf] = c.pos // point problems at the column, not at columns:
		}
		switch fl, err := ParseField(c.Field); {
		case err != nil:
			v.add(cf, "%v", err)
		case fl.Kind == FieldKey:
			keys++
		}
		if !db {
			continue
		}
		if !columnNameRe.MatchString(c.Name) {
			v.add(cf, "%q is not a plain column name (letters, digits, _)", c.Name)
			continue
		}
		lower := strings.ToLower(c.Name)
		if prev, dup := folded[lower]; dup {
			v.add(cf, "the same column as %s: unquoted SQL names fold to lower case", prev)
		}
		folded[lower] = c.Name
	}
	if !db || len(s.Columns) == 0 {
		return
	}
	switch {
	case keys == 0:
		v.add(f, "no column holds the idempotency key: map one to key, e.g. `id: key` (the table's unique key, the target of ON CONFLICT)")
	case keys > 1:
		v.add(f, "%d columns hold the idempotency key: map key to one column only (the table's unique key)", keys)
	}
}

// ValueFormats are the values of a sink's value_format; "" is auto.
var ValueFormats = []string{"auto", "json", "text", "base64"}

// valueFormat checks value_format where the sink type takes it: one of
// ValueFormats, and not with a csv file (its cells are text).
func (v *validator) valueFormat(field string, s *Sink) {
	if s.ValueFormat == "" || !v.enum(field+".value_format", s.ValueFormat, ValueFormats) {
		return
	}
	if s.Type == SinkFile && s.Format == "csv" && s.ValueFormat != "auto" {
		v.add(field+".value_format", "applies to format: jsonl only (csv cells are text): remove value_format, or use format: jsonl")
	}
}

// fileSink checks a file sink: its path, format, columns and per_partition.
func (v *validator) fileSink(field string, s *Sink) {
	switch {
	case s.Path == "":
	case strings.HasSuffix(s.Path, "/") || strings.HasSuffix(s.Path, string(filepath.Separator)):
		v.add(field+".path", "%q ends in %q: it names a directory; give the file to write, e.g. %s", s.Path, s.Path[len(s.Path)-1:], filepath.Join(s.Path, "orders.jsonl"))
	}
	if v.enum(field+".format", s.Format, []string{"jsonl", "csv"}) {
		switch {
		case s.Format == "csv" && len(s.Columns) == 0 && !v.p.bad[field+".columns"]:
			v.add(field+".columns", "missing: a csv file needs its columns, e.g. {order_id: value.id, status: value.status, offset: offset}")
		case s.Format == "jsonl" && v.present(field+".columns"):
			v.add(field+".columns", "applies to format: csv only (jsonl writes whole records): set format: csv, or remove columns")
		}
	}
	v.columns(field, s, false)
	if v.present(field+".order") && v.enum(field+".order", s.Order, []string{OrderInterleaved, OrderPartition}) && s.Order == OrderInterleaved {
		switch {
		case field == "dead_letter":
			v.add(field+".order", "dead letters are always kept in partition order: remove order")
		case s.PerPartition:
			v.add(field+".order", "each per_partition file holds one partition: remove order")
		case s.Format == "csv":
			v.add(field+".order", "a csv file is always in partition order (its rows are converted when it is published): remove order")
		}
	}
	pattern := strings.Contains(s.Path, PartitionPlaceholder)
	switch {
	case s.Path == "":
	case s.PerPartition && !pattern:
		ext := filepath.Ext(s.Path)
		v.add(field+".path", "per_partition needs %s in the path, e.g. %s", PartitionPlaceholder, strings.TrimSuffix(s.Path, ext)+"-"+PartitionPlaceholder+ext)
	case !s.PerPartition && pattern:
		v.add(field+".path", "%s is replaced only with per_partition: true: set it, or remove %s", PartitionPlaceholder, PartitionPlaceholder)
	}
}

// PartitionPlaceholder stands for the partition number in the path of a
// file sink with per_partition.
const PartitionPlaceholder = "{partition}"

// topicRe is what Kafka accepts as a topic name.
var topicRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

func (v *validator) kafkaSink(field string, s *Sink) {
	v.brokers(field+".brokers", s.Brokers)
	switch {
	case s.Topic == "":
	case !topicRe.MatchString(s.Topic) || s.Topic == "." || s.Topic == "..":
		v.add(field+".topic", "%q is not a Kafka topic name (up to 249 letters, digits, '.', '_', '-')", s.Topic)
	}
	v.tls(field+".tls", s.TLS)
	v.sasl(field+".sasl", s.SASL)
	if s.SASL.Mechanism == "PLAIN" && !s.TLS.Enabled {
		v.warn(field+".sasl.mechanism", "SASL PLAIN without TLS sends the password in clear text: enable %s.tls", field)
	}
	v.exactlyOnce(field, s)
	if s.Topic != "" && s.Topic == v.p.Source.Topic && sameBrokers(s.Brokers, v.p.Source.Brokers) {
		v.warn(field+".topic", "the target is the source topic: the replayed records are appended to the topic being replayed, and its consumers read them again")
	}
}

// transactionalIDRe is what the exactly-once sink accepts as the prefix of
// its transactional ids: printable, no spaces, short enough for the suffix.
var transactionalIDRe = regexp.MustCompile(`^[A-Za-z0-9._:+-]{1,200}$`)

// exactlyOnce checks a kafka sink's exactly_once and transactional_id.
func (v *validator) exactlyOnce(field string, s *Sink) {
	switch {
	case s.TransactionalID != "" && !s.ExactlyOnce:
		v.add(field+".transactional_id", "only applies with exactly_once: true: set exactly_once: true, or remove transactional_id")
	case s.TransactionalID != "" && !transactionalIDRe.MatchString(s.TransactionalID):
		v.add(field+".transactional_id", "%q: want up to 200 letters, digits, '.', '_', ':', '+', '-'", s.TransactionalID)
	}
	if !s.ExactlyOnce {
		return
	}
	switch {
	case field == "dead_letter":
		v.add(field+".exactly_once", "a dead-letter sink is written after the sink's transaction, so it cannot be part of it: remove exactly_once here")
	case v.p.OnError == OnErrorDeadLetter:
		v.add(field+".exactly_once", "not with on_error: dead_letter: dead letters are written outside the transaction that commits the replay group's offsets, so a crash could lose them; use on_error: skip or fail")
	}
}

// sameBrokers reports whether two broker lists name the same addresses, in
// any order and case.
func sameBrokers(a, b []string) bool {
	split := func(l []string) []string {
		out := BrokerList(l)
		for i := range out {
			out[i] = strings.ToLower(out[i])
		}
		sort.Strings(out)
		return slices.Compact(out)
	}
	return slices.Equal(split(a), split(b))
}

var (
	// headerNameRe is an HTTP header field name (RFC 9110 token).
	headerNameRe = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	// secretHeaderRe matches the names of headers that carry credentials.
	secretHeaderRe = regexp.MustCompile(`(?i)^(authorization|proxy-authorization|cookie)$|token|secret|passw|api-?key|api_key|signature|credential`)
	// secretQueryRe matches URL query parameters that carry credentials.
	secretQueryRe = regexp.MustCompile(`(?i)^(password|passwd|pwd|token|access_token|auth|api_key|apikey|key|secret|client_secret|sig|signature)$`)
)

// reservedHeaders are set by the http sink itself.
var reservedHeaders = []string{"Idempotency-Key", "Content-Type", "Content-Length", "Host"}

func (v *validator) httpSink(field string, s *Sink) {
	v.httpURL(field+".url", s.URL)
	v.connections(field, s)
	names := make([]string, 0, len(s.Headers))
	for name := range s.Headers {
		names = append(names, name)
	}
	sort.Strings(names)
	plain := strings.HasPrefix(strings.ToLower(s.URL), "http:")
	for _, name := range names {
		f, val := field+".headers."+name, s.Headers[name]
		switch {
		case !headerNameRe.MatchString(name):
			v.add(f, "%q is not an HTTP header name (letters, digits and !#$%%&'*+-.^_`|~)", name)
		case slices.ContainsFunc(reservedHeaders, func(r string) bool { return strings.EqualFold(r, name) }):
			v.add(f, "the http sink sets %s itself: remove it", name)
		case strings.ContainsAny(val, "\r\n\x00"):
			v.add(f, "the value contains a line break or NUL, which HTTP headers cannot carry")
		case secretHeaderRe.MatchString(name) && !v.p.FromEnv(f):
			example := `"${ORDERS_API_TOKEN}"`
			if strings.EqualFold(name, "Authorization") {
				example = `"Bearer ${ORDERS_API_TOKEN}"`
			}
			v.add(f, "a literal secret must not be written in a plan: take it from the environment, e.g. %s: %s, and export the variable", name, example)
		case secretHeaderRe.MatchString(name) && plain:
			v.warn(f, "sent over plain http: anyone on the network path can read the credentials; use https")
		}
	}
	if s.MaxRetries != nil && (*s.MaxRetries < 0 || *s.MaxRetries > 100) {
		v.add(field+".max_retries", "%d: want 0..100 (0 never retries)", *s.MaxRetries)
	}
	if d := time.Duration(s.MaxRetryWait); d < 0 || d > time.Hour {
		v.add(field+".max_retry_wait", "%s: want a duration up to 1h, e.g. 1m", d)
	}
	if d := time.Duration(s.RequestTimeout); d < 0 || d > time.Hour {
		v.add(field+".request_timeout", "%s: want a duration up to 1h, e.g. 2m", d)
	}
}

// httpURL checks an http sink's endpoint. Credentials in it must come from
// the environment, as a DSN's password does.
func (v *validator) httpURL(field, raw string) {
	if raw == "" {
		return // reported by sinkRequired
	}
	u, err := url.Parse(raw)
	if err != nil {
		v.add(field, "not a URL: %s", urlErrorReason(raw, err))
		return
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		v.add(field, "%q: want an http:// or https:// URL with a host", redactedURL(u))
		return
	}
	written := raw // the URL as written in the plan, ${VAR}s as placeholders
	if r, ok := v.p.envRaw[field]; ok {
		written = envRef.ReplaceAllString(r, envPlaceholder)
	}
	w, err := url.Parse(written)
	if err != nil {
		return // the ${VAR}s make up its structure: nothing literal to check
	}
	if pw, ok := w.User.Password(); ok && pw != "" && !strings.Contains(pw, envPlaceholder) {
		v.add(field, "contains a literal password: take the URL (or its password) from the environment, e.g. url: ${ORDERS_API_URL}, or send credentials in headers from ${VAR}")
	}
	for name, vals := range w.Query() {
		for _, val := range vals {
			if secretQueryRe.MatchString(name) && val != "" && !strings.Contains(val, envPlaceholder) {
				v.add(field, "the query parameter %s carries a literal secret: take the URL from the environment, e.g. url: ${ORDERS_API_URL}, or send credentials in headers from ${VAR}", name)
			}
		}
	}
}

// sinkEndpoint is the part of an http sink's URL that says where records go,
// for the fingerprint: scheme, host and path, without the user info and
// query, which may hold credentials that are rotated during a run.
func sinkEndpoint(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return raw
	}
	return u.Scheme + "://" + strings.ToLower(u.Host) + u.EscapedPath()
}

// connections checks a sink's connections: unset is 1.
func (v *validator) connections(field string, s *Sink) {
	if v.present(field+".connections") && (s.Connections < 1 || s.Connections > MaxConnections) {
		v.add(field+".connections", "%d: want 1..%d connections", s.Connections, MaxConnections)
	}
}
