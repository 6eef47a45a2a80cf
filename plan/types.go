package plan

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// PartitionSet selects partitions: All, or an explicit sorted list.
type PartitionSet struct {
	All  bool
	List []int32
}

// UnmarshalYAML accepts "all" or a sequence of partition numbers.
func (s *PartitionSet) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value == "all" {
			*s = PartitionSet{All: true}
			return nil
		}
		return fmt.Errorf(`want "all" or a list such as [0, 3, 5], got %q`, n.Value)
	case yaml.SequenceNode:
		var list []int32
		for _, c := range n.Content {
			v, err := strconv.ParseInt(c.Value, 10, 32)
			if c.Kind == yaml.ScalarNode && errors.Is(err, strconv.ErrRange) && v > 0 {
				return errorAt(c, "%s is too large: partition numbers go up to %d", c.Value, int32(math.MaxInt32))
			}
			if c.Kind != yaml.ScalarNode || err != nil || v < 0 {
				return errorAt(c, "%s is not a partition number (0, 1, ...)", describe(c))
			}
			if slices.Contains(list, int32(v)) {
				return errorAt(c, "partition %d is listed twice: list each partition once", v)
			}
			list = append(list, int32(v))
		}
		if len(list) == 0 {
			return fmt.Errorf(`empty partition list: write "all" or list at least one partition`)
		}
		slices.Sort(list)
		*s = PartitionSet{List: list}
		return nil
	}
	return fmt.Errorf(`want "all" or a list of partition numbers`)
}

// MarshalYAML writes the set back in plan form.
func (s PartitionSet) MarshalYAML() (any, error) {
	if s.All || len(s.List) == 0 {
		return "all", nil
	}
	return s.List, nil
}

// String renders the set as in a plan: all or [0 3 5].
func (s PartitionSet) String() string {
	v, _ := s.MarshalYAML()
	return fmt.Sprint(v)
}

// raw is a value as the plan writes it, which TimeSpec, OffsetSpec, Last
// and Every keep beside what it means.
type raw string

// MarshalYAML writes the value as written in the plan.
func (r raw) MarshalYAML() (any, error) { return string(r), nil }

// IsSet reports whether the value was given.
func (r raw) IsSet() bool { return r != "" }

// String returns the value as written.
func (r raw) String() string { return string(r) }

// TimeSpec is a window bound: an absolute RFC 3339 time with a zone, a
// time relative to the moment of resolution ("-2h", "90m ago", "now"), or
// a calendar day relative to it ("today", "yesterday": midnight in the
// window's zone). A zone-less time or a bare number is rejected.
type TimeSpec struct {
	raw
	abs   time.Time
	rel   time.Duration // negative: in the past
	isRel bool
	isDay bool // today/yesterday: midnight days (0 or -1) from resolution's
	days  int
}

var relAgo = regexp.MustCompile(`^(\d+[a-zµ]+(?:\d+[a-zµ]+)*)\s+ago$`)

// ParseTimeSpec parses a window bound; see TimeSpec.
func ParseTimeSpec(s string) (TimeSpec, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return TimeSpec{}, fmt.Errorf("empty time")
	case s == "now":
		return TimeSpec{raw: raw(s), isRel: true}, nil
	case s == "today":
		return TimeSpec{raw: raw(s), isRel: true, isDay: true}, nil
	case s == "yesterday":
		return TimeSpec{raw: raw(s), isRel: true, isDay: true, days: -1}, nil
	case numberRe.MatchString(s):
		return TimeSpec{}, fmt.Errorf("bare number %s is ambiguous (seconds or milliseconds since the epoch?): write an RFC 3339 time with a zone, e.g. %s", s, epochHint(s))
	}
	if m := relAgo.FindStringSubmatch(s); m != nil || strings.HasPrefix(s, "-") {
		rel, hint := strings.TrimPrefix(s, "-"), " (use e.g. -2h, -90m, -1d)"
		if m != nil {
			rel, hint = m[1], ""
		}
		d, err := parseDuration(rel)
		if err != nil {
			return TimeSpec{}, fmt.Errorf("relative time %q: %v%s", s, err, hint)
		}
		return TimeSpec{raw: raw(s), rel: -d, isRel: true}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err == nil && t.Nanosecond()%int(time.Millisecond) != 0 {
		// Kafka timestamps (KIP-79) are whole milliseconds.
		const ms = "2006-01-02T15:04:05.000Z07:00"
		down := t.Truncate(time.Millisecond)
		return TimeSpec{}, fmt.Errorf("time %q is finer than a millisecond, the precision of Kafka timestamps: write %s or %s",
			s, down.Format(ms), down.Add(time.Millisecond).Format(ms))
	}
	if err == nil {
		return TimeSpec{raw: raw(s), abs: t}, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04", "2006-01-02"} {
		if _, e := time.Parse(layout, s); e == nil {
			return TimeSpec{}, fmt.Errorf("time %q has no zone, so it would mean different instants on different machines: add one, e.g. %sZ for UTC or %s+02:00", s, pad(s), pad(s))
		}
	}
	return TimeSpec{}, fmt.Errorf("cannot parse %q as a time: want RFC 3339 with a zone (2026-11-03T10:00:00Z) or a relative time (-2h, 24h ago, now, today, yesterday)", s)
}

