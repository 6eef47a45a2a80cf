package plan

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"
	"unicode"
)

var (
	nameRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	tableRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)
)

// Upper bounds of the throttle and the batch size: far above what one
// process can do, low enough to catch a typo (a rate of 1e23 records/s).
const (
	MaxRecordsPerSecond = 1e9
	MaxBytesPerSecond   = ByteSize(1 << 40) // 1 TiB
	MaxBatchSize        = 100000
)

// validate returns every semantic problem of a decoded, defaulted plan.
func (p *Plan) validate(now time.Time) []Problem {
	if p.SeveralTopics() {
		return p.validateTopics(now)
	}
	v := &validator{p: p, now: now}
	for _, field := range slices.Sorted(maps.Keys(p.emptyEnv)) {
		v.warn(field, "environment variable %s is set but empty: check that this is intended (an unfilled variable changes the plan, e.g. ${OUT_DIR}/x.jsonl becomes /x.jsonl)", p.emptyEnv[field])
	}
	v.top()
	v.source()
	v.window()
	v.throttle()
	v.retry()
	v.decode()
	v.sink("sink", &p.Sink)
	v.mapping(v.sinkColumns)
	v.errors()
	return v.out
}

type validator struct {
	p   *Plan
	now time.Time
	out []Problem
	// sinkColumns are the columns the plan's sink section declared;
	// sinkReads the other fields of the value it reads (SinkCheck.ReadsValue).
	sinkColumns []Column
	sinkReads   []valueRead
}

func (v *validator) add(field, format string, args ...any) {
	if v.p.bad[field] {
		return // did not decode: already reported, with the reason
	}
	pos := v.p.pos[field]
	for f := field; pos.Line == 0 && strings.Contains(f, "."); {
		f = f[:strings.LastIndex(f, ".")]
		pos = v.p.pos[f]
	}
	if pos.Line == 0 {
		pos = Pos{1, 1} // a missing top-level field: point at the document
	}
	v.at(pos, field, format, args...)
}

// present reports whether field is written in the plan file.
func (v *validator) present(field string) bool {
	_, ok := v.p.pos[field]
	return ok
}

func (v *validator) warn(field, format string, args ...any) {
	n := len(v.out)
	v.add(field, format, args...)
	if len(v.out) > n { // add reports nothing for a field that did not decode
		v.out[n].Warning = true
	}
}

func (v *validator) top() {
	p := v.p
	switch {
	case p.Version != 1 && !v.present("version"):
		v.add("version", "missing: add `version: 1` as the first line")
	case p.Version != 1:
		v.add("version", "unsupported version %d: this replay reads version 1", p.Version)
	}
	switch {
	case p.Name == "":
		v.add("name", "missing: give the plan a unique name, e.g. orders-fx-fix-2026-11-03")
	case !nameRe.MatchString(p.Name):
		v.add("name", "%q: use ASCII letters (a-z, A-Z), digits, '.', '_' and '-' only, beginning with a letter or digit", p.Name)
	default:
		v.checkCommitMetadata(p.Name)
	}
	space, spaced := firstRune(p.Group, unicode.IsSpace)
	hidden, hides := firstRune(p.Group, invisible)
	switch {
	case p.Group == "":
		v.add("group", "missing: name a dedicated replay consumer group, e.g. replay.%s", cmp.Or(p.Name, "my-plan"))
	case spaced:
		v.add("group", "%q contains the whitespace character %U: a group name holds none (Kafka takes it, but a space reads like a separator in review, and a no-break or ideographic space like an ordinary one); e.g. replay.%s", p.Group, space, cmp.Or(p.Name, "my-plan"))
	case hides:
		v.add("group", "%q contains the invisible character %U: control and formatting characters (bidirectional overrides, zero-width ones) make a group name read differently in review than it is; type the name again", p.Group, hidden)
	}
}

// firstRune returns the first rune of s for which f is true.
func firstRune(s string, f func(rune) bool) (rune, bool) {
	for _, r := range s {
		if f(r) {
			return r, true
		}
	}
	return 0, false
}

