package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/registry"
)

func (a *app) schemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of a plan, for editors",
		Long: "schema prints a JSON Schema (draft 2020-12) of the plan format, generated from the plan's types, so that editors\n" +
			"check plans as they are written. With the YAML language server (VS Code, Neovim, ...):\n\n" +
			"  replay schema > replay-plan.schema.json\n" +
			"  # and as the first line of a plan:\n" +
			"  # yaml-language-server: $schema=./replay-plan.schema.json\n\n" +
			"The schema checks field names, types, enums and time formats; 'replay validate' checks everything.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := planSchema(registry.Catalog())
			if err != nil {
				return err
			}
			b, err := json.MarshalIndent(s, "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%s\n", b)
			return err
		},
	}
}

// schema is one JSON Schema object.
type schema = map[string]any

// Patterns of the scalars the plan decodes itself (plan/types.go).
const (
	durationUnits = `(?:ns|us|µs|ms|s|m|h)`
	durationRe    = `(?:[0-9]+d(?:[0-9]+(?:\.[0-9]+)?` + durationUnits + `)*|(?:[0-9]+(?:\.[0-9]+)?` + durationUnits + `)+)`
	agoRe         = `(?:[0-9]+d(?:[0-9]+` + durationUnits + `)*|(?:[0-9]+` + durationUnits + `)+)\s+ago`
	rfc3339Re     = `[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})`
	timeRe        = `^\s*(?:now|today|yesterday|` + rfc3339Re + `|-` + durationRe + `|` + agoRe + `)\s*$|` + plan.EnvPattern
)

// columnFieldRe is a record field a column maps to (plan.ParseField): a
// plain field (plan.PlainFields), value.<path> or header.<name>.
var columnFieldRe = `^(?:` + strings.Join(plan.PlainFields(), "|") + `|value\..*\S.*|header\..+)$|` + plan.EnvPattern

