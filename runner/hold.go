package runner

import (
	"context"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/group"
)

// HoldGroup makes this process the holder of p's replay group
// (group.HoldGroup): a run with the hold (Options.Hold) refuses every
// other run of the plan while it lasts. Release leaves the group.
func HoldGroup(ctx context.Context, c *Cluster, p *plan.Plan) (*group.Hold, error) {
	return group.HoldGroup(ctx, c.Cluster, p)
}

// holderID is the client ID of the hold's member (opts.Hold), "" without
// a hold: the group checks accept that member as this process.
func (o *Options) holderID() string {
	if o.Hold == nil {
		return ""
	}
	return o.Hold.ClientID()
}