// invisible reports whether r is a control or formatting character
// (Unicode categories Cc and Cf: bidirectional embeddings, overrides and
// isolates, zero-width spaces and joiners), which displays as nothing or
// reorders the text around it.
func invisible(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

func (v *validator) source() {
	s := v.p.Source
	if len(s.Brokers) == 0 {
		v.add("source.brokers", `missing: list bootstrap brokers, e.g. ["kafka-1:9092"] or ["${KAFKA_BROKERS}"]`)
	}
	v.brokers("source.brokers", s.Brokers)
	switch {
	case s.Topic != "" && len(s.Topics) > 0 && v.p.fixedFingerprint == "":
		v.add("source.topics", "source.topic is set too: name one topic with topic, or several with topics")
	case len(v.p.Overrides) > 0 && v.p.fixedFingerprint == "":
		v.add("overrides", "overrides change what a plan of several topics does per topic: list them in source.topics, or write the fields in the plan itself")
	}
	if s.Topic == "" {
		v.add("source.topic", "missing: name the topic to replay (or several with topics: [a, b])")
	} else if problem := TopicNameProblem(s.Topic); problem != "" {
		v.add("source.topic", "%s", problem)
	}
	v.enum("source.isolation", s.Isolation, []string{ReadCommitted, ReadUncommitted})
	v.tls("source.tls", s.TLS)
	v.sasl("source.sasl", s.SASL)
	if s.SASL.Mechanism == "PLAIN" && !s.TLS.Enabled {
		v.warn("source.sasl.mechanism", "SASL PLAIN without TLS sends the password in clear text: enable source.tls")
	}
}

// brokers checks that every address of a broker list is host:port. Each
// piece of a comma-separated entry is checked as written, an empty one
// included: a stray comma is a mistake in the plan.
func (v *validator) brokers(field string, list []string) {
	for i, b := range list {
		for _, one := range strings.Split(b, ",") {
			addr := strings.TrimSpace(one)
			if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
				example := addr + ":9092"
				if strings.Count(addr, ":") > 1 && !strings.HasPrefix(addr, "[") { // an IPv6 address goes in brackets
					example = "[" + addr + "]:9092"
					if j := strings.LastIndex(addr, ":"); net.ParseIP(addr[:j]) != nil { // ::1:9092
						example = "[" + addr[:j] + "]" + addr[j:]
					}
				}
				v.add(fmt.Sprintf("%s[%d]", field, i), "%q is not host:port: add the port, e.g. %q", one, example)
			}
		}
	}
}

func (v *validator) enum(field, val string, allowed []string) bool {
	if slices.Contains(allowed, val) {
		return true
	}
	v.add(field, "%q is not one of %s%s", val, strings.Join(allowed, ", "), meant(Suggest(val, allowed)))
	return false
}

func (v *validator) tls(field string, t TLS) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.add(field, "cert_file and key_file go together: set both for a client certificate, or neither")
	}
	if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.InsecureSkipVerify || t.ServerName != "") {
		v.add(field+".enabled", "TLS options are set but TLS is not enabled: add `enabled: true`")
	}
}

func (v *validator) sasl(field string, s SASL) {
	if s == (SASL{}) {
		return
	}
	v.enum(field+".mechanism", s.Mechanism, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})
	if s.Username == "" {
		v.add(field+".username", "missing: SASL needs a username")
	}
	if s.Password == "" && !v.p.FromEnv(field+".password") {
		v.add(field+".password", "missing: set password: ${KAFKA_PASSWORD} and export the variable")
	}
	v.literalSecret(field+".password", s.Password, "password: ${KAFKA_PASSWORD}")
}

// literalSecret reports a secret val of field not taken from the
// environment, which use (password: ${VAR}) should be.
func (v *validator) literalSecret(field, val, use string) {
	if val != "" && !v.p.FromEnv(field) {
		v.add(field, "a literal secret must not be written in a plan: use %s and export the variable", use)
	}
}

func (v *validator) retry() {
	if d := time.Duration(v.p.Retry.MaxElapsed); d > MaxRetryMaxElapsed {
		v.add("retry.max_elapsed", "%s is above the limit of 24h: write e.g. 5m (the default), or 0s to fail at the first broker error", d)
	}
	if d := time.Duration(v.p.Source.OpenTransactionTimeout); d > MaxOpenTransactionTimeout {
		v.add("source.open_transaction_timeout", "%s is above the limit of 24h: write e.g. 5m (the default), or 0s to fail as soon as an open transaction holds a partition back", d)
	}
	if v.present("source.open_transaction_timeout") && v.p.Source.Isolation == ReadUncommitted {
		v.warn("source.open_transaction_timeout", "applies to read_committed only: under read_uncommitted nothing waits for open transactions; remove it")
	}
}