// scalarSchemas describe the plan types that decode themselves from YAML
// (UnmarshalYAML). planSchema fails on such a type missing here.
var scalarSchemas = map[reflect.Type]func() schema{
	reflect.TypeFor[plan.TimeSpec](): func() schema {
		return schema{"type": "string", "pattern": timeRe,
			"examples": []any{"2026-11-03T10:00:00Z", "2026-11-03T12:00:00+02:00", "-2h", "24h ago", "now"}}
	},
	reflect.TypeFor[plan.Last](): func() schema {
		return schema{"type": "string", "pattern": `^([1-9][0-9]*[mhd])$|` + plan.EnvPattern, "examples": []any{"1h", "1d", "7d"}}
	},
	reflect.TypeFor[plan.Every](): func() schema {
		return schema{"type": "string", "pattern": `^([1-9][0-9]*[mhd])$|` + plan.EnvPattern, "examples": []any{"15m", "1h", "1d"}}
	},
	reflect.TypeFor[plan.Duration](): func() schema {
		return schema{"type": "string", "pattern": `^` + durationRe + `$|` + plan.EnvPattern, "examples": []any{"30s", "5m", "1h30m", "1d"}}
	},
	reflect.TypeFor[plan.ByteSize](): func() schema {
		return schema{"anyOf": []any{
			schema{"type": "number", "minimum": 0},
			schema{"type": "string", "pattern": `^[0-9]+(?:\.[0-9]+)?\s*(?:B|KB|MB|GB|KiB|MiB|GiB)?$`},
			envRef(),
		}, "examples": []any{"5MiB", "512KiB", 1048576}}
	},
	reflect.TypeFor[plan.ErrorLimit](): func() schema {
		return schema{"anyOf": []any{
			schema{"type": "integer", "minimum": 0},
			schema{"type": "string", "pattern": `^\s*[0-9]+(?:\.[0-9]+)?\s*%\s*$`},
			envRef(),
		}, "examples": []any{100, "1%", "0.5%"}}
	},
	reflect.TypeFor[plan.PartitionSet](): func() schema {
		return schema{"anyOf": []any{
			schema{"const": "all"},
			schema{"type": "array", "items": schema{"type": "integer", "minimum": 0}, "minItems": 1, "uniqueItems": true},
			envRef(),
		}, "examples": []any{"all", []any{0, 3, 5}}}
	},
	reflect.TypeFor[plan.Columns](): func() schema {
		return schema{"type": "object", "additionalProperties": schema{"type": "string", "pattern": columnFieldRe},
			"examples": []any{schema{"order_id": "key", "customer_id": "value.customer.id", "trace_id": "header.trace-id", "event_time": "timestamp"}}}
	},
	reflect.TypeFor[plan.URLList](): func() schema {
		return schema{"anyOf": []any{
			schema{"type": "string", "pattern": `^https?://`},
			schema{"type": "array", "items": schema{"type": "string", "pattern": `^https?://`}, "minItems": 1},
			envRef(),
		}, "examples": []any{"https://schema-registry:8081", "${SCHEMA_REGISTRY_URL}"}}
	},
	reflect.TypeFor[plan.Mapping](): func() schema {
		paths := func(desc string) schema {
			return schema{"type": "object", "minProperties": 1, "description": desc, "additionalProperties": schema{"type": "string", "minLength": 1}}
		}
		step := func(kind string, body schema) schema {
			return schema{"type": "object", "properties": schema{kind: body}, "required": []any{kind}, "additionalProperties": false}
		}
		return schema{"type": "array", "items": schema{"oneOf": []any{
			step(plan.MappingSet, paths("Field path (value. optional) to the expression (the filter's language, exact decimal arithmetic) whose result is written there, creating objects on the way; entries run in the order written.")),
			step(plan.MappingRename, paths("Field path to its new path (nested on both sides); a missing field is no change, an existing target a bad record; entries run in the order written.")),
			step(plan.MappingDrop, schema{"type": "array", "minItems": 1, "items": schema{"type": "string", "minLength": 1},
				"description": "Field paths to remove; a missing field is no change."}),
		}}, "examples": []any{[]any{
			schema{"set": schema{"amount_eur": "value.amount * 0.92", "src": "topic"}},
			schema{"rename": schema{"value.cust": "customer"}},
			schema{"drop": []any{"value.debug"}},
		}}}
	},
	reflect.TypeFor[plan.OffsetSpec](): func() schema {
		return schema{"anyOf": []any{
			schema{"enum": []any{"earliest", "latest"}},
			schema{"type": "integer", "minimum": 0},
			schema{"type": "string", "pattern": `^[0-9]+$`},
			envRef(),
		}}
	},
}

// fieldSchemas replace the schema derived from a field's Go type, keyed
// "Type.yaml_name". Enums list what this version accepts.
var fieldSchemas = map[string]func() schema{
	"Plan.version":     func() schema { return schema{"const": 1} },
	"Plan.name":        func() schema { return schema{"type": "string", "pattern": `^[A-Za-z0-9][A-Za-z0-9._-]*$`} },
	"Plan.group":       func() schema { return schema{"type": "string", "pattern": `^\S+$`} },
	"Plan.on_error":    func() schema { return enumOrEnv(plan.OnErrorFail, plan.OnErrorSkip, plan.OnErrorDeadLetter) },
	"Source.isolation": func() schema { return enumOrEnv(plan.ReadCommitted, plan.ReadUncommitted) },
	"Source.brokers": func() schema {
		return schema{"anyOf": []any{
			schema{"type": "array", "items": schema{"type": "string"}, "minItems": 1},
			envRef(),
		}, "examples": []any{[]any{"kafka-1:9092"}, "${KAFKA_BROKERS}"}}
	},
	"SASL.mechanism":              func() schema { return enumOrEnv("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") },
	"SASL.password":               envOnly("${KAFKA_PASSWORD}"),
	"Throttle.records_per_second": func() schema { return numberOrEnv("number", 0, plan.MaxRecordsPerSecond) },
	"Throttle.bytes_per_second": func() schema {
		s := scalarSchemas[reflect.TypeFor[plan.ByteSize]()]()
		s["anyOf"].([]any)[0].(schema)["maximum"] = int64(plan.MaxBytesPerSecond)
		return s
	},
	"Decode.value":                decodeKinds,
	"Decode.key":                  decodeKinds,
	"AvroDecode.unions":           func() schema { return enumOrEnv(plan.UnionsBare, plan.UnionsTagged) },
	"SchemaRegistry.password":     envOnly("${SR_PASSWORD}"),
	"SchemaRegistry.bearer_token": envOnly("${SR_TOKEN}"),
	"Sink.batch_size":             func() schema { return numberOrEnv("integer", 1, plan.MaxBatchSize) },
}