func pad(s string) string {
	if len(s) == len("2006-01-02") {
		return s + "T00:00:00"
	}
	if len(s) == len("2006-01-02T15:04") {
		return s + ":00"
	}
	return strings.Replace(s, " ", "T", 1)
}

// numberRe matches what a person writes as a plain number (not "inf" or
// "nan", which strconv.ParseFloat also accepts).
var numberRe = regexp.MustCompile(`^[-+]?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

// TimeLayoutMillis formats a time as RFC 3339 with its milliseconds
// (none when they are zero): Kafka's timestamps are milliseconds.
const TimeLayoutMillis = "2006-01-02T15:04:05.999Z07:00"

func epochHint(s string) string {
	v, _ := strconv.ParseFloat(s, 64)
	if math.Abs(v) > 1e11 { // milliseconds
		return time.UnixMilli(int64(v)).UTC().Format(TimeLayoutMillis) + " if it was milliseconds"
	}
	sec, frac := math.Modf(v)
	return time.UnixMilli(int64(sec)*1000+int64(math.Round(frac*1000))).UTC().Format(TimeLayoutMillis) + " if it was seconds"
}

// parseDuration extends time.ParseDuration with a day unit ("1d", "2d12h").
// The day count and the rest are unsigned ("1d-2h" is refused), and the
// sum must fit a time.Duration (about 106,751 days).
func parseDuration(s string) (time.Duration, error) {
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("bad duration %q: a sign inside it", s)
	}
	if i := strings.Index(s, "d"); i > 0 {
		days, err := strconv.ParseUint(s[:i], 10, 63)
		if err != nil {
			return 0, fmt.Errorf("bad day count in %q", s)
		}
		rest := time.Duration(0)
		if r := s[i+1:]; r != "" {
			if r[0] == '-' || r[0] == '+' {
				return 0, fmt.Errorf("bad duration %q: a sign inside it", s)
			}
			if rest, err = time.ParseDuration(r); err != nil {
				return 0, err
			}
		}
		if days > uint64((math.MaxInt64-rest)/(24*time.Hour)) {
			return 0, fmt.Errorf("duration %q is too long (at most about 106751 days)", s)
		}
		return time.Duration(days)*24*time.Hour + rest, nil
	}
	return time.ParseDuration(s)
}

// UnmarshalYAML parses a scalar with ParseTimeSpec.
func (t *TimeSpec) UnmarshalYAML(n *yaml.Node) error {
	return unmarshalScalar(n, t, ParseTimeSpec, "want a time such as 2026-11-03T10:00:00Z or -2h")
}

// unmarshalScalar decodes the scalar n into *dst with parse; want is the
// error for a node of another kind.
func unmarshalScalar[T any](n *yaml.Node, dst *T, parse func(string) (T, error), want string) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New(want)
	}
	v, err := parse(n.Value)
	if err == nil {
		*dst = v
	}
	return err
}

// IsRelative reports whether the bound depends on the time of resolution.
func (t TimeSpec) IsRelative() bool { return t.isRel }

// IsCalendar reports whether the bound is a calendar day (today,
// yesterday), which depends on the window's zone.
func (t TimeSpec) IsCalendar() bool { return t.isDay }

// At returns the instant the bound denotes when resolved at now, with
// calendar days in UTC; see AtIn.
func (t TimeSpec) At(now time.Time) time.Time { return t.AtIn(now, time.UTC) }

// AtIn returns the instant the bound denotes when resolved at now; today
// and yesterday are midnight in loc.
func (t TimeSpec) AtIn(now time.Time, loc *time.Location) time.Time {
	if t.isDay {
		lt := now.In(loc)
		return time.Date(lt.Year(), lt.Month(), lt.Day()+t.days, 0, 0, 0, 0, loc).UTC()
	}
	if t.isRel {
		return now.Add(t.rel)
	}
	return t.abs
}

// OffsetSpec is an offset bound: earliest (the log start offset), latest
// (the high watermark, or the last stable offset under read_committed), or
// an absolute offset >= 0.
type OffsetSpec struct {
	raw
	Offset int64 // valid when neither Earliest nor Latest
	// Earliest and Latest are the symbolic bounds.
	Earliest, Latest bool
}

// UnmarshalYAML accepts earliest, latest or a non-negative integer.
func (o *OffsetSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want earliest, latest or an offset number")
	}
	if n.Value == "earliest" || n.Value == "latest" {
		*o = OffsetSpec{raw: raw(n.Value), Earliest: n.Value == "earliest", Latest: n.Value == "latest"}
		return nil
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if errors.Is(err, strconv.ErrRange) && v > 0 {
		return fmt.Errorf("offset %s is too large: offsets go up to %d", n.Value, int64(math.MaxInt64))
	}
	if err != nil || v < 0 {
		return fmt.Errorf("offset %q: want earliest, latest or a number >= 0", n.Value)
	}
	*o = OffsetSpec{raw: raw(n.Value), Offset: v}
	return nil
}

// Duration is a time.Duration written as "5m", "1h30m" or "1d".
type Duration time.Duration

// UnmarshalYAML parses a duration string; a bare number is rejected (no unit).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a duration such as 5m or 1h")
	}
	if numberRe.MatchString(n.Value) {
		return fmt.Errorf("duration %s has no unit: write e.g. %ss or %sm", n.Value, n.Value, n.Value)
	}
	v, err := parseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("bad duration %q: want e.g. 30s, 5m, 1h, 1d", n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration in Go notation.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// ByteSize is a number of bytes, written as 5242880, 512KiB, 5MiB, 1GiB,
// 5MB (units B, KiB, MiB, GiB, KB, MB, GB: a throttle needs no larger one).
type ByteSize int64

var byteUnits = map[string]int64{
	"": 1, "B": 1,
	"KB": 1000, "MB": 1000 * 1000, "GB": 1000 * 1000 * 1000,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
}

// byteUnitNames lists byteUnits as they are written, for messages.
var byteUnitNames = []string{"B", "KiB", "MiB", "GiB", "KB", "MB", "GB"}

var byteSizeRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)$`)

