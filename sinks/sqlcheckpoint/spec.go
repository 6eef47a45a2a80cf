package sqlcheckpoint

import "github.com/replay-tool/replay/sinks"

// ConfigOf is the checkpoint table a plan section declares (its
// checkpoint_table, table; "" for none), recording checkpoints for the
// run's group, plan fingerprint and run identity (opts).
func ConfigOf(table string, opts sinks.Options) Config {
	return Config{Table: table, Group: opts.Group, Fingerprint: opts.Fingerprint, RunID: opts.RunID}
}