func decodeKinds() schema {
	return enumOrEnv(plan.DecodeNone, plan.DecodeSchemaRegistry, plan.DecodeAvro, plan.DecodeProtobuf, plan.DecodeJSONSchema)
}

// envOnly is a secret's schema: a ${VAR}, e.g. example.
func envOnly(example string) func() schema {
	return func() schema { return schema{"type": "string", "pattern": plan.EnvPattern, "examples": []any{example}} }
}

// fieldDocs are the descriptions editors show, keyed "Type.yaml_name".
// Every field of the plan has one (schema_test.go checks); the fields of a
// sink have theirs in the sink catalog (sinkFieldDocs).
var fieldDocs = map[string]string{
	"Plan.version":          "Plan format version: 1.",
	"Plan.name":             "Unique name of the plan (ASCII letters, digits, '.', '_', '-'); part of the plan fingerprint.",
	"Plan.description":      "What the replay is for; review metadata.",
	"Plan.owner":            "Team or person owning the replay; review metadata.",
	"Plan.ticket":           "Ticket or issue the replay belongs to; review metadata.",
	"Plan.source":           "The Kafka cluster and topic to re-read.",
	"Plan.group":            "The dedicated replay consumer group that holds the checkpoints (e.g. replay.<plan-name>); never a live consumer group.",
	"Plan.window":           "The part of the topic to replay: a time window (from, optional to), offsets per partition, or a schedule of calendar intervals (every, zone, start, delay); exactly one.",
	"Plan.throttle":         "Rate limits across all partitions of one process (of the whole group under run --join); 0 or unset is unlimited.",
	"Plan.retry":            "How the run rides out the source cluster's errors that may pass (a leader or coordinator moving or loading, a request timed out, a dropped connection): retried with backoff.",
	"Plan.decode":           "Decode keys and values in the Confluent wire format (Avro, Protobuf, JSON Schema from a Schema Registry) to JSON before the filter, the key template, the columns and the text sinks see them; see docs/decoding.md.",
	"Plan.filter":           "Expression (expr-lang) selecting the records to write, e.g. 'value.status == \"paid\"'; it sees key, value (parsed JSON, or the raw string), headers (name to last value), timestamp, partition, offset, topic. Records it leaves out are counted and committed past.",
	"Plan.sink":             "Where the replayed records go.",
	"Plan.overrides":        "Per topic of source.topics (keyed by its name): a filter, mapping, key, table, path or (kafka) topic that replaces the plan's for that topic's records. Part of the plan fingerprint.",
	"TopicOverride.filter":  "Replaces the plan's filter for this topic's records ('' keeps every record).",
	"TopicOverride.mapping": "Replaces the plan's mapping for this topic's records ([] maps nothing).",
	"TopicOverride.key":     "Replaces the sink's key template for this topic's records.",
	"TopicOverride.table":   "Replaces the database sink's table for this topic.",
	"TopicOverride.path":    "Replaces the file, sqlite or parquet sink's path for this topic.",
	"TopicOverride.topic":   "Replaces the kafka sink's target topic for this topic.",
	"Plan.mapping":          "Ordered steps over each value the filter passes, before the key template, columns and the sink see it: set (path: expression), rename (path: new path), drop (list of paths); paths are inside the value (value. optional). Numbers are exact decimals: an operation that would lose digits is a bad record, never a rounded value. See docs/mapping.md.",
	"Plan.on_error":         "What happens to a record that cannot be processed (the filter or the key template fails on it, the sink rejects it): fail (default: the run stops at it), skip (counted in the report) or dead_letter (written to dead_letter with the reason).",
	"Plan.dead_letter":      "Sink for the records that cannot be processed, with on_error: dead_letter; written before the commit passes them. A file sink adds error, source_topic, source_partition and source_offset to each line.",
	"Plan.max_errors":       "Stop the run (exit 1) when more records than this cannot be processed: a count (100) or a percentage of the records in the run's ranges (1%). Unset: no limit.",
	"Plan.allow_data_loss":  "Accept a window whose start retention already deleted: replay what is left and report the gap.",

	"Source.brokers":                  "Bootstrap brokers, host:port; or one ${VAR} holding a comma-separated list.",
	"Source.topic":                    "The topic to replay.",
	"Source.topics":                   "Several topics to replay under one window, group and throttle, in this order (instead of topic): each topic's partitions get their own ranges, checkpoints and report lines; {topic} in the sink's table, path or target topic is each topic's name. Part of the plan fingerprint.",
	"Source.partitions":               "Partitions to replay: all (default) or a list such as [0, 3, 5].",
	"Source.isolation":                "read_committed (default: aborted transactions never reach the sink) or read_uncommitted.",
	"Source.tls":                      "Encrypted connection to the brokers.",
	"Source.sasl":                     "Authentication: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.",
	"Source.client_id":                "Client id sent to the brokers, so operators can tell replay traffic apart (default replay).",
	"Source.open_transaction_timeout": "read_committed: how long a partition held back by an open transaction (its last stable offset below the range end) waits for it to end before the run fails (exit 1, resumable), e.g. 5m (default), up to 24h; 0s fails at once.",

	"Decode.value":           "How values are decoded: none (default: the bytes as they are), schema_registry (whatever type the framed schema id names), avro, protobuf or json_schema (that type only; another is a bad record).",
	"Decode.key":             "How keys are decoded, with the same choices as value; default none.",
	"Decode.schema_registry": "The Schema Registry holding the schemas; required when something is decoded. Not part of the plan fingerprint.",
	"Decode.avro":            "How Avro values render.",
	"AvroDecode.unions":      "bare (default: a union renders as its branch's value) or tagged (Avro's JSON encoding: {\"string\": \"a\"}).",

	"SchemaRegistry.url":          "The registry's URL, or a list tried in order (failover); a ${VAR} may hold several, comma-separated.",
	"SchemaRegistry.username":     "HTTP basic auth user name, with password.",
	"SchemaRegistry.password":     "HTTP basic auth password: must come from the environment, e.g. ${SR_PASSWORD}.",
	"SchemaRegistry.bearer_token": "Bearer token instead of username/password: must come from the environment, e.g. ${SR_TOKEN}.",
	"SchemaRegistry.tls":          "TLS to the registry: the CA to trust and a client certificate.",
	"RegistryTLS.ca_file":         "PEM file of the CA certificates to trust (default: the system's).",
	"RegistryTLS.cert_file":       "PEM client certificate, with key_file.",
	"RegistryTLS.key_file":        "PEM private key of the client certificate, with cert_file.",

	"TLS.enabled":              "Connect with TLS.",
	"TLS.ca_file":              "PEM file of the CA certificates to trust (default: the system's).",
	"TLS.cert_file":            "PEM client certificate, with key_file.",
	"TLS.key_file":             "PEM private key of the client certificate, with cert_file.",
	"TLS.server_name":          "Server name to verify the brokers' certificates against.",
	"TLS.insecure_skip_verify": "Do not verify the brokers' certificates (testing only).",

	"SASL.mechanism": "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.",
	"SASL.username":  "SASL user name.",
	"SASL.password":  "SASL password: must come from the environment, e.g. ${KAFKA_PASSWORD}; a literal secret is an error.",

	"Window.from":              "Inclusive start: an RFC 3339 time with a zone (2026-11-03T10:00:00Z) or relative to resolution (-2h, 24h ago, now), or a calendar day (today, yesterday: midnight in zone). A time without a zone or a bare number is an error.",
	"Window.to":                "Exclusive end, in the same forms as from; unset means the high watermark when the window is resolved.",
	"Window.offsets":           "Offset ranges [from, to) per partition number, e.g. {0: {from: 1200, to: 5000}, 1: {from: earliest, to: latest}}, or one range for every partition: {all: {from: 4990, to: latest}}.",
	"Window.strict_timestamps": "Also drop records whose own timestamp is outside [from, to) (time windows only).",
	"Window.last":              "A calendar window instead of from/to: the last N whole minutes, hours or days before resolution, aligned in zone (at 10:17, 1h is [09:00, 10:00) and 1d is yesterday).",
	"Window.every":             "Schedule: the length of each interval in a calendar unit (minutes dividing an hour, hours dividing a day, or days), aligned to the wall clock of zone, e.g. 1h or 1d.",
	"Window.zone":              "The IANA time zone a schedule's intervals, last and the bounds today/yesterday align to (a day is midnight to midnight there, 23 or 25 hours on DST days); default UTC.",
	"Window.start":             "Schedule: the first interval's start, an RFC 3339 time on an interval boundary; catch-up never goes earlier.",
	"Window.delay":             "Schedule: an interval is due once its end is this far in the past (late producers), e.g. 10m; default 0.",
	"Window.skew_margin":       "Widen the offset search by this much on both sides, then filter strictly by record timestamp (producer clock skew), e.g. 5m.",

	"OffsetRange.from": "Inclusive start offset: a number or earliest (the log start offset).",
	"OffsetRange.to":   "Exclusive end offset: a number or latest (the high watermark at resolution; under read_committed a run waits for a transaction open below it, see source.open_transaction_timeout).",

	"Retry.max_elapsed":           "How long one broker call to the source cluster may keep failing with retriable errors before the run fails (exit 1, resumable), e.g. 5m (default), up to 24h; 0s fails at the first error.",
	"Throttle.records_per_second": "Records per second across all partitions, up to 1e9; 0 is unlimited.",
	"Throttle.bytes_per_second":   "Bytes per second across all partitions, e.g. 5MiB (units B, KiB, MiB, GiB, KB, MB, GB), up to 1024GiB; 0 is unlimited.",
	"Throttle.max_batch_wait":     "Under a limit, the longest a partition goes without writing and committing (writes are cut to keep it), 10ms to 1h; default 1s.",
	"SinkRetry.max_elapsed":       "How long one batch may keep failing with transient sink errors, from its first failure, before the partition fails (exit 1, resumable), e.g. 5m (default), up to 24h; 0s fails at the first error.",
}

