package plan

import (
	"strings"
	"testing"
)

// topicsPlan is a plan of two topics into JSONL files named after them,
// with extra appended.
func topicsPlan(extra string) string {
	return `version: 1
name: orders-refunds-fix
source:
  brokers: ["kafka-1:9092"]
  topics: [orders, refunds]
group: replay.orders-refunds-fix
window:
  from: -2h
mapping:
  - set: {amount_eur: 'value.amount'}
sink:
  type: file
  path: out/{topic}.jsonl
  key: '{{ .Value.id }}'
` + extra
}

func TestForTopic(t *testing.T) {
	p := mustParse(t, topicsPlan(`overrides:
  refunds:
    filter: 'value.kind == "full"'
    key: '{{ .Value.refund_id }}'
    mapping: []
`), testOptions())
	if !p.SeveralTopics() || p.Source.Topic != "" {
		t.Fatalf("topics %v, topic %q: want a plan of several topics", p.Source.Topics, p.Source.Topic)
	}
	orders, err := p.ForTopic("orders")
	if err != nil {
		t.Fatal(err)
	}
	refunds, err := p.ForTopic("refunds")
	if err != nil {
		t.Fatal(err)
	}
	if orders.Source.Topic != "orders" || !orders.OfTopicSet() || orders.SeveralTopics() {
		t.Errorf("orders' plan: topic %q, of a set %v", orders.Source.Topic, orders.OfTopicSet())
	}
	if got := sinkValue(&orders.Sink, "path"); got != "out/orders.jsonl" {
		t.Errorf("orders' path %v, want out/orders.jsonl", got)
	}
	if got := sinkValue(&refunds.Sink, "path"); got != "out/refunds.jsonl" {
		t.Errorf("refunds' path %v, want out/refunds.jsonl", got)
	}
	if got := sinkValue(&p.Sink, "path"); got != "out/{topic}.jsonl" {
		t.Errorf("the plan's own path changed to %v", got)
	}
	if orders.Filter != "" || len(orders.Mapping) != 1 || orders.Sink.Key != "{{ .Value.id }}" {
		t.Errorf("orders kept the plan's filter, mapping and key: %q, %d steps, %q", orders.Filter, len(orders.Mapping), orders.Sink.Key)
	}
	if refunds.Filter != `value.kind == "full"` || len(refunds.Mapping) != 0 || refunds.Sink.Key != "{{ .Value.refund_id }}" {
		t.Errorf("refunds' overrides: filter %q, %d steps, key %q", refunds.Filter, len(refunds.Mapping), refunds.Sink.Key)
	}
	if prog, err := refunds.FilterProgram(); err != nil || prog == nil {
		t.Errorf("refunds' filter program: %v, %v", prog, err)
	}
	fp := p.Fingerprint()
	if orders.Fingerprint() != fp || refunds.Fingerprint() != fp {
		t.Errorf("the topics' fingerprints %s, %s: want the plan's %s", orders.Fingerprint(), refunds.Fingerprint(), fp)
	}
	if _, err := p.ForTopic("payments"); err == nil {
		t.Error("ForTopic of a topic the plan does not read: no error")
	}
}

func TestTopicsFingerprint(t *testing.T) {
	base := mustParse(t, topicsPlan(""), testOptions()).Fingerprint()
	changed := map[string]string{
		"a topic added":      strings.Replace(topicsPlan(""), "[orders, refunds]", "[orders, refunds, payments]", 1),
		"the order changed":  strings.Replace(topicsPlan(""), "[orders, refunds]", "[refunds, orders]", 1),
		"an override":        topicsPlan("overrides:\n  refunds:\n    filter: 'true'\n"),
		"an override's path": topicsPlan("overrides:\n  refunds:\n    path: out/r.jsonl\n"),
	}
	for what, src := range changed {
		if fp := mustParse(t, src, testOptions()).Fingerprint(); fp == base {
			t.Errorf("%s: the fingerprint stayed %s", what, fp)
		}
	}
	one := strings.Replace(minimalPlan, "  topic: orders\n", "  topics: [orders]\n", 1)
	if a, b := mustParse(t, one, testOptions()), mustParse(t, minimalPlan, testOptions()); a.Fingerprint() != b.Fingerprint() || a.SeveralTopics() {
		t.Errorf("topics: [orders] is topic: orders: fingerprints %s and %s, several %v", a.Fingerprint(), b.Fingerprint(), a.SeveralTopics())
	}
}

