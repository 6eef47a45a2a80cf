package kafkaconn

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// KgoOpts returns the options of a franz-go client that reaches the cluster
// as c does (seed brokers, client id, TLS, SASL); brokers overrides the
// seed brokers when given (the ones that answered the probe). The caller
// adds its own retry and timeout options.
func (c *Conn) KgoOpts(brokers ...string) ([]kgo.Opt, error) {
	if len(brokers) == 0 {
		brokers = c.Brokers
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID(c.ClientID)}
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
