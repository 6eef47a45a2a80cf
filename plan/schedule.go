package plan

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	// The Go toolchain's copy of the IANA time zone database: zones resolve
	// on machines (containers) without /usr/share/zoneinfo.
	_ "time/tzdata"

	"gopkg.in/yaml.v3"
)

// Every is the length of a schedule's intervals, in a calendar unit:
// minutes that divide an hour (1m, 2m, 5m, 10m, 15m, 20m, 30m), hours that
// divide a day (1h, 2h, 3h, 4h, 6h, 8h, 12h) or whole days (1d, 2d, ...).
// Intervals align to the wall clock of the schedule's zone (a 1d interval
// is midnight to midnight there).
type Every struct {
	raw
	n    int
	unit byte // 'm', 'h' or 'd'
}

var everyRe = regexp.MustCompile(`^(-?[0-9]+)([a-z]+)$`)

// ParseEvery parses an interval length; see Every.
func ParseEvery(s string) (Every, error) {
	const want = "minutes dividing an hour (1m, 5m, 10m, 15m, 30m), hours dividing a day (1h, 2h, 3h, 6h, 12h) or days (1d)"
	m := everyRe.FindStringSubmatch(s)
	if m == nil {
		return Every{}, fmt.Errorf("%q is not a calendar interval: want %s", s, want)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 {
		return Every{}, fmt.Errorf("%q is not a positive interval: want %s", s, want)
	}
	switch unit := m[2]; {
	case unit == "m" && 60%n == 0, unit == "h" && 24%n == 0, unit == "d":
		return Every{raw: raw(s), n: n, unit: unit[0]}, nil
	case unit == "m" || unit == "h":
		return Every{}, fmt.Errorf("%s does not divide %s, so its intervals would not align to the clock: want %s", s, map[string]string{"m": "an hour", "h": "a day"}[unit], want)
	}
	return Every{}, fmt.Errorf("%q has no calendar unit: want %s", s, want)
}

// UnmarshalYAML parses a scalar with ParseEvery.
func (e *Every) UnmarshalYAML(n *yaml.Node) error {
	return unmarshalScalar(n, e, ParseEvery, "want an interval such as 15m, 1h or 1d")
}

// unitLen is the length of the sub-day units.
var unitLen = map[byte]time.Duration{'m': time.Minute, 'h': time.Hour}

// step is the length of a sub-day interval (0 for days).
func (e Every) step() time.Duration { return time.Duration(e.n) * unitLen[e.unit] }

// Interval is one interval of a schedule, [Start, End) in UTC.
type Interval struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// String renders the interval as [start, end) in RFC 3339 UTC.
func (iv Interval) String() string {
	return "[" + iv.Start.UTC().Format(time.RFC3339) + ", " + iv.End.UTC().Format(time.RFC3339) + ")"
}

// Contains reports whether t lies in [Start, End).
func (iv Interval) Contains(t time.Time) bool { return !t.Before(iv.Start) && t.Before(iv.End) }

// IsSchedule reports whether the window is a schedule (every, zone, start,
// delay): Kind() == WindowSchedule.
func (w Window) IsSchedule() bool { return w.Kind() == WindowSchedule }

// Location returns the window's zone (UTC when unset or unknown; validation
// reports an unknown zone).
func (w Window) Location() *time.Location {
	if loc, ok := locations.Load(w.Zone); ok {
		return loc.(*time.Location)
	}
	loc, err := time.LoadLocation(w.Zone) // "" is UTC; read from disk
	if err != nil {
		return time.UTC
	}
	locations.Store(w.Zone, loc)
	return loc
}

// locations caches the zones Location loaded, by name.
var locations sync.Map

// floor returns the latest interval boundary at or before t: the latest
// instant whose wall clock in loc is aligned to e (a wall time a daylight
// saving change repeats is a boundary each time; one it skips is none).
func (e Every) floor(t time.Time, loc *time.Location) time.Time {
	lt := t.In(loc)
	if e.unit == 'd' {
		return time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, loc).UTC()
	}
	step := e.step()
	// The boundary lies within two steps and a daylight saving change
	// before t, on the wall clock of one of the two offsets in force there:
	// under each, the latest aligned wall time that is in force at its
	// instant.
	_, now := lt.Zone()
	_, before := t.Add(-step - 2*time.Hour).In(loc).Zone()
	var best time.Time
	for _, off := range []int{now, before} {
		shift := time.Duration(off) * time.Second
		for w := t.Add(shift).UTC().Truncate(step); ; w = w.Add(-step) {
			at := w.Add(-shift)
			if at.Before(t.Add(-2*step - 2*time.Hour)) {
				break
			}
			if _, o := at.In(loc).Zone(); o == off && !at.After(t) {
				if at.After(best) {
					best = at
				}
				break
			}
		}
	}
	return best.UTC()
}

