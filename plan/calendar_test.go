package plan

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCalendarBounds: today, yesterday and last resolve to midnights and
// unit boundaries in the window's zone, around midnight and across the
// days daylight saving time ends (Europe/Berlin, 2026-10-25: 25 hours)
// and starts (2026-03-29: 23 hours).
func TestCalendarBounds(t *testing.T) {
	for _, tc := range []struct {
		name, window, now, from, to string
	}{
		{"last 1h", "{last: 1h}", "2026-12-01T10:17:00Z", "2026-12-01T09:00:00Z", "2026-12-01T10:00:00Z"},
		{"last 1h on the hour", "{last: 1h}", "2026-12-01T10:00:00Z", "2026-12-01T09:00:00Z", "2026-12-01T10:00:00Z"},
		{"last 3h", "{last: 3h}", "2026-12-01T10:17:00Z", "2026-12-01T07:00:00Z", "2026-12-01T10:00:00Z"},
		{"last 15m", "{last: 15m}", "2026-12-01T10:17:30Z", "2026-12-01T10:02:00Z", "2026-12-01T10:17:00Z"},
		{"last 1h in a half-hour zone", "{last: 1h, zone: Asia/Kolkata}", "2026-12-01T10:17:00Z", "2026-12-01T08:30:00Z", "2026-12-01T09:30:00Z"},
		{"last 1d utc", "{last: 1d}", "2026-12-01T00:00:00Z", "2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"last 1d just before midnight", "{last: 1d}", "2026-11-30T23:59:59Z", "2026-11-29T00:00:00Z", "2026-11-30T00:00:00Z"},
		{"last 1d: Berlin is past midnight", "{last: 1d, zone: Europe/Berlin}", "2026-11-30T23:30:00Z", "2026-11-29T23:00:00Z", "2026-11-30T23:00:00Z"},
		{"last 1d: the 25-hour day", "{last: 1d, zone: Europe/Berlin}", "2026-10-26T09:00:00Z", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z"},
		{"last 1d: the 23-hour day", "{last: 1d, zone: Europe/Berlin}", "2026-03-30T09:00:00Z", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"},
		{"last 7d", "{last: 7d, zone: Europe/Berlin}", "2026-11-01T12:00:00Z", "2026-10-24T22:00:00Z", "2026-10-31T23:00:00Z"},
		{"last 1h across the DST end", "{last: 1h, zone: Europe/Berlin}", "2026-10-25T01:10:00Z", "2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z"},
		{"yesterday to today", "{from: yesterday, to: today, zone: Europe/Berlin}", "2026-10-26T09:00:00Z", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z"},
		{"yesterday to today utc", "{from: yesterday, to: today}", "2026-12-01T00:00:00Z", "2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"today to high watermark", "{from: today, zone: America/New_York}", "2026-12-01T03:00:00Z", "2026-11-30T05:00:00Z", ""},
		{"yesterday to -2h", "{from: yesterday, to: -2h}", "2026-12-01T10:00:00Z", "2026-11-30T00:00:00Z", "2026-12-01T08:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := mustTime(t, tc.now)
			p, err := Parse("p.yaml", []byte(schedulePlan(tc.window)), LoadOptions{Sinks: testSinks, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			from, to := p.Window.Bounds(now)
			if got := from.Format(time.RFC3339); got != tc.from {
				t.Errorf("from = %s, want %s", got, tc.from)
			}
			got := ""
			if !to.IsZero() {
				got = to.Format(time.RFC3339)
			}
			if got != tc.to {
				t.Errorf("to = %s, want %s", got, tc.to)
			}
		})
	}
}

// TestCalendarValidation: last stands alone, zone needs a calendar
// window, and each mistake says what to write.
func TestCalendarValidation(t *testing.T) {
	for _, tc := range []struct {
		name, window, want string
	}{
		{"last with from", "{last: 1h, from: -2h}", "window.from: last gives the whole window (last: 1h is the last whole hour): drop from"},
		{"last with to", "{last: 1h, to: today}", "window.to: last gives the whole window"},
		{"last with offsets", "{last: 1h, offsets: {0: {from: 1, to: 2}}}", "window.offsets: last gives the whole window"},
		{"last with every", "{last: 1h, every: 1h, start: 2026-11-01T00:00:00Z}", "window.last: a schedule (every, start) replays its own intervals: drop last"},
		{"last bad unit", "{last: 1w}", `window.last: "1w" is not a calendar length: want a number of whole minutes, hours or days`},
		{"last mixed", "{last: 1h30m}", `window.last: "1h30m" is not a calendar length`},
		{"last zero", "{last: 0h}", `window.last: "0h": want 1 to 100000 hours`},
		{"zone without calendar", "{from: -2h, zone: Europe/Berlin}", "window.zone: applies to a schedule (every, start) or a calendar window (from: yesterday, to: today, last: 1d) only"},
		{"unknown zone", "{last: 1d, zone: Europe/Berln}", `window.zone: unknown time zone "Europe/Berln"`},
		{"the machine's zone", "{last: 1d, zone: Local}", `window.zone: Local is the time zone of whichever machine runs the plan`},
		{"today to yesterday", "{from: today, to: yesterday}", "window.to: 2026-11-29T00:00:00Z is not after from (2026-11-30T00:00:00Z)"},
		{"delay without schedule", "{last: 1d, delay: 5m}", "window.delay: applies to a schedule only"},
		{"tomorrow", "{from: tomorrow}", "today, yesterday"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(schedulePlan(tc.window)), LoadOptions{Sinks: testSinks, Now: scheduleNow})
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Parse: %v, want an *InvalidError", err)
			}
			if !strings.Contains(inv.Error(), tc.want) {
				t.Errorf("problems:\n%s\nwant one containing %q", inv.Error(), tc.want)
			}
		})
	}
}

// TestCalendarFingerprint: like from: -2h, a calendar window is
// fingerprinted as written (every day's run of `last: 1d` is the same
// plan), with its zone (which decides the instants).
func TestCalendarFingerprint(t *testing.T) {
	fp := func(window string, now time.Time) string {
		t.Helper()
		p, err := Parse("p.yaml", []byte(schedulePlan(window)), LoadOptions{Sinks: testSinks, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return p.Fingerprint()
	}
	day1, day2 := scheduleNow(), scheduleNow().Add(24*time.Hour)
	if fp("{last: 1d}", day1) != fp("{last: 1d}", day2) {
		t.Error("last: 1d has another fingerprint on another day")
	}
	distinct := []string{"{last: 1d}", "{last: 1d, zone: Europe/Berlin}", "{last: 2d}", "{last: 24h}",
		"{from: yesterday, to: today}", "{from: yesterday, to: today, zone: Europe/Berlin}", "{from: yesterday}", "{from: -2h}"}
	seen := map[string]string{}
	for _, w := range distinct {
		f := fp(w, day1)
		if prev, dup := seen[f]; dup {
			t.Errorf("%s and %s have the same fingerprint %s", prev, w, f)
		}
		seen[f] = w
	}
	if fp("{from: -2h}", day1) != fp("{from: -2h, strict_timestamps: false}", day1) {
		t.Error("an absolute-free window's fingerprint changed with a default")
	}
}

// TestOffsetsAll: offsets: {all: ...} is one range for every partition,
// refused beside per-partition keys; a bad key does not hide the plan's
// other problems.
func TestOffsetsAll(t *testing.T) {
	p, err := Parse("p.yaml", []byte(schedulePlan("{offsets: {all: {from: 4990, to: latest}}}")), LoadOptions{Sinks: testSinks, Now: scheduleNow})
	if err != nil {
		t.Fatal(err)
	}
	if p.Window.Kind() != WindowOffsets || p.Window.OffsetRangeOf(7).From.Offset != 4990 || !p.Window.OffsetRangeOf(0).To.Latest {
		t.Fatalf("window %+v", p.Window)
	}
	q, err := Parse("p.yaml", []byte(schedulePlan("{offsets: {0: {from: 4990, to: latest}}}")), LoadOptions{Sinks: testSinks, Now: scheduleNow})
	if err != nil {
		t.Fatal(err)
	}
	if p.Fingerprint() == q.Fingerprint() {
		t.Error("offsets all and offsets 0 have the same fingerprint")
	}
	for _, tc := range []struct {
		name, window string
		want         []string
	}{
		{"all and a partition", "{offsets: {all: {from: 1, to: latest}, 3: {from: 1, to: 2}}}",
			[]string{"window.offsets.all: all gives every partition the same range: drop the per-partition keys"}},
		{"all latest start", "{offsets: {all: {from: latest, to: latest}}}", []string{"window.offsets.all.from: latest as the start replays nothing"}},
		{"all missing to", "{offsets: {all: {from: 5}}}", []string{"window.offsets.all: give both from and to"}},
		{"bad key hides nothing", "{offsets: {x: {from: 1, to: 2}, 1: {from: latest, to: 5}}}\nthrottle: {records_per_second: -1}",
			[]string{`window.offsets.x: key "x": want a partition number (0, 1, ...) or all`, "window.offsets.1.from: latest as the start", "throttle.records_per_second: must be >= 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(schedulePlan(tc.window)), LoadOptions{Sinks: testSinks, Now: scheduleNow})
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Parse: %v, want an *InvalidError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(inv.Error(), w) {
					t.Errorf("problems:\n%s\nwant one containing %q", inv.Error(), w)
				}
			}
		})
	}
}

// TestScheduleFileSinkRefused: a schedule republishes a file sink's path
// every interval, so it is refused, for the sink and the dead letters.
func TestScheduleFileSinkRefused(t *testing.T) {
	body := strings.Replace(schedulePlan("{every: 1h, start: 2026-11-01T00:00:00Z}"), "sink: {type: stdout}",
		"sink: {type: file, path: out/x.jsonl}\non_error: dead_letter\ndead_letter: {type: file, path: out/dead.jsonl}", 1)
	_, err := Parse("p.yaml", []byte(body), LoadOptions{Sinks: testSinks, Now: scheduleNow})
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("Parse: %v, want an *InvalidError", err)
	}
	for _, f := range []string{"sink.type", "dead_letter.type"} {
		if want := f + ": a file sink publishes its path once per interval, so with a schedule the file would hold the last interval only: use a postgres, sqlite, kafka or http sink"; !strings.Contains(inv.Error(), want) {
			t.Errorf("problems:\n%s\nwant %q", inv.Error(), want)
		}
	}
}

// Found by a new user: a scheduled sqlite sink with a relative path, run
// from another directory, wrote its intervals to a second database.
func TestScheduleRelativeSQLitePathRefused(t *testing.T) {
	body := strings.Replace(schedulePlan("{every: 1h, start: 2026-11-01T00:00:00Z}"), "sink: {type: stdout}",
		"sink: {type: sqlite, path: out/x.db, table: t, create_table: true}", 1)
	_, err := Parse("p.yaml", []byte(body), LoadOptions{Sinks: testSinks, Now: scheduleNow})
	var inv *InvalidError
	if !errors.As(err, &inv) || !strings.Contains(inv.Error(), `sink.path: "out/x.db" is relative: with a schedule`) {
		t.Fatalf("Parse: %v, want the relative path refused", err)
	}
	abs := strings.Replace(body, "path: out/x.db", "path: /var/lib/replay/x.db", 1)
	if _, err := Parse("p.yaml", []byte(abs), LoadOptions{Sinks: testSinks, Now: scheduleNow}); err != nil {
		t.Fatalf("an absolute path: %v", err)
	}
}
