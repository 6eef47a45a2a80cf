package plan

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func schedulePlan(window string) string {
	return `version: 1
name: hourly
source: {brokers: ["k:9092"], topic: orders}
group: replay.hourly
window: ` + window + `
sink: {type: stdout}
`
}

var scheduleNow = func() time.Time { return time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC) }

// TestScheduleValidation: each mistake in a schedule window is reported
// at its field with what to write instead.
func TestScheduleValidation(t *testing.T) {
	for _, tc := range []struct {
		name, window, want string
	}{
		{"unknown zone", "{every: 1h, zone: Europe/Berln, start: 2026-11-01T00:00:00Z}", `window.zone: unknown time zone "Europe/Berln": use an IANA name`},
		{"the machine's zone", "{every: 1h, zone: Local, start: 2026-11-01T00:00:00Z}", `window.zone: Local is the time zone of whichever machine runs the plan`},
		{"every zero", "{every: 0h, start: 2026-11-01T00:00:00Z}", `window.every: "0h" is not a positive interval`},
		{"every negative", "{every: -1h, start: 2026-11-01T00:00:00Z}", `window.every: "-1h" is not a positive interval`},
		{"every not dividing", "{every: 7m, start: 2026-11-01T00:00:00Z}", "window.every: 7m does not divide an hour"},
		{"every mixed units", "{every: 1h30m, start: 2026-11-01T00:00:00Z}", `window.every: "1h30m" is not a calendar interval`},
		{"every weeks", "{every: 1w, start: 2026-11-01T00:00:00Z}", `window.every: "1w" has no calendar unit`},
		{"start not aligned", "{every: 1h, zone: Europe/Berlin, start: 2026-11-01T00:20:00+01:00}",
			"window.start: 2026-11-01T00:20:00+01:00 is not aligned to every 1h in Europe/Berlin: use the boundary before it, 2026-11-01T00:00:00+01:00, or after it, 2026-11-01T01:00:00+01:00"},
		{"day start not midnight in zone", "{every: 1d, zone: Europe/Berlin, start: 2026-11-01T00:00:00Z}",
			"use the boundary before it, 2026-11-01T00:00:00+01:00, or after it, 2026-11-02T00:00:00+01:00"},
		{"start relative", "{every: 1h, start: -2h}", `window.start: "-2h" is relative`},
		{"start before 1970", "{every: 1m, start: 0001-01-01T00:00:00Z}", `window.start: 0001-01-01T00:00:00Z is before 1970`},
		{"start missing", "{every: 1h}", "window.start: missing: a schedule needs its first interval, e.g. start: 2026-11-30T10:00:00Z"},
		{"every missing", "{start: 2026-11-01T00:00:00Z}", "window.every: missing"},
		{"delay negative", "{every: 1h, start: 2026-11-01T00:00:00Z, delay: -10m}", `window.delay: bad duration "-10m"`},
		{"mixed with from", "{every: 1h, start: 2026-11-01T00:00:00Z, from: -1h}", "window.from: a schedule (every, start) replays its own intervals: drop from"},
		{"mixed with offsets", "{every: 1h, start: 2026-11-01T00:00:00Z, offsets: {0: {from: 1, to: 2}}}", "window.offsets: a schedule (every, start) replays its own intervals: drop offsets"},
		{"strict timestamps", "{every: 1h, start: 2026-11-01T00:00:00Z, strict_timestamps: true}", "window.strict_timestamps: applies to a from/to window only"},
		{"delay without schedule", "{from: -2h, delay: 5m}", "window.delay: applies to a schedule only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(schedulePlan(tc.window)), LoadOptions{Sinks: testSinks, Now: scheduleNow})
			var inv *InvalidError
			if !errors.As(err, &inv) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestScheduleValid(t *testing.T) {
	p, err := Parse("p.yaml", []byte(schedulePlan("{every: 15m, zone: Asia/Kolkata, start: 2026-11-01T00:15:00+05:30, delay: 10m}")), LoadOptions{Sinks: testSinks, Now: scheduleNow})
	if err != nil {
		t.Fatal(err)
	}
	if p.Window.Kind() != WindowSchedule {
		t.Fatalf("kind %v", p.Window.Kind())
	}
	at := time.Date(2026, 11, 1, 0, 7, 0, 0, time.UTC) // 05:37 in Kolkata
	if iv, _ := p.Window.IntervalAt(at); !iv.Start.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) || iv.End.Sub(iv.Start) != 15*time.Minute {
		t.Fatalf("interval %v, want the quarter hour from 05:30 in Kolkata", iv)
	}
}

// TestScheduleIntervalsContiguous walks schedules across DST changes: each
// interval starts where the previous ended, on a wall-clock boundary of the
// zone, and IntervalAt finds the walked intervals again.
func TestScheduleIntervalsContiguous(t *testing.T) {
	for _, tc := range []struct {
		every, zone, start string
		n                  int
		lengths            map[time.Duration]int
	}{
		{"1d", "Europe/Berlin", "2026-10-24T00:00:00+02:00", 3, map[time.Duration]int{24 * time.Hour: 2, 25 * time.Hour: 1}},
		{"1d", "Europe/Berlin", "2026-03-28T00:00:00+01:00", 3, map[time.Duration]int{24 * time.Hour: 2, 23 * time.Hour: 1}},
		{"1h", "Europe/Berlin", "2026-10-25T00:00:00+02:00", 25, map[time.Duration]int{time.Hour: 25}},
		{"2h", "Europe/Berlin", "2026-10-25T00:00:00+02:00", 12, map[time.Duration]int{time.Hour: 1, 2 * time.Hour: 11}},
		{"12h", "America/New_York", "2026-10-31T12:00:00-04:00", 3, map[time.Duration]int{12 * time.Hour: 2, 13 * time.Hour: 1}},
		{"12h", "America/New_York", "2026-03-07T12:00:00-05:00", 3, map[time.Duration]int{12 * time.Hour: 2, 11 * time.Hour: 1}},
		{"6h", "Europe/Berlin", "2026-10-25T00:00:00+02:00", 4, map[time.Duration]int{7 * time.Hour: 1, 6 * time.Hour: 3}},
		{"24h", "Europe/Berlin", "2026-10-25T00:00:00+02:00", 2, map[time.Duration]int{25 * time.Hour: 1, 24 * time.Hour: 1}},
		{"3h", "Australia/Lord_Howe", "2026-04-05T00:00:00+11:00", 2, map[time.Duration]int{3*time.Hour + 30*time.Minute: 1, 3 * time.Hour: 1}},
		{"15m", "Australia/Lord_Howe", "2026-04-05T01:30:00+11:00", 4, map[time.Duration]int{15 * time.Minute: 4}},
	} {
		t.Run(tc.every+" "+tc.start, func(t *testing.T) {
			p, err := Parse("p.yaml", []byte(schedulePlan("{every: "+tc.every+", zone: "+tc.zone+", start: "+tc.start+"}")), LoadOptions{Sinks: testSinks, Now: scheduleNow})
			if err != nil {
				t.Fatal(err)
			}
			w := p.Window
			lengths := map[time.Duration]int{}
			iv := w.FirstInterval()
			step, _ := time.ParseDuration(tc.every) // 0 for days: midnight
			for i := 0; i < tc.n; i++ {
				lengths[iv.End.Sub(iv.Start)]++
				ls := iv.Start.In(w.Location())
				if clock := time.Duration(ls.Hour())*time.Hour + time.Duration(ls.Minute())*time.Minute + time.Duration(ls.Second())*time.Second; step == 0 && clock != 0 || step != 0 && clock%step != 0 {
					t.Fatalf("%v starts at %s on the wall clock of %s: not a boundary of every %s", iv, ls.Format("15:04"), tc.zone, tc.every)
				}
				if got, _ := w.IntervalAt(iv.Start.Add(iv.End.Sub(iv.Start) / 2)); got != iv {
					t.Fatalf("IntervalAt(middle of %v) = %v", iv, got)
				}
				next := w.NextInterval(iv)
				if !next.Start.Equal(iv.End) {
					t.Fatalf("%v is followed by %v", iv, next)
				}
				iv = next
			}
			if len(lengths) != len(tc.lengths) {
				t.Fatalf("interval lengths %v, want %v", lengths, tc.lengths)
			}
			for d, n := range tc.lengths {
				if lengths[d] != n {
					t.Fatalf("interval lengths %v, want %v", lengths, tc.lengths)
				}
			}
		})
	}
}

// A schedule of a week or more is warned of: Kafka's default retention of
// an empty group's offsets (7 days) would delete its progress between runs.
func TestScheduleLongerThanOffsetRetention(t *testing.T) {
	for every, warned := range map[string]bool{"6d": false, "7d": true, "14d": true, "12h": false} {
		p, err := Parse("p.yaml", []byte(schedulePlan("{every: "+every+", start: 2026-11-01T00:00:00Z}")), LoadOptions{Sinks: testSinks, Now: scheduleNow})
		if err != nil {
			t.Fatalf("every %s: %v", every, err)
		}
		got := false
		for _, w := range p.Warnings() {
			got = got || w.Field == "window.every" && strings.Contains(w.Message, "offsets.retention.minutes")
		}
		if got != warned {
			t.Errorf("every %s: warned %v, want %v (warnings %v)", every, got, warned, p.Warnings())
		}
	}
}

// Over a year of daylight saving changes in zones with whole-hour,
// half-hour and 45-minute offsets and changes, every schedule's intervals
// are contiguous, start on a wall-clock boundary (a wall time a change
// skips is none, so that interval is longer), and are found again by
// IntervalAt.
func TestScheduleIntervalsAYear(t *testing.T) {
	for _, zone := range []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham", "America/Santiago", "Asia/Kolkata"} {
		for _, every := range []string{"30m", "1h", "2h", "3h", "4h", "6h", "8h", "12h", "24h"} {
			loc, err := time.LoadLocation(zone)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, loc).Format(time.RFC3339)
			p, err := Parse("p.yaml", []byte(schedulePlan("{every: "+every+", zone: "+zone+", start: "+start+"}")), LoadOptions{Sinks: testSinks, Now: scheduleNow})
			if err != nil {
				t.Fatal(err)
			}
			w, step := p.Window, mustDuration(t, every)
			end := time.Date(2027, 1, 1, 0, 0, 0, 0, loc)
			for iv := w.FirstInterval(); iv.Start.Before(end); iv = w.NextInterval(iv) {
				ls := iv.Start.In(loc)
				clock := time.Duration(ls.Hour())*time.Hour + time.Duration(ls.Minute())*time.Minute + time.Duration(ls.Second())*time.Second
				if d := iv.End.Sub(iv.Start); clock%step != 0 || d <= 0 || d > 2*step {
					t.Fatalf("%s every %s: %v (%s on the wall clock, %s long)", zone, every, iv, ls.Format("15:04"), d)
				}
				for _, at := range []time.Time{iv.Start, iv.End.Add(-time.Nanosecond)} {
					if got, _ := w.IntervalAt(at); got != iv {
						t.Fatalf("%s every %s: IntervalAt(%s) = %v, want %v", zone, every, at, got, iv)
					}
				}
			}
		}
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