func (v *validator) throttle() {
	t := v.p.Throttle
	switch r := t.RecordsPerSecond; {
	case r < 0:
		v.add("throttle.records_per_second", "must be >= 0 (0 = unlimited)")
	case math.IsNaN(r):
		v.add("throttle.records_per_second", "not a number: write a rate up to 1e9, or 0 (or leave it out) for unlimited")
	case r > MaxRecordsPerSecond:
		v.add("throttle.records_per_second", "%g is above the limit of %d (1e9) records per second: write a rate up to that, or 0 (or leave it out) for unlimited", r, int64(MaxRecordsPerSecond))
	}
	switch b := t.BytesPerSecond; {
	case b < 0:
		v.add("throttle.bytes_per_second", "must be >= 0 (0 = unlimited)")
	case b > MaxBytesPerSecond:
		v.add("throttle.bytes_per_second", "%d bytes is above the limit of 1024GiB (%d bytes) per second: write a rate up to that, e.g. 100MiB, or 0 (or leave it out) for unlimited", int64(b), int64(MaxBytesPerSecond))
	}
	if d, ok := v.p.sinks.Lookup(v.p.Sink.Type); ok && d.Service != "" && t.RecordsPerSecond == 0 && t.BytesPerSecond == 0 {
		n := len(v.out)
		v.warn("throttle", "no throttle for the %s sink: the replay writes as fast as the %s accepts and can starve its live traffic; set throttle.records_per_second (or bytes_per_second)", v.p.Sink.Type, d.Service)
		if pos, ok := v.p.pos["sink.type"]; ok && len(v.out) > n && !v.present("throttle") {
			v.out[n].Line, v.out[n].Col = pos.Line, pos.Col // point at the sink, not at the top of the file
		}
	}
	if d := time.Duration(t.MaxBatchWait); d < MinMaxBatchWait || d > MaxMaxBatchWait {
		v.add("throttle.max_batch_wait", "%s: want a duration from 10ms to 1h, e.g. 1s (the default): the longest a throttled partition goes without writing and committing", d)
	}
	// Under a throttle each write is cut to its share of the rate, so a
	// large batch_size no longer turns into bursts; but a rate spread over
	// more partitions than it has records per max_batch_wait makes each
	// partition write (and commit) only every partitions/rate seconds.
	// The partitions are known here only when the plan lists them.
	if n := v.listedPartitions(); t.RecordsPerSecond > 0 && n > 0 && time.Duration(t.MaxBatchWait) > 0 {
		if every := float64(n) / t.RecordsPerSecond; every > time.Duration(t.MaxBatchWait).Seconds() {
			v.warn("throttle.records_per_second", "%g records/s over the %d partitions of the plan is %.2g records/s per partition: each partition writes and commits one record about every %.1fs, more than max_batch_wait (%s); raise the rate or replay fewer partitions at once",
				t.RecordsPerSecond, n, t.RecordsPerSecond/float64(n), every, time.Duration(t.MaxBatchWait))
		}
	}
}

// listedPartitions is the number of partitions the plan names (a list in
// source.partitions, or per-partition offsets); 0 when it reads them all.
func (v *validator) listedPartitions() int {
	switch p := v.p; {
	case !p.Source.Partitions.All && len(p.Source.Partitions.List) > 0:
		return len(p.Source.Partitions.List)
	case p.Window.OffsetsAll == nil && len(p.Window.Offsets) > 0:
		return len(p.Window.Offsets)
	}
	return 0
}

