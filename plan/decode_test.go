package plan

import (
	"slices"
	"strings"
	"testing"
)

const decodeBase = `version: 1
name: orders-fix
source: {brokers: ["kafka-1:9092"], topic: orders}
group: replay.orders-fix
window: {from: 2026-11-03T10:00:00Z, to: 2026-11-03T12:00:00Z}
sink: {type: stdout}
`

func parseDecode(t *testing.T, section string) *Plan {
	t.Helper()
	p, err := Parse("p.yaml", []byte(decodeBase+section), testOptions())
	if err != nil {
		t.Fatalf("%s: %v", section, err)
	}
	return p
}

// What decode: decodes is part of the fingerprint; where the registry is
// and how to log in to it are not; a plan without decode: (or with
// nothing decoded) keeps the fingerprint it had.
func TestDecodeFingerprint(t *testing.T) {
	none := parseDecode(t, "").Fingerprint()
	if got := parseDecode(t, "decode: {value: none}\n").Fingerprint(); got != none {
		t.Errorf("decode nothing: fingerprint %s, want %s as without decode:", got, none)
	}
	avro := parseDecode(t, "decode: {value: avro, schema_registry: {url: https://sr-1:8081}}\n").Fingerprint()
	if avro == none {
		t.Error("decoding values left the fingerprint as it was")
	}
	moved := parseDecode(t, "decode:\n  value: avro\n  schema_registry: {url: [https://sr-2:8081], username: u, password: ${SR_PASSWORD}}\n").Fingerprint()
	if moved != avro {
		t.Errorf("another registry URL and credentials: fingerprint %s, want %s", moved, avro)
	}
	for _, other := range []string{
		"decode: {value: schema_registry, schema_registry: {url: https://sr-1:8081}}\n",
		"decode: {value: avro, key: avro, schema_registry: {url: https://sr-1:8081}}\n",
		"decode: {value: avro, avro: {unions: tagged}, schema_registry: {url: https://sr-1:8081}}\n",
	} {
		if got := parseDecode(t, other).Fingerprint(); got == avro {
			t.Errorf("%s: same fingerprint as value: avro", other)
		}
	}
}

// The registry's password and token are secrets, redacted from output;
// the URL forms are read.
func TestDecodeSecretsAndURLs(t *testing.T) {
	p := parseDecode(t, "decode:\n  value: avro\n  schema_registry: {url: ${SCHEMA_REGISTRY_URL}, username: u, password: ${SR_PASSWORD}}\n")
	if !slices.Contains(p.Secrets(), "sr-s3cret") {
		t.Errorf("secrets %q lack the registry password", p.Secrets())
	}
	if want := []string{"https://sr-1:8081", "https://sr-2:8081"}; !slices.Equal(p.Decode.SchemaRegistry.URL, want) {
		t.Errorf("urls %q, want %q", p.Decode.SchemaRegistry.URL, want)
	}
	p = parseDecode(t, "decode: {key: protobuf, schema_registry: {url: https://sr:8081, bearer_token: ${SR_PASSWORD}}}\n")
	if !slices.Contains(p.Secrets(), "sr-s3cret") {
		t.Errorf("secrets %q lack the bearer token", p.Secrets())
	}
	if p.Decode.Value != DecodeNone || p.Decode.Key != DecodeProtobuf || p.Decode.Avro.Unions != UnionsBare {
		t.Errorf("defaults %+v", p.Decode)
	}
}

// A decode section that decodes nothing is said to be unused.
func TestDecodeNothingWarns(t *testing.T) {
	p := parseDecode(t, "decode: {schema_registry: {url: https://sr:8081}}\n")
	var warned bool
	for _, pr := range p.Warnings() {
		warned = warned || strings.Contains(pr.Message, "nothing is decoded")
	}
	if !warned {
		t.Errorf("problems %v, want a warning that nothing is decoded", p.Warnings())
	}
}

// Offline (variables unset), the registry's URL list of ${VAR}s is not
// checked, while a section that gives both a bearer token and basic auth
// is refused whatever the variables hold.
func TestDecodeRegistryUnsetOffline(t *testing.T) {
	opts := testOptions()
	opts.LookupEnv = func(string) (string, bool) { return "", false }
	opts.AllowUnsetEnv = true
	p, err := Parse("p.yaml", []byte(decodeBase+"decode:\n  value: avro\n  schema_registry: {url: [\"${SR1}\", \"${SR2}\"], username: ${U}, password: ${P}}\n"), opts)
	if err != nil {
		t.Fatalf("a URL list of unset variables: %v", err)
	}
	if got := strings.Join(p.UnsetEnv(), ","); got != "P,SR1,SR2,U" {
		t.Errorf("UnsetEnv = %q", got)
	}
	_, err = Parse("p.yaml", []byte(decodeBase+"decode:\n  value: avro\n  schema_registry: {url: ${SR}, bearer_token: ${T}, password: ${P}, username: u}\n"), opts)
	if err == nil || !strings.Contains(err.Error(), "both bearer_token and username/password") {
		t.Errorf("bearer token and basic auth from unset variables: %v, want the refusal", err)
	}
}
