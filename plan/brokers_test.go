package plan

import (
	"slices"
	"testing"
)

func TestBrokerList(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []string
		want    []string
	}{
		{"nil", nil, nil},
		{"one address", []string{"kafka-1:9092"}, []string{"kafka-1:9092"}},
		{"one per entry", []string{"kafka-1:9092", "kafka-2:9092"}, []string{"kafka-1:9092", "kafka-2:9092"}},
		{"comma-separated entry", []string{"kafka-1:9092,kafka-2:9092"}, []string{"kafka-1:9092", "kafka-2:9092"}},
		{"spaces around addresses", []string{" kafka-1:9092 , kafka-2:9092 "}, []string{"kafka-1:9092", "kafka-2:9092"}},
		{"empty pieces", []string{"", "kafka-1:9092,,", " , "}, []string{"kafka-1:9092"}},
		{"order kept, duplicates kept", []string{"b:1,a:1", "b:1"}, []string{"b:1", "a:1", "b:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BrokerList(tc.entries); !slices.Equal(got, tc.want) {
				t.Errorf("BrokerList(%q) = %q, want %q", tc.entries, got, tc.want)
			}
		})
	}
}
