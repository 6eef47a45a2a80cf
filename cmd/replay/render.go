package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
)

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// windowLine words a time window for review: its bounds with the fraction
// of a second (plain RFC 3339 would make [10:00:00.250, 10:00:00.750) read
// as empty), a zero to as the high watermark, rel and the resolution time.
func windowLine(from, to time.Time, rel string, resolvedAt time.Time) string {
	end := "high watermark"
	if !to.IsZero() {
		end = to.Format(time.RFC3339Nano)
	}
	if rel != "" {
		rel = " (" + rel + ")"
	}
	return fmt.Sprintf("window [%s, %s)%s resolved at %s\n", from.Format(time.RFC3339Nano), end, rel, resolvedAt.Format(time.RFC3339))
}

// printResolution renders a job's ranges: what a run would read.
func printResolution(w io.Writer, job *runner.Job) {
	res := job.Resolution
	fmt.Fprintf(w, "plan %s (fingerprint %s)  topic %s  group %s\n", res.Plan, res.Fingerprint, res.Topic, res.Group)
	switch {
	case !job.Fresh:
		fmt.Fprintf(w, "resuming the run recorded in the group (ranges fixed when it was first resolved)\n")
	case !res.From.IsZero():
		fmt.Fprint(w, windowLine(res.From, res.To, "", res.ResolvedAt))
	default:
		fmt.Fprintf(w, "offset window resolved at %s\n", res.ResolvedAt.Format(time.RFC3339))
	}
	t := table(w)
	fmt.Fprintln(t, "PARTITION\tSTART\tEND\tRECORDS\tFROM\tREMAINING\tOUTCOME\tLOG START\tHIGH WATERMARK")
	var total, remaining int64
	for _, r := range res.Ranges {
		from := resumeFrom(job, r)
		total += r.Records()
		remaining += max(r.End-from, 0)
		fmt.Fprintf(t, "%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", r.Partition, r.Start, r.End, r.Records(), from, max(r.End-from, 0), r.Outcome, r.LogStart, r.HighWatermark)
	}
	fmt.Fprintf(t, "TOTAL\t\t\t%d\t\t%d\t\t\t\n", total, remaining)
	t.Flush()
	if len(job.Ignored) > 0 {
		fmt.Fprintf(w, "not part of this run: partitions %v\n", job.Ignored)
	}
}

// resumeFrom is where a run of job reads r from: its checkpoint when
// resuming, else the range's start.
func resumeFrom(job *runner.Job, r runner.Range) int64 {
	if off, ok := job.Resume[r.Partition]; ok {
		return off
	}
	return r.Start
}