func (v *validator) sink(field string, s *Sink) {
	d, ok := v.sinkType(field, s)
	if !ok {
		return
	}
	if s.BatchSize < 1 || s.BatchSize > MaxBatchSize {
		v.add(field+".batch_size", "%d: want 1..%d records (leave batch_size out for the default, %d)", s.BatchSize, MaxBatchSize, DefaultBatchSize)
	}
	if d := time.Duration(s.Retry.MaxElapsed); d < 0 || d > MaxRetryMaxElapsed {
		v.add(field+".retry.max_elapsed", "%s: want a duration up to 24h, e.g. 5m (the default), or 0s to fail at the first transient error", d)
	}
	if s.Key != "" {
		if t, err := template.New("key").Parse(s.Key); err != nil {
			v.add(field+".key", "bad template: %s: write e.g. '{{ .Value.id }}' or '{{ .Key }}'", templateLine.ReplaceAllString(err.Error(), ""))
		} else if problem := keyFieldProblem(t.Tree.Root, v.p.Decode.DecodesKey()); problem != "" {
			v.add(field+".key", "%s", problem)
		} else {
			v.keyUnique(field, t.Tree.Root)
		}
	}
	v.sinkFields(field, s, d)
}

// templateLine is text/template's "template: key:1:" prefix.
var templateLine = regexp.MustCompile(`^template: key:\d+(:\d+)?: `)

// envPlaceholder stands for a ${VAR} when a value is checked as written.
const envPlaceholder = "REPLAYENVVAR"

// asWritten is val, the value of field, as written in the plan, with
// envPlaceholder for its ${VAR}s.
func (v *validator) asWritten(field, val string) string {
	if raw, ok := v.p.envRaw[field]; ok {
		return envRef.ReplaceAllString(raw, envPlaceholder)
	}
	return val
}

