package plan

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestParseTimeSpec(t *testing.T) {
	now := time.Date(2026, 11, 5, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		at      time.Time // when resolved at now
		rel     bool
		wantErr string // substring of the error; "" for success
	}{
		{in: "2026-11-03T10:00:00Z", at: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)},
		{in: "2026-11-03T10:00:00.250Z", at: time.Date(2026, 11, 3, 10, 0, 0, 250e6, time.UTC)},
		{in: "2026-11-03T12:00:00+02:00", at: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)},
		{in: " 2026-11-03T10:00:00Z ", at: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)},
		{in: "now", at: now, rel: true},
		{in: "-2h", at: now.Add(-2 * time.Hour), rel: true},
		{in: "-90m", at: now.Add(-90 * time.Minute), rel: true},
		{in: "-1d", at: now.Add(-24 * time.Hour), rel: true},
		{in: "-1d12h", at: now.Add(-36 * time.Hour), rel: true},
		{in: "24h ago", at: now.Add(-24 * time.Hour), rel: true},
		{in: "90m ago", at: now.Add(-90 * time.Minute), rel: true},
		{in: "2d ago", at: now.Add(-48 * time.Hour), rel: true},
		{in: "1h30m ago", at: now.Add(-90 * time.Minute), rel: true},
		{in: "", wantErr: "empty time"},
		{in: "1714557600", wantErr: "2024-05-01T10:00:00Z if it was seconds"},
		{in: "1714557600000", wantErr: "2024-05-01T10:00:00Z if it was milliseconds"},
		{in: "-5", wantErr: "bare number -5 is ambiguous"},
		{in: "2026-11-03T10:00:00", wantErr: "no zone"},
		{in: "2026-11-03 10:00:00", wantErr: "2026-11-03T10:00:00Z for UTC"},
		{in: "2026-11-03T10:00", wantErr: "2026-11-03T10:00:00Z for UTC"},
		{in: "2026-11-03", wantErr: "2026-11-03T00:00:00Z for UTC"},
		{in: "-2x", wantErr: `relative time "-2x"`},
		{in: "-d", wantErr: `relative time "-d"`},
		{in: "2h", wantErr: "cannot parse"},
		{in: "tomorrow", wantErr: "today, yesterday"},
		{in: "nan", wantErr: "cannot parse"},
		{in: "2 hours ago", wantErr: "cannot parse"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ts, err := ParseTimeSpec(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTimeSpec(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTimeSpec(%q): %v", tt.in, err)
			}
			if got := ts.At(now); !got.Equal(tt.at) {
				t.Errorf("At(now) = %s, want %s", got, tt.at)
			}
			if ts.IsRelative() != tt.rel {
				t.Errorf("IsRelative() = %v, want %v", ts.IsRelative(), tt.rel)
			}
			if !ts.IsSet() || ts.String() != strings.TrimSpace(tt.in) {
				t.Errorf("String() = %q, IsSet() = %v", ts.String(), ts.IsSet())
			}
		})
	}
}

func TestTimeSpecAtDependsOnClock(t *testing.T) {
	rel, _ := ParseTimeSpec("-2h")
	abs, _ := ParseTimeSpec("2026-11-03T10:00:00Z")
	t1 := time.Date(2026, 11, 5, 12, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	if got := rel.At(t2).Sub(rel.At(t1)); got != time.Hour {
		t.Errorf("relative bound moved by %s when the clock moved 1h", got)
	}
	if !abs.At(t1).Equal(abs.At(t2)) {
		t.Error("absolute bound moved with the clock")
	}
	if (TimeSpec{}).IsSet() {
		t.Error("zero TimeSpec is set")
	}
}

// decodeScalar decodes a one-line YAML value into out.
func decodeScalar(t *testing.T, src string, out any) error {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatalf("yaml %q: %v", src, err)
	}
	return n.Content[0].Decode(out)
}

func TestOffsetSpec(t *testing.T) {
	tests := []struct {
		in               string
		offset           int64
		earliest, latest bool
		wantErr          bool
	}{
		{in: "earliest", earliest: true},
		{in: "latest", latest: true},
		{in: "0", offset: 0},
		{in: "1200", offset: 1200},
		{in: "9223372036854775807", offset: 1<<63 - 1},
		{in: "-1", wantErr: true},
		{in: "Latest", wantErr: true},
		{in: "12.5", wantErr: true},
		{in: "[1]", wantErr: true},
		{in: "99999999999999999999", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var o OffsetSpec
			err := decodeScalar(t, tt.in, &o)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("decoded %q as %+v, want an error", tt.in, o)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Offset != tt.offset || o.Earliest != tt.earliest || o.Latest != tt.latest || o.String() != tt.in {
				t.Errorf("got %+v", o)
			}
		})
	}
}

