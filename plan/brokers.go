package plan

import "strings"

// BrokerList returns the bootstrap addresses a list of broker entries
// names: each entry may hold several host:port addresses separated by
// commas (as a ${KAFKA_BROKERS} variable does). Spaces around an address
// are trimmed, empty pieces are dropped, and the order is kept.
func BrokerList(entries []string) []string {
	var out []string
	for _, e := range entries {
		for _, piece := range strings.Split(e, ",") {
			if piece = strings.TrimSpace(piece); piece != "" {
				out = append(out, piece)
			}
		}
	}
	return out
}