// printReport renders the final summary of a run.
func printReport(w io.Writer, rep *runner.Report, where string) {
	t := table(w)
	fmt.Fprintln(t, "PARTITION\tOUTCOME\tSTART\tEND\tFROM\tNEXT\tREAD\tWRITTEN\tSKIPPED\tABORTED\tOUTSIDE WINDOW\tSTATUS")
	for _, p := range rep.Partitions {
		status := "done"
		switch {
		case p.Error != "":
			status = "failed"
		case !p.Done && p.Moved:
			status = "moved"
		case !p.Done:
			status = "stopped"
		}
		fmt.Fprintf(t, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%s\n", p.Partition, p.Outcome, p.Start, p.End, p.From, p.Next, p.Read, p.Written, skipped(p.Skipped), p.Aborted, p.OutsideWindow, status)
	}
	read, written, skip := rep.Totals()
	fmt.Fprintf(t, "TOTAL\t\t\t\t\t\t%d\t%d\t%d\t\t\t\n", read, written, skip)
	t.Flush()
	dur := rep.Finished.Sub(rep.Started)
	rate := 0.0
	if dur > 0 {
		rate = float64(written) / dur.Seconds()
	}
	unfinished := ""
	if d, _ := registry.Catalog().Lookup(plan.SinkType(rep.Sink)); d.StagingDir != nil && !rep.Published {
		where, unfinished = "the staging of "+where, "; "+cmp.Or(d.Unfinished, "not published: the output appears when the run completes")
	}
	fmt.Fprintf(w, "%d records written to %s in %s (%.0f records/s)%s\n", written, where, dur.Round(time.Millisecond), rate, unfinished)
	printOutcomes(w, "sink", rep.SinkOutcomes)
	printOutcomes(w, "dead letters", rep.DeadLetterOutcomes)
	printLosses(w, rep)
}

func skipped(m map[string]int64) string {
	if len(m) == 0 {
		return "0"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ",")
}

// planView is what `replay plan` shows: the job's ranges with what reading
// their ends found, the totals and the ETA at the throttle.
type planView struct {
	Plan        string    `json:"plan"`
	Fingerprint string    `json:"fingerprint"`
	Topic       string    `json:"topic"`
	Group       string    `json:"group"`
	ResolvedAt  time.Time `json:"resolved_at"`
	From        time.Time `json:"from,omitzero"`
	To          time.Time `json:"to,omitzero"`
	// Relative is the window as written when it depends on the moment of
	// resolution (from: -2h, last: 1d in Europe/Berlin).
	Relative string `json:"window_relative,omitempty"`
	// Resuming is true when the ranges come from an earlier run's
	// checkpoints: counts, records and bytes then cover what remains.
	Resuming bool `json:"resuming"`
	// Pinned is the resolution file the ranges come from, if any.
	Pinned      string          `json:"pinned_resolution,omitempty"`
	Partitions  []planPartition `json:"partitions"`
	Total       planTotal       `json:"total"`
	Throttle    throttleView    `json:"throttle"`
	ETASeconds  *int64          `json:"eta_seconds"` // null when unthrottled
	ETA         string          `json:"eta"`         // a duration, or "unthrottled"
	NothingToDo bool            `json:"nothing_to_do"`
	Ignored     []int32         `json:"ignored_partitions,omitempty"`
	// SinkNotes are what the sink's descriptor says it would write for
	// the ranges (plan.SinkDescriptor.Notes).
	SinkNotes []plan.SinkNote `json:"sink_notes,omitempty"`
	// Shards is the shard table of --shards.
	Shards *shardsView `json:"shards,omitempty"`
	// AllowDataLoss is the plan's allow_data_loss: without it, a
	// start-before-retention row is refused.
	AllowDataLoss bool `json:"-"`
	// Refused is set when the plan cannot run as resolved (retention cut
	// the window): the table shows why.
	Refused bool `json:"-"`
	// Decodes is set for a plan with decode: (describeSchemas);
	// SchemaError is why the schema registry could not name the ids.
	Decodes     bool   `json:"-"`
	SchemaError string `json:"schema_registry_error,omitempty"`
}

type planPartition struct {
	runner.Range
	Records int64 `json:"records"`
	// From is where a run starts reading (the checkpoint when resuming).
	From      int64              `json:"from"`
	Remaining int64              `json:"remaining"`
	First     *runner.RecordInfo `json:"first_record"`
	Last      *runner.RecordInfo `json:"last_record"`
	Sampled   int                `json:"sampled_records"`
	// Exact is true when the sample is every record of the remaining
	// range: Bytes is then a sum, not an estimate.
	Exact bool  `json:"exact"`
	Bytes int64 `json:"estimated_bytes"`
	// FirstSchemas and LastSchemas are, under decode:, the schemas of
	// the first and last record (describeSchemas).
	FirstSchemas *recordSchemas `json:"first_record_schemas,omitempty"`
	LastSchemas  *recordSchemas `json:"last_record_schemas,omitempty"`
}

type planTotal struct {
	Records   int64 `json:"records"`
	Remaining int64 `json:"remaining"`
	Bytes     int64 `json:"estimated_bytes"`
}

type throttleView struct {
	RecordsPerSecond float64 `json:"records_per_second"`
	BytesPerSecond   int64   `json:"bytes_per_second"`
}

func newPlanView(job *runner.Job, samples []runner.RangeSample, pinned string) planView {
	res, p := job.Resolution, job.Plan
	v := planView{Plan: res.Plan, Fingerprint: res.Fingerprint, Topic: res.Topic, Group: res.Group, ResolvedAt: res.ResolvedAt,
		From: res.From, To: res.To, Relative: p.Window.Relative(), Resuming: !job.Fresh, Pinned: pinned, Partitions: []planPartition{}, NothingToDo: job.NothingToDo(),
		Ignored: job.Ignored, AllowDataLoss: p.AllowDataLoss,
		Throttle: throttleView{RecordsPerSecond: p.Throttle.RecordsPerSecond, BytesPerSecond: int64(p.Throttle.BytesPerSecond)}}
	for i, r := range res.Ranges {
		from := resumeFrom(job, r)
		s := samples[i]
		pp := planPartition{Range: r, Records: r.Records(), From: from, Remaining: max(r.End-from, 0),
			First: s.First, Last: s.Last, Sampled: s.Sampled, Exact: s.Exact, Bytes: s.Bytes}
		v.Partitions = append(v.Partitions, pp)
		v.Total.Records += pp.Records
		v.Total.Remaining += pp.Remaining
		v.Total.Bytes += pp.Bytes
	}
	v.SinkNotes = sinkNotes(p, v.Partitions)
	v.ETA = "unthrottled"
	if eta, ok := runner.ETA(p.Throttle, v.Total.Remaining, v.Total.Bytes); ok {
		secs := int64(eta / time.Second)
		v.ETASeconds, v.ETA = &secs, eta.String()
	}
	return v
}

// printPlan renders a plan view as a table and a few lines.
func printPlan(w io.Writer, v planView) {
	fmt.Fprintf(w, "plan %s (fingerprint %s)  topic %s  group %s\n", v.Plan, v.Fingerprint, v.Topic, v.Group)
	switch {
	case !v.From.IsZero():
		fmt.Fprint(w, windowLine(v.From, v.To, v.Relative, v.ResolvedAt))
	case !v.Resuming || v.Pinned != "":
		fmt.Fprintf(w, "offset window resolved at %s\n", v.ResolvedAt.Format(time.RFC3339))
	}
	if v.Pinned != "" {
		fmt.Fprintf(w, "ranges pinned by %s\n", v.Pinned)
	}
	if v.Resuming {
		fmt.Fprintf(w, "resuming the run recorded in the group (ranges fixed when it was first resolved): records, bytes and times cover what remains\n")
	}
	t := table(w)
	fmt.Fprintln(t, "PARTITION\tSTART\tEND\tRECORDS\tREMAINING\tFIRST RECORD\tLAST RECORD\tBYTES\tOUTCOME\tLOG START\tHIGH WATERMARK")
	exact := true
	for _, p := range v.Partitions {
		exact = exact && p.Exact
		fmt.Fprintf(t, "%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%d\n", p.Partition, p.Start, p.End, p.Records, p.Remaining,
			recordTime(p.First), recordTime(p.Last), estimate(p.Bytes, p.Exact), p.Outcome, p.LogStart, p.HighWatermark)
	}
	fmt.Fprintf(t, "TOTAL\t\t\t%d\t%d\t\t\t%s\n", v.Total.Records, v.Total.Remaining, estimate(v.Total.Bytes, exact))
	t.Flush()
	for _, p := range v.Partitions {
		if p.OpenTransaction {
			who := ""
			if len(p.Producers) > 0 {
				who = " (" + p.Producers[0].String() + ")"
			}
			fmt.Fprintf(w, "partition %d: open-transaction: a transaction%s holds the last stable offset at %d, below the end %d (high watermark %d): a run delivers what is before it and waits for it to end (source.open_transaction_timeout)\n",
				p.Partition, who, p.LastStable, p.End, p.HighWatermark)
		}
		if p.Outcome != runner.StartBeforeRetention {
			continue
		}
		lost := ""
		switch {
		case p.Lost > 0 && !v.From.IsZero():
			lost = fmt.Sprintf(", up to %d offsets of the window are lost", p.Lost)
		case p.Lost > 0:
			lost = fmt.Sprintf(", %d offsets of the window are lost", p.Lost)
		}
		at := ""
		if p.First != nil && p.First.Offset == p.LogStart {
			at = " (written " + p.First.Timestamp.Format(timeLayout) + ")"
		}
		then := "allow_data_loss replays from there" + lost
		if !v.AllowDataLoss {
			then = "refused: set allow_data_loss: true to replay from there, or narrow the window"
		}
		fmt.Fprintf(w, "partition %d: start-before-retention: retention deleted the start of the window; the first available offset is %d%s; %s\n",
			p.Partition, p.LogStart, at, then)
	}
	printSchemas(w, v)
	if len(v.Ignored) > 0 {
		fmt.Fprintf(w, "not part of this run: partitions %v\n", v.Ignored)
	}
	printSinkNotes(w, v.SinkNotes)
	fmt.Fprintln(w, "eta: "+etaLine(v))
	switch {
	case v.Refused:
		fmt.Fprintln(w, "nothing can be replayed as the window stands: see the error below")
	case v.NothingToDo:
		fmt.Fprintln(w, "nothing to do")
	default:
		fmt.Fprintf(w, "%d offsets to replay\n", v.Total.Remaining)
	}
}

// timeLayout shows record timestamps to the millisecond, as Kafka stores them.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func recordTime(r *runner.RecordInfo) string {
	if r == nil {
		return "-"
	}
	return r.Timestamp.Format(timeLayout)
}

