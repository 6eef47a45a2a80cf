package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner"
)

// commitForeign commits offset to group on topic/partition the way a
// consumer does: without replay's metadata.
func commitForeign(t *testing.T, addr, group, topic string, partition int, offset int64) {
	t.Helper()
	c := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 10 * time.Second}
	resp, err := c.OffsetCommit(context.Background(), &kafka.OffsetCommitRequest{GroupID: group, GenerationID: -1,
		Topics: map[string][]kafka.OffsetCommit{topic: {{Partition: partition, Offset: offset, Metadata: ""}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range resp.Topics[topic] {
		if pr.Error != nil {
			t.Fatal(pr.Error)
		}
	}
}

// After a reset the group holds nothing for the topic and the next run
// resolves afresh and replays the whole window again.
func TestResetThenFreshRun(t *testing.T) {
	env := newGroupTestEnv(t, 3, 600)
	if _, err := env.run(t, env.file, 0); err != nil {
		t.Fatal(err)
	}
	if pr := env.status(t, env.file); pr.State != runner.StateDone {
		t.Fatalf("before the reset: state %s, want done", pr.State)
	}
	code, out, errs := groupTestExec(t, "reset", "--yes", env.file)
	if code != exitOK || !strings.Contains(out, "reset group "+groupTestGroup) || !strings.Contains(out, "partitions [0 1 2] of this plan") {
		t.Fatalf("reset --yes exited %d:\n%s%s", code, out, errs)
	}
	pr := env.status(t, env.file)
	if pr.State != runner.StateNotStarted {
		t.Fatalf("after the reset: state %s, want not-started", pr.State)
	}
	for _, pp := range pr.Partitions {
		if pp.Committed != -1 {
			t.Errorf("after the reset: partition %d still committed at %d", pp.Partition, pp.Committed)
		}
	}
	job, err := env.run(t, env.file, 0)
	if err != nil {
		t.Fatalf("run after the reset: %v", err)
	}
	if !job.Fresh || job.Resolution.Total() != int64(env.records) {
		t.Fatalf("run after the reset: fresh %v with %d offsets, want a fresh run of %d", job.Fresh, job.Resolution.Total(), env.records)
	}
	if n := groupTestLines(t, env.out); n != env.records {
		t.Fatalf("the output has %d records, want %d", n, env.records)
	}
	if pr := env.status(t, env.file); pr.State != runner.StateDone {
		t.Fatalf("after the fresh run: state %s, want done", pr.State)
	}
	// Reset again, then once more with nothing left to delete: exit 0.
	if code, out, _ := groupTestExec(t, "reset", "--yes", env.file); code != exitOK || !strings.Contains(out, "reset group") {
		t.Fatalf("second reset exited %d:\n%s", code, out)
	}
	if code, out, _ := groupTestExec(t, "reset", "--yes", env.file); code != exitOK || !strings.Contains(out, "nothing to reset") {
		t.Fatalf("reset of an empty group exited %d:\n%s", code, out)
	}
}

// Replay never deletes offsets of a group that holds commits it did not
// make, on the plan's topic or any other.
func TestResetRefusesForeignGroup(t *testing.T) {
	for _, tc := range []struct {
		name, topic string
	}{
		{"same topic", "orders"},
		{"other topic", "payments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newGroupTestEnv(t, 2, 200)
			if _, err := env.run(t, env.file, 0); err != nil {
				t.Fatal(err)
			}
			if tc.topic != "orders" {
				c := &kafka.Client{Addr: kafka.TCP(env.sb.Addr), Timeout: 10 * time.Second}
				resp, err := c.CreateTopics(context.Background(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: tc.topic, NumPartitions: 1, ReplicationFactor: 1}}})
				if err != nil || resp.Errors[tc.topic] != nil {
					t.Fatalf("create topic %s: %v %v", tc.topic, err, resp)
				}
			}
			partition := 0
			if tc.topic == "orders" {
				partition = 1 // overwrite replay's commit, as a consumer sharing the group would
			}
			commitForeign(t, env.sb.Addr, groupTestGroup, tc.topic, partition, 7)
			before := env.status(t, env.file)
			code, out, errs := groupTestExec(t, "reset", "--yes", env.file)
			if code != exitRefused || !strings.Contains(errs, "replay did not make") {
				t.Fatalf("reset of a foreign group: exit %d, want %d:\n%s%s", code, exitRefused, out, errs)
			}
			after := env.status(t, env.file)
			for i := range before.Partitions {
				if after.Partitions[i].Committed != before.Partitions[i].Committed {
					t.Errorf("partition %d: commit changed from %d to %d", i, before.Partitions[i].Committed, after.Partitions[i].Committed)
				}
			}
			if after.State != runner.StateForeign {
				t.Errorf("status: state %s, want foreign", after.State)
			}
			want := fmt.Sprintf("%s/%d (offset 7)", tc.topic, partition)
			code, out, errs = groupTestExec(t, "status", env.file)
			if code != exitOK || !strings.Contains(out, "foreign: group "+groupTestGroup+" has commits on "+want) || strings.Contains(out, "replay reset") {
				t.Errorf("status of a foreign group: exit %d, want the foreign state naming %s and no reset advice:\n%s%s", code, want, out, errs)
			}
			// run refuses the group alike, naming the foreign commit.
			code, out, errs = groupTestExec(t, "run", "--yes", "--restart", env.file)
			if code != exitRefused || !strings.Contains(errs, "commit on "+want+" that replay did not make") {
				t.Fatalf("run in a foreign group: exit %d, want %d naming %s:\n%s%s", code, exitRefused, want, out, errs)
			}
		})
	}
}