// required lists the fields each struct must have; Window and Sink get
// their conditional rules in objectRules.
var required = map[string][]string{
	"Plan":        {"version", "name", "source", "group", "window", "sink"},
	"Source":      {"brokers"},
	"SASL":        {"mechanism", "username", "password"},
	"OffsetRange": {"from", "to"},
	"Sink":        {"type"},
}

// objectRules adds rules across fields of one struct; a Sink's follow
// from the catalog (sinkRules).
var objectRules = map[string]func(schema){
	// One topic (topic) or several (topics).
	"Source": func(s schema) {
		s["oneOf"] = []any{schema{"required": []any{"topic"}}, schema{"required": []any{"topics"}}}
	},
	// Exactly one of a time window, an offsets window, a schedule and a
	// calendar window (last).
	"Window": func(s schema) {
		s["oneOf"] = []any{schema{"required": []any{"from"}}, schema{"required": []any{"offsets"}}, schema{"required": []any{"every", "start"}}, schema{"required": []any{"last"}}}
	},
}

// sinkRules adds to s, the schema of a sink section, what each sink type
// needs, from the sink descriptors.
func (g *schemaGen) sinkRules(s schema) {
	var rules []any
	for _, d := range g.cat {
		if req := d.Required(); len(req) > 0 {
			rules = append(rules, schema{"description": string(d.Type) + " sink: " + d.Summary,
				"if":   schema{"properties": schema{"type": schema{"const": string(d.Type)}}, "required": []any{"type"}},
				"then": schema{"required": anySlice(req)}})
		}
		for _, r := range d.Schema {
			rules = append(rules, r)
		}
	}
	s["allOf"] = rules
}

