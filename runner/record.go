package runner

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
)

// RecordFormat names the format of a run record, its first field.
const RecordFormat = "replay.run-record/v1"

// States of a run record.
const (
	// RecordRunning: the ranges were fixed and pinned in the group; the run
	// has not ended (or was killed).
	RecordRunning = "running"
	// RecordStopped: the run ended before every partition reached its end
	// (a signal, a failure); Committed is what it had committed.
	RecordStopped = "stopped"
	// RecordDone: every partition reached its end.
	RecordDone = "done"
	// RecordReset: `replay reset` deleted the group's offsets on purpose:
	// the next run resolves the window afresh.
	RecordReset = "reset"
)

// RunRecord is the local record of a plan's run, kept by the machine that
// ran it (Options.StateDir) in addition to the replay group's commits: the
// ranges the run fixed and how far it got. It is written when the ranges
// are pinned in the group and when the run ends. When the group's commits
// are gone (Kafka expires an empty group's offsets after
// offsets.retention.minutes; someone deleted them) the record tells Prepare
// that the plan has progress, so that the run is refused instead of
// silently starting over with a fresh (and, for an open-ended window,
// wider) resolution.
type RunRecord struct {
	Format      string `json:"format"`
	Plan        string `json:"plan"`
	Fingerprint string `json:"fingerprint"`
	Group       string `json:"group"`
	Topic       string `json:"topic"`
	// ClusterID is the source cluster's id (Metadata); "" when unknown.
	ClusterID string `json:"cluster_id"`
	// State is RecordRunning, RecordStopped, RecordDone or RecordReset.
	State      string    `json:"state"`
	ResolvedAt time.Time `json:"resolved_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// Ranges are the fixed ranges, with the offset each partition had
	// committed when the record was written.
	Ranges []RecordedRange `json:"ranges"`
	// path is where the record was read from or written to.
	path string
}

// RecordedRange is one partition's fixed range [Start, End) and the next
// offset to read (Committed) when the record was written.
type RecordedRange struct {
	Partition int32 `json:"partition"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
	Committed int64 `json:"committed"`
}

// Path is where the record is kept.
func (r *RunRecord) Path() string { return r.path }

// progress reports whether the record stands for progress of a run (not a
// reset).
func (r *RunRecord) progress() bool { return r != nil && r.State != RecordReset }

// recordPath is the file of the record of (cluster, group, fingerprint)
// under dir: runs/<group>-<hash>.json, the group sanitized for a file name.
func recordPath(dir, clusterID, group, fp string) string {
	h := sha256.Sum256([]byte(clusterID + "\x00" + group + "\x00" + fp))
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, group)
	if len(name) > 64 {
		name = name[:64]
	}
	return filepath.Join(dir, "runs", name+"-"+hex.EncodeToString(h[:8])+".json")
}

// readRecord reads the record of p's run on the cluster from dir; nil when
// there is none (or dir is "").
func readRecord(dir, clusterID string, p *plan.Plan) (*RunRecord, error) {
	if dir == "" {
		return nil, nil
	}
	path := recordPath(dir, clusterID, p.Group, p.Fingerprint())
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the run record: %w", err)
	}
	r := &RunRecord{}
	if err := json.Unmarshal(b, r); err != nil || r.Format != RecordFormat {
		return nil, fmt.Errorf("run record %s is not a %s file (%v): it records this plan's progress on this machine; remove it to go on without it", path, RecordFormat, err)
	}
	r.path = path
	return r, nil
}

// ReadRunRecord reads this machine's record of p's run on c from dir (see
// Options.StateDir); nil when there is none, or only a reset one.
func ReadRunRecord(dir string, c *Cluster, p *plan.Plan) (*RunRecord, error) {
	id := ""
	if c != nil && c.Cluster != nil {
		id = c.ID
	}
	r, err := readRecord(dir, id, p)
	if err != nil || !r.progress() {
		return nil, err
	}
	return r, nil
}

