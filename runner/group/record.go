package group

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
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
// ran it (runner.Options.StateDir) in addition to the replay group's commits: the
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
	// OfTopicSet is set for the record of one topic of a plan of several
	// (plan.ForTopic): each topic has its own record.
	OfTopicSet bool `json:"of_topic_set,omitempty"`
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

// Progress reports whether the record stands for progress of a run (not a
// reset).
func (r *RunRecord) Progress() bool { return r != nil && r.State != RecordReset }

// recordPath is the file of the record of (cluster, group, fingerprint)
// under dir: runs/<group>-<hash>.json, the group sanitized for a file name;
// topic is "" but for a topic of a plan of several, whose topics have
// a record each.
func recordPath(dir, clusterID, group, fp, topic string) string {
	key := clusterID + "\x00" + group + "\x00" + fp
	if topic != "" {
		key += "\x00" + topic
	}
	h := sha256.Sum256([]byte(key))
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

// setTopic is topic when of is set, "" otherwise.
func setTopic(of bool, topic string) string {
	if of {
		return topic
	}
	return ""
}

// ReadRecord reads the record of p's run on the cluster from dir; nil when
// there is none (or dir is "").
func ReadRecord(dir, clusterID string, p *plan.Plan) (*RunRecord, error) {
	if dir == "" {
		return nil, nil
	}
	path := recordPath(dir, clusterID, p.Group, p.Fingerprint(), setTopic(p.OfTopicSet(), p.Source.Topic))
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

// Write stores r in dir atomically (a temporary file renamed over it).
func (r *RunRecord) Write(dir string) error {
	r.Format, r.UpdatedAt = RecordFormat, time.Now().UTC()
	r.path = recordPath(dir, r.ClusterID, r.Group, r.Fingerprint, setTopic(r.OfTopicSet, r.Topic))
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
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	err = cmp.Or(err, tmp.Close())
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), r.path)
}

// ExpiredError is the refusal of a run whose replay group holds no commit
// for partitions where the plan's progress is recorded elsewhere (the
// local run record, the sink's checkpoint table).
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
	ids, parts := make([]int32, len(e.Recorded)), make([]string, len(e.Recorded))
	for i, r := range e.Recorded {
		ids[i] = r.Partition
		if r.End >= 0 {
			parts[i] = fmt.Sprintf("%d [%d, %d) at %d", r.Partition, r.Start, r.End, r.Committed)
		} else {
			parts[i] = fmt.Sprintf("%d at %d", r.Partition, r.Committed)
		}
	}
	return fmt.Sprintf("it has no commits for partitions %v of %s, but %s records progress of plan %s there (partition [range) at next offset: %s): "+
		"the group's committed offsets probably expired (Kafka deletes the offsets of a group that stayed empty for offsets.retention.minutes, 7 days by default) or were deleted; "+
		"starting over would deliver the window again",
		ids, e.Topic, e.Where, e.Plan, strings.Join(parts, ", "))
}

// Refusal is e as the *fault.SafetyError a run returns (exit 3), with its hint.
func (e *ExpiredError) Refusal() error {
	return &fault.SafetyError{Group: e.Group, Reason: e.Error(), Hint: fault.HintExpired, Err: e}
}

// RecordRefusal refuses to start p over partitions its run record rec
// holds progress for while the group has no commit for them.
func RecordRefusal(p *plan.Plan, rec *RunRecord, missing []RecordedRange) error {
	return (&ExpiredError{Group: p.Group, Plan: p.Name, Topic: p.Source.Topic, Recorded: missing,
		Where: fmt.Sprintf("the local run record %s (%s, written %s)", rec.path, rec.State, rec.UpdatedAt.UTC().Format(time.RFC3339))}).Refusal()
}