// sinkFields maps each field of a sink to its description and, when a
// sink type describes its schema (the first one that does), to that.
func (g *schemaGen) sinkFields() (docs map[string]string, schemas map[string]func() schema) {
	docs, schemas = map[string]string{}, map[string]func() schema{}
	schemas["type"] = func() schema { return enumOrEnv(anySlice(g.cat.Types())...) }
	for _, f := range g.cat.CommonFields() {
		docs[f.Name] = f.Doc
	}
	for _, d := range g.cat {
		for _, f := range d.Fields {
			if !strings.Contains(docs[f.Name], f.Doc) {
				docs[f.Name] = strings.TrimSpace(docs[f.Name] + " " + f.Doc)
			}
			switch {
			case schemas[f.Name] != nil:
			case f.Schema != nil:
				schemas[f.Name] = func() schema { return maps.Clone(f.Schema) }
			case len(f.Enum) > 0:
				schemas[f.Name] = func() schema { return enumOrEnv(anySlice(f.Enum)...) }
			}
		}
	}
	return docs, schemas
}

func anySlice[T ~string](ss []T) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func envRef() schema { return schema{"$ref": "#/$defs/env"} }

func enumOrEnv(values ...any) schema {
	return schema{"anyOf": []any{schema{"enum": values}, envRef()}}
}

