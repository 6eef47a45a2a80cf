package stdout

import (
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/encode"
)

// Type is the stdout sink's type in a plan.
const Type plan.SinkType = "stdout"

// Descriptor describes the stdout sink's plan section.
var Descriptor = plan.SinkDescriptor{
	Type:             Type,
	Summary:          "JSONL on standard output, for previews and pipes",
	Fields:           []plan.FieldDescriptor{encode.ValueFormatField},
	WritesStdout:     true,
	DeadLetterInLine: func(*plan.Sink) bool { return true },
}
