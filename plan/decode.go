package plan

import (
	"cmp"
	"fmt"
	"net/url"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/replay-tool/replay/internal/filter"
)

// Decode formats accepted in decode.value and decode.key.
const (
	DecodeNone           = "none"
	DecodeSchemaRegistry = "schema_registry"
	DecodeAvro           = "avro"
	DecodeProtobuf       = "protobuf"
	DecodeJSONSchema     = "json_schema"
)

// DecodeFormats lists the decode formats, in the order the docs give them.
var DecodeFormats = []string{DecodeNone, DecodeSchemaRegistry, DecodeAvro, DecodeProtobuf, DecodeJSONSchema}

// Avro union renderings accepted in decode.avro.unions.
const (
	UnionsBare   = "bare"
	UnionsTagged = "tagged"
)

// Decode says how record keys and values in the Confluent wire format
// (magic byte 0, a 4-byte schema id, the payload) are decoded to JSON
// before the filter sees them. Unset: nothing is decoded.
type Decode struct {
	// Value and Key are none (default: the bytes as they are),
	// schema_registry (whatever type the schema id names), avro, protobuf
	// or json_schema (that type only; another is a bad record).
	Value string `yaml:"value"`
	Key   string `yaml:"key"`
	// SchemaRegistry is where the schemas are; required when something is
	// decoded. Not part of the fingerprint.
	SchemaRegistry SchemaRegistry `yaml:"schema_registry"`
	Avro           AvroDecode     `yaml:"avro"`
}

// SchemaRegistry is how to reach a Confluent Schema Registry.
type SchemaRegistry struct {
	// URL is one URL or a list, tried in order (failover).
	URL URLList `yaml:"url"`
	// Username and Password are HTTP basic auth; BearerToken replaces
	// them. The password and the token must come from the environment.
	Username    string      `yaml:"username"`
	Password    string      `yaml:"password"`
	BearerToken string      `yaml:"bearer_token"`
	TLS         RegistryTLS `yaml:"tls"`
}

// RegistryTLS holds the PEM files of the registry's TLS: the CA to trust
// (default: the system's) and a client certificate.
type RegistryTLS struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// AvroDecode says how Avro values render.
type AvroDecode struct {
	// Unions is bare (default: a union's value alone) or tagged (Avro's
	// JSON encoding: {"string": "a"}).
	Unions string `yaml:"unions"`
}

// URLList is one URL or a list of URLs. A scalar holding commas (a ${VAR}
// of several URLs) is split on them.
type URLList []string

// UnmarshalYAML accepts a string or a list of strings.
func (l *URLList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode: // split as a broker list is
		*l = BrokerList([]string{n.Value})
		return nil
	case yaml.SequenceNode:
		var out URLList
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return errorAt(c, "want a URL, got %s", describe(c))
			}
			out = append(out, strings.TrimSpace(c.Value))
		}
		*l = out
		return nil
	}
	return fmt.Errorf("want a URL or a list of URLs, got %s", describe(n))
}

// Decodes reports whether the plan decodes keys or values ("" is none).
func (d Decode) Decodes() bool { return d.DecodesValue() || d.DecodesKey() }

// DecodesValue reports whether the plan decodes values.
func (d Decode) DecodesValue() bool { return d.Value != "" && d.Value != DecodeNone }

// DecodesKey reports whether the plan decodes keys.
func (d Decode) DecodesKey() bool { return d.Key != "" && d.Key != DecodeNone }

// compileFilter compiles p's filter; under decode.key its key is the
// decoded key (filter.CompileDecodedKey).
func compileFilter(p *Plan) (*filter.Program, error) {
	if p.Decode.DecodesKey() {
		return filter.CompileDecodedKey(p.Filter)
	}
	return filter.Compile(p.Filter)
}

// defaults fills the unset decode fields: nothing decoded, bare unions.
func (d *Decode) defaults() {
	d.Value, d.Key = cmp.Or(d.Value, DecodeNone), cmp.Or(d.Key, DecodeNone)
	d.Avro.Unions = cmp.Or(d.Avro.Unions, UnionsBare) // the value as a JSON reader expects it
}

// fingerprint is the decode section's part of the plan's fingerprint: what
// it decodes and how; "" when nothing is decoded.
func (d Decode) fingerprint() string {
	if !d.Decodes() {
		return ""
	}
	return "value=" + d.Value + ",key=" + d.Key + ",unions=" + d.Avro.Unions
}

func (v *validator) decode() {
	d := v.p.Decode
	v.enum("decode.value", d.Value, DecodeFormats)
	v.enum("decode.key", d.Key, DecodeFormats)
	v.enum("decode.avro.unions", d.Avro.Unions, []string{UnionsBare, UnionsTagged})
	if !d.Decodes() {
		if v.present("decode.schema_registry") {
			v.warn("decode", "decode.value and decode.key are none: nothing is decoded and schema_registry is not used; set value: schema_registry to decode values")
		}
		return
	}
	v.registry("decode.schema_registry", d.SchemaRegistry)
}

func (v *validator) registry(field string, r SchemaRegistry) {
	if len(r.URL) == 0 {
		v.add(field+".url", "missing: the Schema Registry's URL, e.g. url: https://schema-registry:8081 or url: ${SCHEMA_REGISTRY_URL}")
	}
	for i, u := range r.URL {
		at := fmt.Sprintf("%s.url[%d]", field, i)
		if !v.p.FromEnv(at) && v.p.Position(at) == (Pos{}) {
			at = field + ".url" // one URL, or a ${VAR} of several
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			v.add(at, "%q is not an http:// or https:// URL of a Schema Registry, e.g. https://schema-registry:8081", redactURL(u))
			continue
		}
		if pu.User != nil {
			v.add(at, "credentials in the URL: give them as username and password: ${VAR}")
		}
	}
	bearer := r.BearerToken != "" || v.present(field+".bearer_token")
	basic := r.Username != "" || r.Password != "" || v.present(field+".username") || v.present(field+".password")
	switch {
	case bearer && basic:
		at := field // one that holds a value: an unset ${VAR}'s is not checked
		switch {
		case r.BearerToken != "":
			at += ".bearer_token"
		case r.Username != "":
			at += ".username"
		case r.Password != "":
			at += ".password"
		}
		v.add(at, "both bearer_token and username/password: the registry takes one; keep one of them")
	case r.Username != "" && r.Password == "" && !v.p.FromEnv(field+".password"):
		v.add(field+".password", "missing: basic auth needs a password: set password: ${SR_PASSWORD} and export the variable")
	case r.Username == "" && r.Password != "":
		v.add(field+".username", "missing: a password without a username; set username:")
	}
	v.literalSecret(field+".password", r.Password, "password: ${SR_PASSWORD}")
	v.literalSecret(field+".bearer_token", r.BearerToken, "bearer_token: ${SR_TOKEN}")
	if (r.TLS.CertFile == "") != (r.TLS.KeyFile == "") {
		v.add(field+".tls", "cert_file and key_file go together: give both for a client certificate, or neither")
	}
}

// redactURL hides a URL's password, for messages.
func redactURL(u string) string {
	if pu, err := url.Parse(u); err == nil && pu.User != nil {
		return pu.Redacted() // its password is Redacted
	}
	return u
}
