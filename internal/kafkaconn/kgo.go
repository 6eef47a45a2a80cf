package kafkaconn

import (
	"cmp"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// KgoOpts returns the options of a franz-go client that reaches the cluster
// as the settings say (seed brokers, client id, TLS, SASL); brokers
// overrides the seed brokers when given (the ones that answered the
// probe). The caller adds its own retry and timeout options. A Conn has
// them through its Settings.
func (c Settings) KgoOpts(brokers ...string) ([]kgo.Opt, error) {
	if len(brokers) == 0 {
		brokers = c.Brokers
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID(cmp.Or(c.ClientID, "replay"))}
	tc, err := TLSConfig(c.TLS)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	s := c.SASL
	switch s.Mechanism {
	case "":
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()))
	default:
		_, err := SASLMechanism(s) // names the mechanism
		return nil, err
	}
	return opts, nil
}