// UnmarshalYAML parses a byte size with an optional unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	m := byteSizeRe.FindStringSubmatch(strings.TrimSpace(n.Value))
	if n.Kind != yaml.ScalarNode || m == nil {
		return fmt.Errorf("bad byte size %q: want e.g. 1048576, 512KiB, 5MiB, 1GiB", n.Value)
	}
	mult, ok := byteUnits[m[2]]
	if !ok {
		msg := fmt.Sprintf("unknown unit %q in %q: use %s", m[2], n.Value, OrList(byteUnitNames))
		// Only a unit of the same magnitude is a likely typo (mib, Mb, M).
		if s := Suggest(m[2], byteUnitNames); s != "" && strings.EqualFold(s[:1], m[2][:1]) {
			msg += fmt.Sprintf(" (did you mean %s%s?)", m[1], s)
		}
		return fmt.Errorf("%s", msg)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	if v*float64(mult) >= math.MaxInt64 {
		return fmt.Errorf("byte size %q is too large (8EiB or more)", n.Value)
	}
	if v > 0 && v*float64(mult) < 1 { // not 0, which means none
		return fmt.Errorf("byte size %q is less than one byte: want e.g. 1048576, 512KiB, 5MiB, 1GiB", n.Value)
	}
	*b = ByteSize(v * float64(mult))
	return nil
}

// MarshalYAML writes the size in bytes.
func (b ByteSize) MarshalYAML() (any, error) { return int64(b), nil }
