package plan

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Last is a calendar window of N whole minutes, hours or days (30m, 1h,
// 1d) ending at the last boundary of its unit on the wall clock of the
// window's zone: resolved at 10:17, last: 1h is [09:00, 10:00).
type Last struct {
	raw
	n    int
	unit byte // 'm', 'h' or 'd'
}

var lastRe = regexp.MustCompile(`^([0-9]+)([mhd])$`)

// ParseLast parses a calendar window length; see Last.
func ParseLast(s string) (Last, error) {
	m := lastRe.FindStringSubmatch(s)
	if m == nil {
		return Last{}, fmt.Errorf("%q is not a calendar length: want a number of whole minutes, hours or days, e.g. 30m, 1h or 1d", s)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 || n > 100000 {
		return Last{}, fmt.Errorf("%q: want 1 to 100000 %s", s, map[byte]string{'m': "minutes", 'h': "hours", 'd': "days"}[m[2][0]])
	}
	return Last{raw: raw(s), n: n, unit: m[2][0]}, nil
}

// UnmarshalYAML parses a scalar with ParseLast.
func (l *Last) UnmarshalYAML(n *yaml.Node) error {
	return unmarshalScalar(n, l, ParseLast, "want a length such as 1h or 1d")
}

// Span returns [from, to) of the window resolved at now in loc: to is now
// rounded down to the unit on loc's wall clock, from is n units earlier.
func (l Last) Span(now time.Time, loc *time.Location) (from, to time.Time) {
	if l.unit == 'd' {
		lt := now.In(loc)
		to = time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, loc)
		return time.Date(lt.Year(), lt.Month(), lt.Day()-l.n, 0, 0, 0, 0, loc).UTC(), to.UTC()
	}
	to = Every{n: 1, unit: l.unit}.floor(now, loc)
	return to.Add(-time.Duration(l.n) * unitLen[l.unit]), to
}

// IsCalendar reports whether the window depends on its zone: last, or a
// today/yesterday bound.
func (w Window) IsCalendar() bool {
	return w.Last.IsSet() || w.From.IsCalendar() || w.To.IsCalendar()
}

// Bounds resolves a time window at now: from, and to (zero when unset:
// the high watermark). Relative bounds are taken from now; today,
// yesterday and last from the wall clock of the window's zone.
func (w Window) Bounds(now time.Time) (from, to time.Time) {
	loc := w.Location()
	if w.Last.IsSet() {
		return w.Last.Span(now, loc)
	}
	from = w.From.AtIn(now, loc).UTC()
	if w.To.IsSet() {
		to = w.To.AtIn(now, loc).UTC()
	}
	return from, to
}

// refuse adds the problem format (naming the field) to each of the window
// fields written.
func (v *validator) refuse(format string, fields ...string) {
	for _, f := range fields {
		if v.present("window." + f) {
			v.add("window."+f, format, f)
		}
	}
}

// zoneOnly checks zone outside a schedule: it applies to calendar windows.
func (v *validator) zoneOnly() {
	w := v.p.Window
	if !v.present("window.zone") {
		return
	}
	if !w.IsCalendar() {
		v.add("window.zone", "applies to a schedule (every, start) or a calendar window (from: yesterday, to: today, last: 1d) only")
		return
	}
	v.zone(w.Zone)
}

// zone loads the IANA time zone name for window.zone, reporting an unknown
// zone, and Local (whichever machine runs the plan).
func (v *validator) zone(name string) (*time.Location, bool) {
	if name == "Local" {
		v.add("window.zone", "Local is the time zone of whichever machine runs the plan, so the same plan would replay a different day on each host: name the zone, such as Europe/Berlin or UTC")
		return nil, false
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		v.add("window.zone", "unknown time zone %q: use an IANA name such as Europe/Berlin, America/New_York or UTC", name)
		return nil, false
	}
	return loc, true
}

// Relative describes a window that depends on the moment of resolution as
// written in the plan ("last: 1d in Europe/Berlin", "from: -2h", "from:
// yesterday, to: today in UTC"); "" for absolute bounds, offsets and
// schedules.
func (w Window) Relative() string {
	if w.Kind() != WindowTime || !w.Last.IsSet() && !w.From.IsRelative() && !w.To.IsRelative() {
		return ""
	}
	s := "last: " + w.Last.String()
	if !w.Last.IsSet() {
		s = "from: " + w.From.String()
		if w.To.IsSet() {
			s += ", to: " + w.To.String()
		}
	}
	if w.IsCalendar() {
		s += " in " + w.Location().String()
	}
	return s
}