func TestPartitionSet(t *testing.T) {
	tests := []struct {
		in      string
		want    string // String() of the set
		list    []int32
		wantErr string
	}{
		{in: "all", want: "all"},
		{in: "[0]", want: "[0]", list: []int32{0}},
		{in: "[5, 0, 3]", want: "[0 3 5]", list: []int32{0, 3, 5}},
		{in: "[1, 2, 1]", wantErr: "line 1: partition 1 is listed twice"},
		{in: "[0, -1]", wantErr: `"-1" is not a partition number`},
		{in: "[0, x]", wantErr: `"x" is not a partition number`},
		{in: "[[0]]", wantErr: "a list is not a partition number"},
		{in: "[]", wantErr: "empty partition list"},
		{in: "some", wantErr: `want "all" or a list`},
		{in: "3", wantErr: `want "all" or a list`},
		{in: "{a: 1}", wantErr: `want "all" or a list`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var s PartitionSet
			err := decodeScalar(t, tt.in, &s)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.String() != tt.want || len(s.List) != len(tt.list) {
				t.Fatalf("got %+v (%s), want %s", s, s, tt.want)
			}
			for i := range tt.list {
				if s.List[i] != tt.list[i] {
					t.Errorf("List = %v, want %v", s.List, tt.list)
				}
			}
		})
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		in      string
		want    ByteSize
		wantErr string
	}{
		{in: "0", want: 0},
		{in: "5242880", want: 5 << 20},
		{in: "100B", want: 100},
		{in: "512KiB", want: 512 << 10},
		{in: "5MiB", want: 5 << 20},
		{in: "5 MiB", want: 5 << 20},
		{in: "1.5MiB", want: 3 << 19},
		{in: "1GiB", want: 1 << 30},
		{in: "2KB", want: 2000},
		{in: "5MB", want: 5e6},
		{in: "1GB", want: 1e9},
		{in: "5mb", wantErr: "did you mean 5MB?"},
		{in: "5MiBps", wantErr: `unknown unit "MiBps"`},
		{in: "5TiB", wantErr: `unknown unit "TiB" in "5TiB": use B, KiB, MiB, GiB, KB, MB or GB`},
		// Regression: a unit of another magnitude is no typo ("did you mean 99999999KiB?").
		{in: "99999999TiB", wantErr: `use B, KiB, MiB, GiB, KB, MB or GB`},
		{in: "5Mib", wantErr: "did you mean 5MiB?"},
		{in: "-5MiB", wantErr: "bad byte size"},
		{in: "fast", wantErr: "bad byte size"},
		{in: "[5]", wantErr: "bad byte size"},
		{in: "99999999999GiB", wantErr: "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var b ByteSize
			err := decodeScalar(t, tt.in, &b)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %d, error %v, want an error containing %q", b, err, tt.wantErr)
				}
				return
			}
			if err != nil || b != tt.want {
				t.Fatalf("got %d, %v; want %d", b, err, tt.want)
			}
		})
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{in: "30s", want: 30 * time.Second},
		{in: "5m", want: 5 * time.Minute},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "1d", want: 24 * time.Hour},
		{in: "2d12h", want: 60 * time.Hour},
		{in: "0s", want: 0},
		{in: "300", wantErr: "duration 300 has no unit: write e.g. 300s or 300m"},
		{in: "1.5", wantErr: "has no unit"},
		{in: "-5m", wantErr: "bad duration"},
		{in: "5 minutes", wantErr: "bad duration"},
		{in: "xd", wantErr: "bad duration"},
		{in: "inf", wantErr: "bad duration"},
		{in: "[5m]", wantErr: "want a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var d Duration
			err := decodeScalar(t, tt.in, &d)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %s, error %v, want an error containing %q", time.Duration(d), err, tt.wantErr)
				}
				return
			}
			if err != nil || time.Duration(d) != tt.want {
				t.Fatalf("got %s, %v; want %s", time.Duration(d), err, tt.want)
			}
		})
	}
}

func TestByteSizeNoSuggestionAcrossMagnitudes(t *testing.T) {
	for _, in := range []string{"99999999TiB", "5PiB", "5TB"} {
		var b ByteSize
		if err := decodeScalar(t, in, &b); err == nil || strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%s: %v, want an unknown unit without a suggestion", in, err)
		}
	}
}
