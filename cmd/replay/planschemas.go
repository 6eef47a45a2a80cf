package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/internal/pipeline"
	"github.com/replay-tool/replay/runner"
)

// schemaRef is one schema id as `replay plan` names it: the id a record's
// key or value carries, with the subject and version the registry files it
// under; Error says why the registry could not tell (an unknown id, a
// registry out of reach), and a side that is not framed has no id.
type schemaRef struct {
	ID      int32  `json:"id"`
	Subject string `json:"subject,omitempty"`
	Version int    `json:"version,omitempty"`
	Type    string `json:"type,omitempty"`
	// Deleted: the subject's version was soft-deleted since.
	Deleted bool   `json:"deleted,omitempty"`
	Error   string `json:"error,omitempty"`
}

// recordSchemas are the schemas of one record's decoded sides; a side the
// plan does not decode, or that is not framed, is absent. Tombstone: the
// record has no value to decode.
type recordSchemas struct {
	Value     *schemaRef `json:"value,omitempty"`
	Key       *schemaRef `json:"key,omitempty"`
	Tombstone bool       `json:"tombstone,omitempty"`
}

// planRegistryBudget bounds how long `replay plan` retries the schema
// registry (the plan's retry.max_elapsed when shorter): a review does not
// wait out a run's budget for names it can do without.
const planRegistryBudget = 30 * time.Second

// describeSchemas names, for a plan that decodes, the schema ids of each
// range's first and last record, asking the registry once per id. A
// registry out of reach leaves the ids with the error.
func (a *app) describeSchemas(ctx context.Context, job *runner.Job, v *planView) {
	p := job.Plan
	if !p.Decode.Decodes() {
		return
	}
	budget, name := time.Duration(p.Retry.MaxElapsed), ""
	if budget > planRegistryBudget {
		budget, name = planRegistryBudget, fmt.Sprintf("the %s limit of replay plan", planRegistryBudget)
	}
	dec, err := decode.New(pipeline.DecodeConfig(p), decode.Options{RetryBudget: budget, BudgetName: name, Logger: a.log})
	if err == nil {
		err = dec.Check(ctx)
	}
	if err != nil {
		dec = nil
		v.SchemaError = err.Error()
	}
	seen := map[int32]*schemaRef{}
	describe := func(id int32) *schemaRef {
		if id < 0 {
			return nil
		}
		if s, ok := seen[id]; ok {
			return s
		}
		s := &schemaRef{ID: id}
		if dec != nil {
			info, err := dec.Describe(ctx, id)
			s.Subject, s.Version, s.Type, s.Deleted = info.Subject, info.Version, info.Type, info.Deleted
			if err != nil {
				s.Error = strings.TrimPrefix(err.Error(), fmt.Sprintf("schema id %d: ", id))
			}
		}
		seen[id] = s
		return s
	}
	of := func(r *runner.RecordInfo) *recordSchemas {
		if r == nil {
			return nil
		}
		var rs recordSchemas
		if p.Decode.DecodesValue() {
			rs.Value, rs.Tombstone = describe(r.ValueSchemaID), r.Tombstone
		}
		if p.Decode.DecodesKey() {
			rs.Key = describe(r.KeySchemaID)
		}
		return &rs
	}
	for i := range v.Partitions {
		pp := &v.Partitions[i]
		pp.FirstSchemas, pp.LastSchemas = of(pp.First), of(pp.Last)
	}
	v.Decodes = true
}

// printSchemas writes, under a plan that decodes, a line per partition
// naming the schemas of its range's first and last record.
func printSchemas(w io.Writer, v planView) {
	if !v.Decodes {
		return
	}
	if msg := v.SchemaError; msg != "" {
		for _, p := range []string{"decode: ", "schema registry: ", "schema registry: "} { // said once, below
			msg = strings.TrimPrefix(msg, p)
		}
		fmt.Fprintf(w, "schema registry: %s (the schema ids below are as the records carry them)\n", msg)
	}
	for _, p := range v.Partitions {
		if p.FirstSchemas == nil {
			continue
		}
		fmt.Fprintf(w, "partition %d schemas: first record %s; last record %s\n", p.Partition, p.FirstSchemas, p.LastSchemas)
	}
}

// String is the record's schemas for the plan table: value and key, each
// as "id N (subject vV, TYPE)".
func (rs *recordSchemas) String() string {
	if rs == nil {
		return "-"
	}
	var parts []string
	switch {
	case rs.Tombstone:
		parts = append(parts, "no value (a tombstone)")
	case rs.Value != nil:
		parts = append(parts, "value "+rs.Value.String())
	}
	if rs.Key != nil {
		parts = append(parts, "key "+rs.Key.String())
	}
	if len(parts) == 0 {
		return "not framed"
	}
	return strings.Join(parts, ", ")
}

// String is "id N (subject vV, TYPE)", or the id with the registry's error.
func (s *schemaRef) String() string {
	switch {
	case s.Error != "":
		return fmt.Sprintf("id %d (%s)", s.ID, s.Error)
	case s.Subject != "" && s.Deleted:
		return fmt.Sprintf("id %d (%s v%d, deleted, %s)", s.ID, s.Subject, s.Version, s.Type)
	case s.Subject != "":
		return fmt.Sprintf("id %d (%s v%d, %s)", s.ID, s.Subject, s.Version, s.Type)
	case s.Type != "":
		return fmt.Sprintf("id %d (%s)", s.ID, s.Type)
	}
	return fmt.Sprintf("id %d", s.ID)
}
