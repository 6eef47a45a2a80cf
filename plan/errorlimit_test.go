package plan

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestErrorLimit(t *testing.T) {
	tests := []struct {
		in      string
		str     string
		allowed int64 // of 1000 records
		err     string
	}{
		{"100", "100", 100, ""},
		{"0", "0", 0, ""},
		{"1%", "1%", 10, ""},
		{"0.5 %", "0.5%", 5, ""},
		{"0.05%", "0.05%", 0, ""},
		{"100%", "100%", 1000, ""},
		{"0.01", "", 0, "a ratio is written as a percentage: 1%"},
		{"-1", "", 0, "0 or more"},
		{"150%", "", 0, "between 0% and 100%"},
		{"lots", "", 0, "want a whole number of records"},
		{"1e3", "", 0, "want a whole number of records"},
		{"[1]", "", 0, "want a number of records"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var n yaml.Node
			if err := yaml.Unmarshal([]byte("v: "+tt.in), &n); err != nil {
				t.Fatal(err)
			}
			var l ErrorLimit
			err := n.Content[0].Content[1].Decode(&l)
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
			case err != nil:
				t.Fatal(err)
			case l.String() != tt.str || l.Allowed(1000) != tt.allowed || !l.IsSet():
				t.Fatalf("%q: String %q Allowed(1000) %d", tt.in, l.String(), l.Allowed(1000))
			}
		})
	}
	if (ErrorLimit{}).Allowed(1000) != -1 {
		t.Error("unset: no limit")
	}
}

// The filter is compiled once, when the plan is validated; a plan without
// one has none; a dead-letter target is part of the fingerprint, max_errors
// is not (raising it resumes the run).
func TestFilterDeadLetterAndFingerprint(t *testing.T) {
	p, err := Load("testdata/valid/filter-dead-letter.yaml", testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if prog, err := p.FilterProgram(); prog == nil || err != nil || prog != p.filter {
		t.Fatalf("FilterProgram = %v, %v: want the program compiled by validation", prog, err)
	}
	fp := p.Fingerprint()
	p.MaxErrors = ErrorCount(5)
	if p.Fingerprint() != fp {
		t.Error("max_errors changed the fingerprint")
	}
	setSinkValue(p.DeadLetter, "path", "elsewhere.jsonl")
	if p.Fingerprint() == fp {
		t.Error("the dead-letter target is not in the fingerprint")
	}
	q, err := Load("testdata/valid/time-absolute.yaml", testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if prog, err := q.FilterProgram(); prog != nil || err != nil {
		t.Fatalf("no filter: got %v, %v", prog, err)
	}
}