func TestTopicsProblems(t *testing.T) {
	cases := []struct{ src, want string }{
		{strings.Replace(topicsPlan(""), "  topics:", "  topic: orders\n  topics:", 1), "source.topics: source.topic is set too"},
		{strings.Replace(topicsPlan(""), "[orders, refunds]", "[orders, refunds, orders]", 1), "source.topics[2]: orders is listed twice"},
		{strings.Replace(topicsPlan(""), "[orders, refunds]", "[orders, 're funds']", 1), "source.topics[1]:"},
		{strings.Replace(topicsPlan(""), "[orders, refunds]", `[orders, ""]`, 1), "source.topics[1]: empty"},
		{strings.Replace(topicsPlan(""), "[orders, refunds]", "[orders, ~]", 1), "source.topics[1]: empty"},
		{topicsPlan("overrides:\n  refund:\n    filter: 'true'\n"), "overrides.refund: refund is not one of source.topics"},
		{topicsPlan("overrides:\n  refunds:\n    table: x\n"), "overrides.refunds.table: the file sink has no table field"},
		{topicsPlan("overrides:\n  refunds:\n    filter: 'value.kind =='\n"), "plan.yaml:17:13: overrides.refunds.filter: bad expression"},
		{topicsPlan("overrides:\n  refunds:\n    mapping:\n      - drop: [value.id]\n"), "overrides.refunds.mapping: step 1 drops value.id, which the key template"},
		{strings.Replace(topicsPlan(""), "out/{topic}.jsonl", "out/all.jsonl", 1), "sink: topics orders and refunds would both write out/all.jsonl"},
		{strings.Replace(topicsPlan(""), "  from: -2h\n", "  offsets: {0: {from: 0, to: 5}}\n", 1), "window.offsets: per-partition offsets name partitions of one topic"},
		{strings.Replace(topicsPlan(""), "  topics: [orders, refunds]\n", "  topics: [orders, refunds]\n  partitions: [0]\n", 1), "source.partitions: a partition list"},
		{strings.Replace(minimalPlan, "sink:", "overrides:\n  orders:\n    filter: 'true'\nsink:", 1), "overrides: overrides change what a plan of several topics does per topic"},
	}
	for _, c := range cases {
		if got := parseProblems(t, c.src, testOptions()); !strings.Contains(got, c.want) {
			t.Errorf("got %s\nwant %s", got, c.want)
		}
	}
	// A problem of the topic set does not hide the others: every problem
	// is reported at once.
	src := strings.Replace(topicsPlan("overrides:\n  refund:\n    filter: 'true'\n"), "  path: out/{topic}.jsonl\n", "  path: out/{topic}.jsonl\n  batch_size: -5\n", 1)
	src = strings.Replace(src, "[orders, refunds]", "[orders, refunds, orders]", 1)
	got := parseProblems(t, src, testOptions())
	for _, want := range []string{"overrides.refund: refund is not one of", "source.topics[2]: orders is listed twice", "sink.batch_size: -5"} {
		if !strings.Contains(got, want) {
			t.Errorf("got %s\nwant %s among them", got, want)
		}
	}
	// Set by {topic} or an override, the outputs are apart.
	ok := topicsPlan("overrides:\n  refunds:\n    path: out/all-refunds.jsonl\n")
	mustParse(t, strings.Replace(ok, "out/{topic}.jsonl", "out/all.jsonl", 1), testOptions())
}

