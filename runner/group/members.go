package group

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/source"
)

// holdPrefix starts the client ID of a process holding its plan's replay
// group (Hold); the rest names the plan's fingerprint, the host, the
// process ID, the start time and the process's machine (LocalMachine),
// separated by holdSep.
const (
	holdPrefix = "replay-hold"
	holdSep    = "/"
)

// Holder is the process holding a plan's replay group, as its client ID
// names it.
type Holder struct {
	Fingerprint, Host string
	PID               int
	Since             time.Time
	// Machine tells apart processes whose PIDs can be compared: a hash of
	// the kernel's boot ID and the PID namespace (LocalMachine); "" where
	// they are unknown (not Linux, or a holder of an earlier version).
	Machine  string
	memberID string
}

// ClientID is the client ID a holder joins the group with.
func (h Holder) ClientID() string {
	return strings.Join([]string{holdPrefix, h.Fingerprint, h.Host, strconv.Itoa(h.PID), h.Since.UTC().Format(time.RFC3339Nano), h.Machine}, holdSep)
}

// LocalMachine identifies the set of processes this process can see by
// PID: a short hash of /proc/sys/kernel/random/boot_id (changes at every
// boot) and of the PID namespace (/proc/self/ns/pid: each container has
// its own). Two containers may share a host name (a pod's name reused, a
// --hostname flag) while a PID of one means nothing in the other; "" when
// either is unknown.
var LocalMachine = sync.OnceValue(func() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(string(boot)) + " " + ns))
	return hex.EncodeToString(sum[:6])
})

// parseHolder decodes a holder's client ID; ok is false for any other.
func parseHolder(m source.GroupMember) (Holder, bool) {
	f := strings.Split(m.ClientID, holdSep)
	if len(f) == 5 {
		f = append(f, "") // a holder of an earlier version: no machine
	}
	if len(f) != 6 || f[0] != holdPrefix {
		return Holder{}, false
	}
	pid, err := strconv.Atoi(f[3])
	since, err2 := time.Parse(time.RFC3339Nano, f[4])
	if err != nil || err2 != nil {
		return Holder{}, false
	}
	return Holder{Fingerprint: f[1], Host: f[2], PID: pid, Since: since, Machine: f[5], memberID: m.MemberID}, true
}

func (h Holder) String() string {
	return fmt.Sprintf("host %s, pid %d, since %s", h.Host, h.PID, h.Since.UTC().Format(time.RFC3339))
}

// ErrHeld is in the refusal of a group another run holds (errors.Is):
// it lets go when that run ends, or, when it died, after
// JoinSessionTimeout.
var ErrHeld = errors.New("another run holds the group")

// heldError is the refusal of a group another process holds.
func heldError(group string, h Holder) *fault.SafetyError {
	return &fault.SafetyError{Group: group, Err: ErrHeld, Reason: fmt.Sprintf("a run of this plan holds it (%s): two runs of one plan at once would replay the same interval twice; wait for it to end (a holder that died lets go after %s)", h, JoinSessionTimeout)}
}

// CheckIdle refuses (*fault.SafetyError) a group that has members or is
// rebalancing (DescribeGroups, ConsumerGroupDescribe): a state other than
// Empty or Dead is a refusal, and so is an error describing the group.
func CheckIdle(ctx context.Context, c *source.Cluster, group string) error {
	return CheckMembers(ctx, c, group, "")
}

// CheckMembers refuses a group that has members or is rebalancing,
// unless joinID is set and every member is a joined process of this plan
// with that client ID (JoinClientID, or a Hold's). A group another run
// holds (Hold) is refused naming the holder. A group whose state cannot be
// told is refused too, and so is a group of KIP-848's consumer protocol
// that is not Empty: replay's members are classic ones.
func CheckMembers(ctx context.Context, c *source.Cluster, group, joinID string) error {
	g, err := c.DescribeGroup(ctx, group)
	if err != nil || g == nil {
		return err
	}
	if g.Err != nil {
		return &fault.SafetyError{Group: group, Reason: fmt.Sprintf("cannot tell whether it has live members (%v): use a dedicated, unused group name such as replay.<plan-name>", g.Err)}
	}
	if strings.EqualFold(g.State, "Empty") || strings.EqualFold(g.State, "Dead") || g.State == "" {
		return nil
	}
	if g.Protocol == "consumer" { // replay's own members are classic ones
		return &fault.SafetyError{Group: group, Reason: fmt.Sprintf("it is a consumer group of the new consumer protocol (KIP-848), %s with %d member(s): it looks like a live consumer group; a replay must use a dedicated group nobody else consumes with (e.g. replay.<plan-name>)", g.State, len(g.Members))}
	}
	self, holding := parseHolder(source.GroupMember{ClientID: joinID})
	// later is a run of the same plan that joined after this process took
	// its hold: it refuses itself and leaves.
	later := func(m source.GroupMember) bool {
		h, ok := parseHolder(m)
		return ok && holding && m.ClientID != joinID && h.Fingerprint == self.Fingerprint && h.Since.After(self.Since)
	}
	members := slices.DeleteFunc(slices.Clone(g.Members), later)
	if len(g.Members) > 0 && len(members) == 0 {
		return nil // only later runs of this plan, leaving
	}
	for _, m := range members {
		if h, ok := parseHolder(m); ok && m.ClientID != joinID {
			return heldError(group, h)
		}
	}
	if joinID == "" || len(members) == 0 {
		return &fault.SafetyError{Group: group, Reason: fmt.Sprintf("it is %s with active members: it looks like a live consumer group; a replay must use a dedicated group nobody else consumes with (e.g. replay.<plan-name>)", g.State)}
	}
	for _, m := range members {
		if m.ClientID != joinID {
			return &fault.SafetyError{Group: group, Hint: fault.HintJoinedOnly, Reason: fmt.Sprintf("it is %s with a member that is not a joined process of this plan (client id %q, host %s): it looks like a live consumer group, or a process of another plan; use a dedicated group", g.State, m.ClientID, m.ClientHost)}
		}
	}
	return nil
}

// Standing is what the coordinator says of a group now (DescribeGroups).
type Standing struct {
	// State is the coordinator's state of the group (Empty, Stable, ...).
	State string
	// Holder is the plain run that holds the group (Holder.String), ""
	// when none does: no members, or --join members.
	Holder string
	// HolderGone is true when Holder ran on this machine (LocalMachine)
	// in a process that no longer exists (killed).
	HolderGone bool
	// Members is the number of the group's members.
	Members int
}

// State returns where group stands now.
func State(ctx context.Context, c *source.Cluster, group string) (Standing, error) {
	g, err := c.DescribeGroup(ctx, group)
	switch {
	case err != nil:
		return Standing{}, err
	case g == nil:
		return Standing{}, fmt.Errorf("describe group %s: no answer for it", group)
	case g.Err != nil:
		return Standing{}, fmt.Errorf("describe group %s: %w", group, g.Err)
	}
	st := Standing{State: g.State, Members: len(g.Members)}
	for _, m := range g.Members {
		if h, ok := parseHolder(m); ok {
			st.Holder = h.String()
			st.HolderGone = h.Machine != "" && h.Machine == LocalMachine() && !processExists(h.PID)
		}
	}
	return st, nil
}