// estimate renders bytes in IEC units, "~" marking an estimate.
func estimate(n int64, exact bool) string {
	if exact {
		return byteSize(n)
	}
	return "~" + byteSize(n)
}

func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func etaLine(v planView) string {
	if v.ETASeconds == nil {
		return "unthrottled (the plan sets no throttle: the run goes as fast as the sink accepts)"
	}
	var limits []string
	slower := ""
	th := v.Throttle
	if th.RecordsPerSecond > 0 {
		limits = append(limits, fmt.Sprintf("%g records/s", th.RecordsPerSecond))
	}
	if th.BytesPerSecond > 0 {
		limits = append(limits, byteSize(th.BytesPerSecond)+"/s")
	}
	if len(limits) == 2 {
		slower = "; records/s is the slower limit"
		if float64(v.Total.Bytes)/float64(th.BytesPerSecond) > float64(v.Total.Remaining)/th.RecordsPerSecond {
			slower = "; bytes/s is the slower limit"
		}
	}
	return fmt.Sprintf("%s at the throttle (%s%s)", time.Duration(*v.ETASeconds)*time.Second, strings.Join(limits, ", "), slower)
}

// hints word a runner error's hint with the command line's flags (no
// entry: none).
var hints = map[fault.Hint]string{
	fault.HintExpired:         "Re-run with 'replay run PLAN --resume-from-sink' to continue from the sink's own checkpoints (" + registry.Catalog().CheckpointKeepers() + "), or with '--restart' to replay the window from its start (the recorded ranges, when this machine recorded them).",
	fault.HintRestart:         "Re-run with 'replay run PLAN --restart' to discard the checkpoints and replay the window from its start.",
	fault.HintResolveOnce:     "Resolve once with 'replay plan PLAN --out ranges.json', then start every process with 'replay run PLAN --join --resolution ranges.json'.",
	fault.HintSameResolution:  "Start every process with the same --resolution file.",
	fault.HintResolveAgain:    "Run replay plan --out again and review the new ranges.",
	fault.HintFinishOrRestart: "Finish it with replay run without --resolution, or re-run with --restart to discard it and replay the pinned ranges.",
	fault.HintJoinedFile:      "Start this process with the resolution file the other processes of the plan were given, or without --resolution to take the group's ranges.",
	fault.HintJoinedOnly:      "Only 'replay run --join' processes of this plan may share its group.",
	fault.HintSinkResume:      "The sink kept failing for longer than sink.retry.max_elapsed: once it is healthy, re-run the same command to resume from the committed offsets (or raise sink.retry.max_elapsed to ride out longer outages).",
	fault.HintResume:          "The source cluster kept failing for longer than retry.max_elapsed: once it is healthy, re-run the same command to resume from the committed offsets (or raise retry.max_elapsed to ride out longer outages).",
	fault.HintOpenTransaction: "A producer left a transaction open: once it commits or aborts (or the broker times it out), re-run the same command to resume from the committed offsets (or raise source.open_transaction_timeout to wait longer).",
}

