package plan

import (
	"fmt"
	"time"
)

func (v *validator) window() {
	w := v.p.Window
	timeGiven := v.present("window.from") || v.present("window.to") || v.present("window.last")
	if v.present("window.every") || v.present("window.start") {
		v.schedule()
		return
	}
	if v.present("window.delay") {
		v.add("window.delay", "applies to a schedule only (every, start)")
	}
	v.zoneOnly()
	switch {
	case v.present("window.last"):
		v.refuse("last gives the whole window (last: 1h is the last whole hour): drop %s, or drop last for a from/to window", "from", "to", "offsets")
		return
	case timeGiven && v.present("window.offsets"):
		v.add("window", "give either from/to (a time window) or offsets, not both")
		return
	case !timeGiven && v.p.bad["window.offsets"] && w.Kind() != WindowOffsets:
		return // already reported
	case !timeGiven && w.Kind() != WindowOffsets:
		v.add("window", "missing: give from (and optionally to), last, or offsets per partition")
		return
	case !timeGiven:
		v.offsetWindow()
		return
	case v.p.bad["window.from"] || v.p.bad["window.to"]:
		return // a bound that did not parse is already reported
	}
	if !w.From.IsSet() {
		v.add("window.from", "missing: a time window needs from (inclusive), e.g. 2026-11-03T10:00:00Z, -2h or yesterday")
		return
	}
	from, to := w.Bounds(v.now)
	if from.Before(time.Unix(0, 0)) {
		// ListOffsets reads -1 and -2 as latest and earliest (KIP-79).
		v.add("window.from", "%s is before 1970-01-01T00:00:00Z, where Kafka's timestamps start: give a later from", from.Format(time.RFC3339Nano))
	}
	if from.After(v.now) {
		v.add("window.from", "%s is in the future: nothing would be replayed", from.Format(time.RFC3339Nano))
	}
	if w.To.IsSet() {
		if !from.Before(to) {
			v.add("window.to", "%s is not after from (%s), so the window is empty: to is exclusive and must be later than from", to.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano))
		}
		if to.After(v.now) {
			v.add("window.to", "%s is in the future, so the window is not complete yet: omit to (the high watermark at resolution) or wait", to.Format(time.RFC3339Nano))
		}
	}
}

func (v *validator) offsetWindow() {
	w := v.p.Window
	if w.StrictTimestamps {
		v.add("window.strict_timestamps", "applies to a time window only")
	}
	if w.SkewMargin != 0 {
		v.add("window.skew_margin", "applies to a time window only")
	}
	if w.OffsetsAll != nil {
		if len(w.Offsets) > 0 {
			v.add("window.offsets.all", "all gives every partition the same range: drop the per-partition keys, or drop all and list every partition")
		}
		v.offsetRange("window.offsets.all", *w.OffsetsAll)
		return
	}
	if !v.p.Source.Partitions.All && len(v.p.Source.Partitions.List) > 0 {
		v.add("source.partitions", "an offsets window names its own partitions: drop source.partitions (or use offsets: {all: ...} for the partitions it selects)")
	}
	for part, r := range w.Offsets {
		f := fmt.Sprintf("window.offsets.%d", part)
		if part < 0 {
			v.add(f, "partition %d: partitions are numbered from 0", part)
		}
		v.offsetRange(f, r)
	}
}

// offsetRange checks one range of an offsets window, at field f.
func (v *validator) offsetRange(f string, r OffsetRange) {
	if v.p.bad[f+".from"] || v.p.bad[f+".to"] || v.p.bad[f] {
		return // already reported
	}
	if !r.From.IsSet() || !r.To.IsSet() {
		v.add(f, "give both from and to (numbers, earliest or latest)")
		return
	}
	if r.From.Latest {
		v.add(f+".from", "latest as the start replays nothing: use earliest or an offset")
	}
	if r.To.Earliest {
		v.add(f+".to", "earliest as the end replays nothing: use latest or an offset")
	}
	if !r.From.Earliest && !r.From.Latest && !r.To.Earliest && !r.To.Latest && r.From.Offset >= r.To.Offset {
		v.add(f, "from %d must be below to %d (to is exclusive)", r.From.Offset, r.To.Offset)
	}
}
