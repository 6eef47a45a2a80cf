package sqlcheckpoint

import "github.com/replay-tool/replay/sinks"

// ConfigOf is the checkpoint table sp's plan section declares
// (checkpoint_table; "" for none), recording checkpoints for the run's
// group, plan fingerprint and run identity.
func ConfigOf(sp sinks.Spec) Config {
	return Config{Table: sp.Plan.CheckpointTable, Group: sp.Options.Group, Fingerprint: sp.Options.Fingerprint, RunID: sp.Options.RunID}
}