type outcomeCount struct {
	name string
	n    int64
}

// outcomeCounts lists o's counts by name: inserted, updated, unchanged and
// ignored always, the others when they are not zero (all with every).
func outcomeCounts(o *sinks.Outcomes, every bool) []outcomeCount {
	all := []outcomeCount{{"inserted", o.Inserted}, {"updated", o.Updated}, {"unchanged", o.Unchanged}, {"ignored", o.Ignored},
		{"deleted", o.Deleted}, {"absent", o.Absent}, {"stale", o.Stale}, {"duplicate", o.Duplicate}}
	out := all[:4:4]
	for _, c := range all[4:] {
		if every || c.n != 0 {
			out = append(out, c)
		}
	}
	return out
}

// printOutcomes says what a sink's durable writes did with the records
// ("sink: 0 inserted, 0 updated, 6 unchanged, 0 ignored"), when it can tell,
// and names the first idempotency-key collision.
func printOutcomes(w io.Writer, what string, o *sinks.Outcomes) {
	if o == nil {
		return
	}
	parts := []string{}
	for _, c := range outcomeCounts(o, false) {
		parts = append(parts, fmt.Sprintf("%d %s", c.n, c.name))
	}
	fmt.Fprintf(w, "%s: %s\n", what, strings.Join(parts, ", "))
	if o.Collisions > 0 {
		fmt.Fprintf(w, "warning: %d records shared an idempotency key with a record of another partition or topic (first: %s): one row holds both, the later one or, with a version, the newer; make the key template unique, e.g. add {{ .Partition }} and {{ .Offset }}\n", o.Collisions, o.FirstCollision)
	}
}

// writeJSON writes v to w as indented JSON (--output json).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