func numberOrEnv(typ string, minimum, maximum any) schema {
	n := schema{"type": typ, "minimum": minimum}
	if maximum != nil {
		n["maximum"] = maximum
	}
	return schema{"anyOf": []any{n, envRef()}}
}

// planSchema builds the JSON Schema of plan.Plan by reflection over its
// yaml tags and Go types; a sink section's fields are the common ones and
// those of the types of cat, each typed after its driver's config struct.
func planSchema(cat plan.SinkCatalog) (schema, error) {
	g := &schemaGen{cat: cat, defs: schema{"env": schema{"type": "string", "pattern": plan.EnvPattern,
		"description": "A ${VAR}, expanded from the environment when the plan is loaded; a missing variable is an error."}}}
	root, err := g.object(reflect.TypeFor[plan.Plan]())
	if err != nil {
		return nil, err
	}
	out := schema{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"title":       "replay plan",
		"description": "A replay plan: re-read a time or offset window of a Kafka topic into a sink (see docs/plan.md). Generated by 'replay schema'.",
		"$defs":       g.defs,
	}
	maps.Copy(out, root)
	return out, nil
}

type schemaGen struct {
	defs schema
	// cat are the sink types a sink section may have.
	cat plan.SinkCatalog
}

var yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

// forType returns the schema of a value of type t.
func (g *schemaGen) forType(t reflect.Type) (schema, error) {
	if f, ok := scalarSchemas[t]; ok {
		return f(), nil
	}
	if reflect.PointerTo(t).Implements(yamlUnmarshaler) {
		return nil, fmt.Errorf("schema: %s decodes itself from YAML: describe it in scalarSchemas", t)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.forType(t.Elem())
	case reflect.Struct:
		return g.ref(t)
	case reflect.Slice:
		items, err := g.forType(t.Elem())
		if err != nil {
			return nil, err
		}
		return schema{"type": "array", "items": items}, nil
	case reflect.Map:
		vals, err := g.forType(t.Elem())
		if err != nil {
			return nil, err
		}
		m := schema{"type": "object", "additionalProperties": vals}
		switch t.Key().Kind() {
		case reflect.String:
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			m["propertyNames"] = schema{"pattern": `^[0-9]+$`}
			if t == reflect.TypeFor[map[int32]plan.OffsetRange]() {
				m["propertyNames"] = schema{"pattern": `^(?:[0-9]+|all)$`} // window.offsets: {all: ...}
			}
		default:
			return nil, fmt.Errorf("schema: no JSON Schema for map keys of type %s", t.Key())
		}
		return m, nil
	case reflect.String:
		return schema{"type": "string"}, nil
	case reflect.Bool:
		return schema{"anyOf": []any{schema{"type": "boolean"}, envRef()}}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return schema{"anyOf": []any{schema{"type": "integer"}, envRef()}}, nil
	case reflect.Float32, reflect.Float64:
		return schema{"anyOf": []any{schema{"type": "number"}, envRef()}}, nil
	}
	return nil, fmt.Errorf("schema: no JSON Schema for %s", t)
}

