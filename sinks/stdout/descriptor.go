package stdout

import (
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/encode"
)

// Type is the stdout sink's type in a plan.
const Type plan.SinkType = "stdout"

// Section is a stdout sink's own fields in a plan (Descriptor.Fields says
// what each means), in Sink.Config.
type Section struct {
	ValueFormat string `yaml:"value_format"`
}

// Descriptor describes the stdout sink's plan section.
var Descriptor = plan.SinkDescriptor{
	Type:             Type,
	Summary:          "JSONL on standard output, for previews and pipes",
	NewConfig:        func() any { return new(Section) },
	Fields:           []plan.FieldDescriptor{encode.ValueFormatField},
	WritesStdout:     true,
	DeadLetterInLine: func(*plan.Sink) bool { return true },
}