func TestTopicPlaceholderOfOneTopic(t *testing.T) {
	p := mustParse(t, strings.Replace(minimalPlan, "out/orders.jsonl", "out/{topic}-fixed.jsonl", 1), testOptions())
	if got := sinkValue(&p.Sink, "path"); got != "out/orders-fixed.jsonl" {
		t.Errorf("path %v, want out/orders-fixed.jsonl", got)
	}
	if q, err := p.ForTopic("orders"); err != nil || q != p {
		t.Errorf("ForTopic of a plan's one topic: %v, %v", q, err)
	}
}

func TestTopicsShareTableWarning(t *testing.T) {
	src := strings.Replace(topicsPlan(""), "  type: file\n  path: out/{topic}.jsonl\n", "  type: postgres\n  dsn: postgres://replay@db/replay\n  table: all_rows\n", 1)
	warned := func(p *Plan) bool {
		for _, w := range p.Warnings() {
			if strings.Contains(w.Message, "topics orders, refunds all write postgres table all_rows without a version") {
				return true
			}
		}
		return false
	}
	if p := mustParse(t, src, testOptions()); !warned(p) {
		t.Errorf("two topics into one table without a version: no warning in %v", p.Warnings())
	}
	if p := mustParse(t, strings.Replace(src, "table: all_rows\n", "table: all_rows\n  version: value.v\n", 1), testOptions()); warned(p) {
		t.Errorf("with a version: warned %v", p.Warnings())
	}
	if p := mustParse(t, strings.Replace(src, "table: all_rows\n", "table: 'rows_{topic}'\n", 1), testOptions()); warned(p) || len(p.Warnings()) == 0 {
		t.Errorf("a table per topic: %v", p.Warnings())
	}
}

func TestTopicOverrideEdges(t *testing.T) {
	// filter: '' passes every record of the topic.
	p := mustParse(t, strings.Replace(topicsPlan("overrides:\n  refunds:\n    filter: ''\n"), "mapping:", "filter: 'value.kind == \"full\"'\nmapping:", 1), testOptions())
	r, err := p.ForTopic("refunds")
	if err != nil || r.Filter != "" {
		t.Fatalf("refunds' filter %q, %v: want none", r.Filter, err)
	}
	if prog, err := r.FilterProgram(); prog != nil || err != nil {
		t.Errorf("refunds' filter program %v, %v: want none", prog, err)
	}
	if o, _ := p.ForTopic("orders"); o.Filter == "" {
		t.Error("orders lost the plan's filter")
	}
	// A dead-letter file shared by the topics: only {topic} in its path helps.
	dl := topicsPlan("on_error: dead_letter\ndead_letter: {type: file, path: out/dead.jsonl}\n")
	got := parseProblems(t, dl, testOptions())
	if !strings.Contains(got, "dead_letter: topics orders and refunds would both write out/dead.jsonl") || strings.Contains(got, "overrides.refunds.path") {
		t.Errorf("a shared dead-letter file: %s", got)
	}
	// A topic's dead-letter file that is its sink's file: the dead_letter
	// section is named, every time (the sections are checked in order).
	for range 200 {
		same := topicsPlan("on_error: dead_letter\ndead_letter: {type: file, path: 'out/{topic}.jsonl'}\n")
		if got := parseProblems(t, same, testOptions()); !strings.Contains(got, "dead_letter: topics orders and orders would both write out/orders.jsonl") {
			t.Fatalf("a dead-letter file that is the sink's file: %s", got)
		}
	}
	// A kafka sink whose override targets one of the source topics.
	k := strings.Replace(topicsPlan("overrides:\n  refunds:\n    topic: orders\n"), "  type: file\n  path: out/{topic}.jsonl\n", "  type: kafka\n  brokers: [\"kafka-1:9092\"]\n  topic: '{topic}-fixed'\n", 1)
	warned := false
	for _, w := range mustParse(t, k, testOptions()).Warnings() {
		warned = warned || strings.Contains(w.Message, "the target is a source topic (orders)")
	}
	if !warned {
		t.Error("refunds replayed into orders, a source topic: no warning")
	}
}
