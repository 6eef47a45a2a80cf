package kafka

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// validTopic and validTransactionalID accept what the regular expressions
// of the names' rules match, on edge cases and random strings.
func TestNamesAsRegexp(t *testing.T) {
	topicRe := regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
	txnRe := regexp.MustCompile(`^[A-Za-z0-9._:+-]{1,200}$`)
	cases := []string{"", "a", "orders.v2_x-y", "a b", "ü", "a:b", "a+b", "a/b", strings.Repeat("a", 200), strings.Repeat("a", 201),
		strings.Repeat("a", 249), strings.Repeat("a", 250), "\x00", "a\n"}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "aZ09._-:+ /ü\x00"
	for range 20000 {
		b := make([]byte, rng.IntN(8))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := validTopic(s), topicRe.MatchString(s); got != want {
			t.Errorf("validTopic(%q) = %v, want %v", s, got, want)
		}
		if got, want := validTransactionalID(s), txnRe.MatchString(s); got != want {
			t.Errorf("validTransactionalID(%q) = %v, want %v", s, got, want)
		}
	}
}
