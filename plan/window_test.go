package plan

import "testing"

func TestWindowKind(t *testing.T) {
	from, err := ParseTimeSpec("2026-11-03T10:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		w    Window
		want WindowKind
	}{
		{"nothing given", Window{}, WindowUnset},
		{"from", Window{From: from}, WindowTime},
		{"to only", Window{To: from}, WindowTime},
		{"offsets", Window{Offsets: map[int32]OffsetRange{0: {}}}, WindowOffsets},
		{"empty offsets map", Window{Offsets: map[int32]OffsetRange{}}, WindowUnset},
		{"time and offsets", Window{From: from, Offsets: map[int32]OffsetRange{0: {}}}, WindowTime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.w.Kind(); got != tc.want {
				t.Errorf("Kind() = %v, want %v", got, tc.want)
			}
			if got := tc.w.IsTime(); got != (tc.want == WindowTime) {
				t.Errorf("IsTime() = %v, want %v", got, tc.want == WindowTime)
			}
		})
	}
}