// Without --yes, reset asks on a terminal; with stdin not a terminal it
// refuses as a usage error, even when the group name is piped in.
func TestResetNeedsYesWithoutTerminal(t *testing.T) {
	env := newGroupTestEnv(t, 2, 200)
	if _, err := env.run(t, env.file, 0); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	a := newApp(&out, &errs)
	root := a.root()
	root.SetArgs([]string{"reset", env.file})
	root.SetIn(strings.NewReader(groupTestGroup + "\n"))
	code := a.exitCode(root.ExecuteContext(context.Background()))
	if code != exitInvalid || !strings.Contains(errs.String(), "--yes") {
		t.Fatalf("reset without --yes on a pipe: exit %d, want %d:\n%s%s", code, exitInvalid, out.String(), errs.String())
	}
	if pr := env.status(t, env.file); pr.State != runner.StateDone {
		t.Fatalf("after the refused reset: state %s, want done (nothing deleted)", pr.State)
	}
}

// A group with a live member is refused (exit 3) before anything is deleted.
func TestResetRefusesActiveGroup(t *testing.T) {
	env := newGroupTestEnv(t, 2, 200)
	if _, err := env.run(t, env.file, 0); err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{env.sb.Addr}, GroupID: groupTestGroup, Topic: "orders",
		HeartbeatInterval: 200 * time.Millisecond, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = r.FetchMessage(ctx) }() // joins the group; never commits
	var state string
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, func() bool {
		state = env.status(t, env.file).GroupState
		return state == "Stable"
	}, func() string { return fmt.Sprintf("the consumer did not join the group: state %q", state) })
	code, out, errs := groupTestExec(t, "reset", "--yes", env.file)
	if code != exitRefused || !strings.Contains(errs, "active members") {
		t.Fatalf("reset of a group with a live member: exit %d, want %d:\n%s%s", code, exitRefused, out, errs)
	}
	if pr := env.status(t, env.file); pr.State != runner.StateDone {
		t.Fatalf("after the refused reset: state %s, want done (nothing deleted)", pr.State)
	}
}

func TestConfirmReset(t *testing.T) {
	for _, tc := range []struct {
		typed string
		want  bool
	}{
		{"replay.test\n", true},
		{"  replay.test  \n", true},
		{"replay.test", true}, // EOF without a newline
		{"yes\n", false},
		{"replay.tes\n", false},
		{"\n", false},
		{"", false}, // the input ended: said so
	} {
		var prompt bytes.Buffer
		got, err := confirmReset(t.Context(), strings.NewReader(tc.typed), &prompt, "replay.test")
		if tc.typed == "" {
			if err == nil || !strings.Contains(err.Error(), "the input ended before an answer") {
				t.Errorf("no input: %v, want the input's end named", err)
			}
		} else if err != nil || got != tc.want {
			t.Errorf("typed %q: confirmed %v (%v), want %v", tc.typed, got, err, tc.want)
		}
		if !strings.Contains(prompt.String(), "replay.test") {
			t.Errorf("the prompt must name the group: %q", prompt.String())
		}
	}
}