var (
	kvPassword  = regexp.MustCompile(`(?i)(?:^|\s)password\s*=\s*('(?:\\.|[^'])*'|\S*)`)
	urlUserinfo = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)@`)
)

// dsnPassword returns the non-empty password of a PostgreSQL DSN: in the
// URL's user info, in its password query parameter, or in key=value form.
func dsnPassword(dsn string) (string, bool) {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil { // e.g. a character url.Parse refuses in the password
			if m := urlUserinfo.FindStringSubmatch(dsn); m != nil {
				if _, pw, ok := strings.Cut(m[1], ":"); ok && pw != "" {
					return pw, true
				}
			}
			return "", false
		}
		if pw, ok := u.User.Password(); ok && pw != "" {
			return pw, true
		}
		if pw := u.Query().Get("password"); pw != "" {
			return pw, true
		}
		return "", false
	}
	if m := kvPassword.FindStringSubmatch(dsn); m != nil && m[1] != "" && m[1] != "''" {
		return m[1], true
	}
	return "", false
}

// errors checks the filter and what happens to records that cannot be
// processed: on_error, dead_letter and max_errors.
func (v *validator) errors() {
	p := v.p
	if v.present("filter") {
		prog, err := compileFilter(p)
		if err != nil {
			v.add("filter", "bad expression at %v", err)
		}
		p.filter = prog
	}
	if !v.enum("on_error", p.OnError, []string{OnErrorFail, OnErrorSkip, OnErrorDeadLetter}) {
		return
	}
	switch {
	case p.OnError == OnErrorDeadLetter && p.DeadLetter == nil:
		v.add("on_error", "dead_letter needs a dead_letter sink: add e.g. `dead_letter: {type: file, path: out/dead-letters.jsonl}`")
	case p.OnError != OnErrorDeadLetter && p.DeadLetter != nil:
		v.warn("dead_letter", "unused with on_error: %s: set on_error: dead_letter to write the records that cannot be processed there", p.OnError)
	}
	if d := p.DeadLetter; d != nil { // any stored sink but the plan's own output
		v.sink("dead_letter", d)
		if desc, ok := p.sinks.Lookup(d.Type); ok && desc.WritesStdout {
			v.add("dead_letter.type", "%s does not keep dead letters: the partition's commit passes them once written, so they must be stored; use file (or another stored sink)", d.Type)
		}
	}
	if p.MaxErrors.IsSet() && p.OnError == OnErrorFail {
		v.warn("max_errors", "has no effect with on_error: fail, which stops at the first record that cannot be processed")
	}
}

// Fingerprint identifies what the plan replays: a hex SHA-256 prefix (16
// characters) over the fields that decide which records reach which sink
// (name, topic, partitions, isolation, group, window, decode, filter,
// mapping, on_error, key, and the sink fields their descriptors mark:
// target and output layout). Connection settings, secrets, the throttle,
// max_errors, retry and review metadata are left out, so tuning them keeps
// a resumable run resumable; changing the window or the sink does not.
func (p *Plan) Fingerprint() string {
	if p.fixedFingerprint != "" {
		return p.fixedFingerprint
	}
	canon := struct {
		Version                      int
		Name, Topic, Partitions, Iso string
		// The omitempty fields are left out when unset, so that older
		// plans keep their fingerprints.
		Topics          []string          `json:",omitempty"`
		Overrides       map[string]string `json:",omitempty"`
		Group, From, To string
		Offsets         map[int32][2]string
		OffsetsAll      *[2]string `json:",omitempty"`
		Strict          bool
		Skew            time.Duration
		Filter, OnError string
		Decode          string `json:",omitempty"` // what decodes and how, not the registry
		Mapping         string `json:",omitempty"`
		Sink            json.RawMessage
		DeadLetter      json.RawMessage `json:",omitempty"`
		AllowDataLoss   bool
		// A schedule (every, zone, start; not the delay), so that every
		// interval resumes the same progress.
		Schedule string `json:",omitempty"`
		// A calendar window (last, today, yesterday) and its zone as
		// written, not the instants they resolve to.
		Last string `json:",omitempty"`
		Zone string `json:",omitempty"`
	}{
		Version: p.Version, Name: p.Name, Topic: p.Source.Topic, Partitions: p.Source.Partitions.String(),
		Iso: p.Source.Isolation, Group: p.Group, From: p.Window.From.String(), To: p.Window.To.String(),
		Strict: p.Window.StrictTimestamps, Skew: time.Duration(p.Window.SkewMargin),
		Filter: p.Filter, OnError: p.OnError, AllowDataLoss: p.AllowDataLoss, Mapping: p.Mapping.String(),
		Decode: p.Decode.fingerprint(), Sink: p.sinkFingerprint(&p.Sink, false),
	}
	if d := p.DeadLetter; d != nil && p.OnError == OnErrorDeadLetter {
		canon.DeadLetter = p.sinkFingerprint(d, true)
	}
	if p.SeveralTopics() {
		canon.Topics = p.Source.Topics
		canon.Overrides = map[string]string{}
		for t, o := range p.Overrides {
			canon.Overrides[t] = o.fingerprint()
		}
	}
	switch w := p.Window; w.Kind() {
	case WindowSchedule:
		canon.Schedule = w.Every.String() + "|" + w.Location().String() + "|" + w.Start.At(time.Time{}).UTC().Format(time.RFC3339Nano)
	case WindowTime:
		if w.IsCalendar() {
			canon.Last, canon.Zone = w.Last.String(), w.Location().String()
		}
	case WindowOffsets:
		canon.Offsets = map[int32][2]string{}
		for k, r := range w.Offsets {
			canon.Offsets[k] = [2]string{r.From.String(), r.To.String()}
		}
		if r := w.OffsetsAll; r != nil {
			canon.OffsetsAll = &[2]string{r.From.String(), r.To.String()}
		}
	}
	b, _ := json.Marshal(canon) // map keys are sorted: deterministic
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// maxTopicName is the longest topic name Kafka accepts (Topic.java,
// MAX_NAME_LENGTH).
const maxTopicName = 249

// TopicNameProblem says why Kafka would refuse name as a topic name: its
// legal characters are ASCII letters, digits, '.', '_' and '-', at most
// 249 of them, and "." and ".." are reserved (Topic.validate). "" when
// the name is legal. A plan names one topic: a comma-separated list is
// not a list of topics.
func TopicNameProblem(name string) string {
	switch {
	case name == "." || name == "..":
		return fmt.Sprintf("%q is not a topic name Kafka allows (\".\" and \"..\" are reserved)", name)
	case len(name) > maxTopicName:
		return fmt.Sprintf("a topic name has at most %d characters; this one has %d", maxTopicName, len(name))
	}
	for _, r := range name {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			continue
		}
		if r == ',' || r == ' ' {
			return fmt.Sprintf("%q is not a topic name (Kafka allows ASCII letters, digits, '.', '_' and '-'): a plan replays one topic; write one plan per topic", name)
		}
		return fmt.Sprintf("%q is not a topic name Kafka allows: %q is not an ASCII letter, digit, '.', '_' or '-'", name, r)
	}
	return ""
}