// next returns the first boundary after t.
func (e Every) next(t time.Time, loc *time.Location) time.Time {
	if e.unit == 'd' {
		lt := t.In(loc)
		return time.Date(lt.Year(), lt.Month(), lt.Day()+e.n, 0, 0, 0, 0, loc).UTC()
	}
	// The latest boundary at t+step, t+2·step, ...: the first past t is the
	// next (an interval shorter than step, where a change repeats a wall
	// time, never follows one longer than step).
	for x := t.Add(e.step()); ; x = x.Add(e.step()) {
		if b := e.floor(x, loc); b.After(t) {
			return b
		}
	}
}

// FirstInterval is the schedule's first interval: the one at start.
func (w Window) FirstInterval() Interval {
	start := w.Start.At(time.Time{}).UTC()
	return Interval{Start: start, End: w.Every.next(start, w.Location())}
}

// NextInterval is the interval that follows iv.
func (w Window) NextInterval(iv Interval) Interval {
	return Interval{Start: iv.End, End: w.Every.next(iv.End, w.Location())}
}

// IntervalAt returns the schedule's interval that contains t (or starts
// at t); false when t is before the schedule's start.
func (w Window) IntervalAt(t time.Time) (Interval, bool) {
	first := w.FirstInterval()
	if t.Before(first.Start) {
		return Interval{}, false
	}
	loc := w.Location()
	start := w.Every.floor(t, loc)
	if start.Before(first.Start) { // days counted from start (2d)
		start = first.Start
	}
	iv := Interval{Start: start, End: w.Every.next(start, loc)}
	if w.Every.unit == 'd' && w.Every.n > 1 {
		// Multi-day intervals count from the schedule's start.
		iv = first
		for !iv.Contains(t) {
			iv = Interval{Start: iv.End, End: w.Every.next(iv.End, loc)}
		}
	}
	return iv, true
}

// DueAt is when iv becomes due: its end plus the schedule's delay.
func (w Window) DueAt(iv Interval) time.Time { return iv.End.Add(time.Duration(w.Delay)) }

// Due reports whether iv is due at now.
func (w Window) Due(iv Interval, now time.Time) bool { return !w.DueAt(iv).After(now) }

// schedule checks a schedule window.
func (v *validator) schedule() {
	w := v.p.Window
	v.refuse("a schedule (every, start) replays its own intervals: drop %s, or drop every/start for a one-off window", "from", "to", "offsets", "last")
	if w.StrictTimestamps {
		v.add("window.strict_timestamps", "applies to a from/to window only: a schedule's intervals are contiguous in offsets, so each record belongs to exactly one interval")
	}
	if w.SkewMargin != 0 {
		v.add("window.skew_margin", "applies to a from/to window only: a schedule's intervals are contiguous in offsets")
	}
	loc, ok := v.zone(w.Zone) // "" is UTC
	if !ok {
		return
	}
	if v.p.bad["window.every"] || v.p.bad["window.start"] {
		return // already reported
	}
	if !w.Every.IsSet() {
		v.add("window.every", "missing: a schedule needs the interval length, e.g. every: 1h (15m, 1h, 1d, ...)")
	}
	if !w.Start.IsSet() {
		v.add("window.start", "missing: a schedule needs its first interval, e.g. start: %s (catch-up never goes earlier)", w.Every.floor(v.now, loc).In(loc).Format(time.RFC3339))
		return
	}
	if w.Start.IsRelative() {
		v.add("window.start", "%q is relative: the first interval must be a fixed instant, e.g. %s", w.Start.String(), v.now.UTC().Truncate(time.Hour).Format(time.RFC3339))
		return
	}
	if !w.Every.IsSet() {
		return
	}
	if w.Every.unit == 'd' && w.Every.n >= 7 {
		v.warn("window.every", "%s is at least as long as Kafka's default offsets.retention.minutes (7 days), and the schedule's progress is its group's commits: a group empty that long loses them, and the next run starts again at start (every interval replayed once more); keep the brokers' offsets.retention.minutes above the interval, or use a shorter every", w.Every)
	}
	start := w.Start.At(v.now)
	if start.Before(time.Unix(0, 0)) {
		v.add("window.start", "%s is before 1970, where Kafka's timestamps begin: start the schedule at its first interval with records", w.Start.String())
		return
	}
	if before := w.Every.floor(start, loc); !before.Equal(start) {
		after := w.Every.next(before, loc)
		v.add("window.start", "%s is not aligned to every %s in %s: use the boundary before it, %s, or after it, %s",
			w.Start.String(), w.Every, loc, before.In(loc).Format(time.RFC3339), after.In(loc).Format(time.RFC3339))
	}
}