// write stores r in dir atomically (a temporary file renamed over it).
func (r *RunRecord) write(dir string) error {
	r.Format, r.UpdatedAt = RecordFormat, time.Now().UTC()
	r.path = recordPath(dir, r.ClusterID, r.Group, r.Fingerprint)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(r.path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(r.path), ".record-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), r.path)
}

// recordsRuns reports whether the job keeps a local run record: a plain
// run of a plan without a schedule, with a state directory.
func (j *Job) recordsRuns() bool {
	return j.opts.StateDir != "" && j.Interval == nil && !j.opts.Join
}

// saveRecord writes the job's run record in state, with next(r) as each
// range's committed offset. A record that cannot be written costs a
// warning: the run itself is not at risk, only the refusal of a later run
// whose group lost its commits.
func (j *Job) saveRecord(state string, next func(Range) int64) {
	if !j.recordsRuns() {
		return
	}
	r := &RunRecord{Plan: j.Plan.Name, Fingerprint: j.Resolution.Fingerprint, Group: j.Plan.Group, Topic: j.Resolution.Topic,
		ClusterID: j.SourceClusterID(), State: state, ResolvedAt: j.Resolution.ResolvedAt}
	if j.record != nil && j.record.progress() && slices.EqualFunc(j.record.Ranges, j.Resolution.Ranges, func(a RecordedRange, b Range) bool {
		return a.Partition == b.Partition && a.Start == b.Start && a.End == b.End
	}) {
		r.ResolvedAt = j.record.ResolvedAt // the same run, resumed
	}
	for _, rg := range j.Resolution.Ranges {
		r.Ranges = append(r.Ranges, RecordedRange{Partition: rg.Partition, Start: rg.Start, End: rg.End, Committed: next(rg)})
	}
	if err := r.write(j.opts.StateDir); err != nil {
		j.opts.Log.Warn().Err(err).Str("path", r.path).Msg("could not write the run record: a later run of this plan cannot tell when the group's commits are gone")
		return
	}
	j.record = r
}

// ForgetRun marks the local record of p's run on c reset (`replay reset`):
// the group's offsets were deleted on purpose, and the next run resolves
// the window afresh instead of refusing. Nothing happens when dir is "".
func ForgetRun(dir string, c *Cluster, p *plan.Plan) error {
	if dir == "" {
		return nil
	}
	id := ""
	if c != nil && c.Cluster != nil {
		id = c.ID
	}
	r, err := readRecord(dir, id, p)
	if err != nil || r == nil {
		r = &RunRecord{Plan: p.Name, Fingerprint: p.Fingerprint(), Group: p.Group, Topic: p.Source.Topic, ClusterID: id}
	}
	r.State = RecordReset
	return r.write(dir)
}

// ExpiredError is the refusal of a run whose replay group holds no commit
// for partitions where the plan's progress is recorded elsewhere (the
// local run record, the sink's checkpoint table): the group's offsets
// probably expired (offsets.retention.minutes) or were deleted. Starting
// over would deliver the window again from its start.
type ExpiredError struct {
	Group, Plan, Topic string
	// Where names the record: "the local run record PATH (state, updated
	// TIME)" or "the sink's checkpoint table".
	Where string
	// Recorded are the partitions without a commit, with their ranges
	// (Start and End -1 when unknown) and the recorded next offsets.
	Recorded []RecordedRange
}

func (e *ExpiredError) Error() string {
	parts := make([]string, len(e.Recorded))
	for i, r := range e.Recorded {
		if r.End >= 0 {
			parts[i] = fmt.Sprintf("%d [%d, %d) at %d", r.Partition, r.Start, r.End, r.Committed)
		} else {
			parts[i] = fmt.Sprintf("%d at %d", r.Partition, r.Committed)
		}
	}
	return fmt.Sprintf("it has no commits for partitions %s of %s, but %s records progress of plan %s there (partition [range) at next offset: %s): "+
		"the group's committed offsets probably expired (Kafka deletes the offsets of a group that stayed empty for offsets.retention.minutes, 7 days by default) or were deleted; "+
		"starting over would deliver the window again",
		partitionList(e.Recorded), e.Topic, e.Where, e.Plan, strings.Join(parts, ", "))
}

// refusal is e as the *fault.SafetyError a run returns (exit 3), with its hint.
func (e *ExpiredError) refusal() error {
	return &fault.SafetyError{Group: e.Group, Reason: e.Error(), Hint: fault.HintExpired, Err: e}
}

func partitionList(rs []RecordedRange) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprint(r.Partition)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// recordWhere names a run record in an ExpiredError.
func recordWhere(r *RunRecord) string {
	return fmt.Sprintf("the local run record %s (%s, written %s)", r.path, r.State, r.UpdatedAt.UTC().Format(time.RFC3339))
}

// anyCommit reports whether the group holds a commit on any partition of
// the topic.
func anyCommit(cps map[int32]Checkpoint) bool {
	for _, cp := range cps {
		if cp.Offset >= 0 {
			return true
		}
	}
	return false
}

// recordRefusal refuses to start p over partitions its run record rec
// holds progress for while the group has no commit for them.
func recordRefusal(p *plan.Plan, rec *RunRecord, missing []RecordedRange) error {
	return (&ExpiredError{Group: p.Group, Plan: p.Name, Topic: p.Source.Topic, Where: recordWhere(rec), Recorded: missing}).refusal()
}

// withoutCommits applies decideNoCommits to a fresh job whose group holds
// no commit on the plan's topic.
func (j preparing) withoutCommits() error {
	d, err := decideNoCommits(j.Plan, j.record, j.opts.Restart, j.opts.ResumeFromSink)
	if err != nil {
		return err
	}
	if d.fromSink {
		j.Fresh, j.fromSink = d.fresh, true
	}
	j.checkSink = j.checkSink || d.checkSink
	return nil
}

// fromRecord fixes the job's ranges to those of its run record, which the
// group lost: from their starts with Restart, else from the sink's
// checkpoints (ResumeFromSink). A window is never resolved anew, and so
// never wider, than the run first fixed it.
func (j preparing) fromRecord(ctx context.Context, all []int32) error {
	p, rec := j.Plan, j.record
	res := &Resolution{Plan: p.Name, Fingerprint: p.Fingerprint(), Topic: p.Source.Topic, Group: p.Group, ResolvedAt: rec.ResolvedAt}
	outcome := Resumed
	if j.opts.Restart {
		outcome = InRange
	}
	var parts []int32
	for _, r := range rec.Ranges {
		if !slices.Contains(all, r.Partition) {
			return fmt.Errorf("the run record %s has partition %s/%d, which the topic no longer has (it has %d partitions): was it deleted and created again? Remove the record to resolve the window afresh", rec.path, p.Source.Topic, r.Partition, len(all))
		}
		parts = append(parts, r.Partition)
		res.Ranges = append(res.Ranges, Range{Partition: r.Partition, Start: r.Start, End: r.End, Outcome: outcome})
	}
	offs, err := j.c.ListOffsets(ctx, p.Source.Topic, parts, p.Source.Isolation)
	if err != nil {
		return err
	}
	j.Resolution, j.Fresh, j.fromSink = res, j.opts.Restart, !j.opts.Restart
	j.Resume, j.committed, j.positions, j.dlPositions = map[int32]int64{}, map[int32]int64{}, map[int32]int64{}, map[int32]int64{}
	for i := range res.Ranges {
		if err := j.pinRange(ctx, &res.Ranges[i], offs[res.Ranges[i].Partition]); err != nil {
			return err
		}
	}
	for _, part := range all {
		if !slices.Contains(parts, part) {
			j.Ignored = append(j.Ignored, part)
		}
	}
	j.opts.Log.Warn().Str("plan", p.Name).Str("group", p.Group).Str("record", rec.path).Bool("restart", j.opts.Restart).
		Msg("the group has no commits of this plan: taking the ranges the run record fixed")
	return nil
}

// partlyLost checks a resumed job against its run record: partitions the
// record has and the group lost the commits of (deleted one by one) are
// refused, or, with ResumeFromSink, added back with their recorded ranges,
// to continue from the sink's checkpoints. A record of another run of the
// plan (other ranges) is ignored.
func (j preparing) partlyLost(ctx context.Context, cps map[int32]Checkpoint) error {
	rec := j.record
	if !rec.progress() {
		return nil
	}
	var missing []RecordedRange
	for _, r := range rec.Ranges {
		if cp, ok := cps[r.Partition]; ok && cp.Offset >= 0 {
			if cp.Start != r.Start || cp.End != r.End {
				return nil
			}
			continue
		}
		missing = append(missing, r)
	}
	if len(missing) == 0 {
		return nil
	}
	if !j.opts.ResumeFromSink {
		return recordRefusal(j.Plan, j.record, missing)
	}
	parts := make([]int32, len(missing))
	for i, r := range missing {
		parts[i] = r.Partition
	}
	offs, err := j.c.ListOffsets(ctx, j.Plan.Source.Topic, parts, j.Plan.Source.Isolation)
	if err != nil {
		return err
	}
	for _, r := range missing {
		rg := Range{Partition: r.Partition, Start: r.Start, End: r.End, Outcome: Resumed}
		if err := j.pinRange(ctx, &rg, offs[r.Partition]); err != nil {
			return err
		}
		j.Resolution.Ranges = append(j.Resolution.Ranges, rg)
		drop := func(p int32) bool { return p == r.Partition }
		j.Ignored, j.Added = slices.DeleteFunc(j.Ignored, drop), slices.DeleteFunc(j.Added, drop)
	}
	slices.SortFunc(j.Resolution.Ranges, func(a, b Range) int { return cmp.Compare(a.Partition, b.Partition) })
	j.fromSink = true
	return nil
}

// checkSinkRecord runs before a job writes or commits anything. A fresh
// job on a group without commits (checkSink) is refused when the sink's
// checkpoint table records progress of this run: the group lost its
// commits. A job continuing from the sink (fromSink) needs the sink's
// checkpoints for its ranges (the same ranges as the run that wrote them),
// or it is refused rather than started over.
func (j *Job) checkSinkRecord(ctx context.Context, sink sinks.Sink) error {
	if !j.checkSink && !j.fromSink {
		return nil
	}
	p := j.Plan
	store := sinks.CapabilitiesOf(sink).Checkpoints
	if store == nil || p.OnError == plan.OnErrorDeadLetter {
		if j.fromSink {
			return fmt.Errorf("resume from the sink: the %s sink keeps no checkpoints of its own (only %s does, without on_error: dead_letter)", p.Sink.Type, registry.Catalog().CheckpointKeepers())
		}
		return nil
	}
	cps, err := store.Checkpoints(ctx, p.Group, j.Resolution.Topic)
	if err != nil {
		return fmt.Errorf("read the sink's checkpoints: %w", err)
	}
	// Where the sink keeps them: "checkpoint table <name>".
	where := "checkpoints"
	if d := registry.Describe(p.Sink); d.Checkpoints != nil {
		where = d.Checkpoints(&p.Sink)
	}
	var recorded []RecordedRange
	for _, r := range j.Resolution.Ranges {
		if next, ok := cps[r.Partition]; ok {
			recorded = append(recorded, RecordedRange{Partition: r.Partition, Start: r.Start, End: r.End, Committed: next})
		}
	}
	switch {
	case j.fromSink && len(recorded) == 0:
		return &fault.SafetyError{Group: p.Group, Hint: fault.HintRestart, Reason: fmt.Sprintf("the sink's %s holds no checkpoint of this run of plan %s (ranges %s): there is nothing to resume from; the window may resolve to other ranges than the run that wrote it (an open-ended window grew): pass that run's ranges with --resolution FILE, or start over", where, p.Name, j.rangesText())}
	case j.fromSink:
		j.Fresh = false // resumeFromSink continues from them
		j.opts.Log.Info().Str("plan", p.Name).Str("group", p.Group).Int("partitions", len(recorded)).Msg("the group has no commits of this plan: continuing from the sink's checkpoints")
	case len(recorded) > 0:
		return (&ExpiredError{Group: p.Group, Plan: p.Name, Topic: j.Resolution.Topic, Where: "the sink's " + where, Recorded: recorded}).refusal()
	}
	return nil
}

func (j *Job) rangesText() string {
	s := make([]string, len(j.Resolution.Ranges))
	for i, r := range j.Resolution.Ranges {
		s[i] = fmt.Sprintf("%d [%d, %d)", r.Partition, r.Start, r.End)
	}
	return strings.Join(s, ", ")
}