// ref puts the struct's schema in $defs (once) and refers to it.
func (g *schemaGen) ref(t reflect.Type) (schema, error) {
	name := strings.ToLower(t.Name()[:1]) + t.Name()[1:]
	if strings.ToUpper(t.Name()) == t.Name() {
		name = strings.ToLower(t.Name())
	}
	if _, done := g.defs[name]; !done {
		g.defs[name] = schema{} // placeholder: a recursive type refers to itself
		s, err := g.object(t)
		if err != nil {
			return nil, err
		}
		g.defs[name] = s
	}
	return schema{"$ref": "#/$defs/" + name}, nil
}

// object describes a struct: its yaml fields and nothing else; a sink
// section (plan.Sink), its common fields and those of every sink type.
func (g *schemaGen) object(t reflect.Type) (schema, error) {
	props := schema{}
	isSink := t == reflect.TypeFor[plan.Sink]()
	var docs map[string]string
	var schemas map[string]func() schema
	if isSink {
		docs, schemas = g.sinkFields()
	}
	add := func(f reflect.StructField, name string) error {
		key := t.Name() + "." + name
		override, ok := fieldSchemas[key]
		doc := fieldDocs[key]
		if isSink {
			doc = docs[name]
			if !ok {
				override, ok = schemas[name], schemas[name] != nil
			}
		}
		var s schema
		if ok {
			s = override()
		} else {
			var err error
			if s, err = g.forType(f.Type); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
		if doc != "" {
			s["description"] = doc // beside a $ref too: 2020-12 allows it
		}
		props[name] = s
		return nil
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		if err := add(f, name); err != nil {
			return nil, err
		}
	}
	for _, d := range g.cat {
		if !isSink {
			break
		}
		for _, fd := range d.Fields {
			f, ok := d.ConfigField(fd.Name)
			if _, done := props[fd.Name]; done || !ok {
				continue
			}
			if err := add(f, fd.Name); err != nil {
				return nil, err
			}
		}
	}
	s := schema{"type": "object", "properties": props, "additionalProperties": false}
	if req := required[t.Name()]; len(req) > 0 {
		s["required"] = anySlice(req)
	}
	if rule := objectRules[t.Name()]; rule != nil {
		rule(s)
	}
	if isSink {
		g.sinkRules(s)
	}
	return s, nil
}
