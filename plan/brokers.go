package plan

import "strings"

// BrokerList flattens a plan's broker list: each entry may hold several
// comma-separated host:port addresses (a ${KAFKA_BROKERS} expanded to
// "k1:9092,k2:9092"). Pieces are trimmed of spaces, empty ones dropped, and
// the order kept.
func BrokerList(entries []string) []string {
	var out []string
	for _, e := range entries {
		for _, one := range strings.Split(e, ",") {
			if one = strings.TrimSpace(one); one != "" {
				out = append(out, one)
			}
		}
	}
	return out
}
