package testenv

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FaultKind is one kind of failure Faults injects.
type FaultKind string

// Fault kinds: a retriable Kafka error code in the answer, a dropped
// connection, or a request left unanswered for FaultsConfig.Stall.
const (
	FaultNotLeader           FaultKind = "NOT_LEADER_OR_FOLLOWER"
	FaultLeaderNotAvailable  FaultKind = "LEADER_NOT_AVAILABLE"
	FaultUnknownTopic        FaultKind = "UNKNOWN_TOPIC_OR_PARTITION"
	FaultRequestTimedOut     FaultKind = "REQUEST_TIMED_OUT"
	FaultNotCoordinator      FaultKind = "NOT_COORDINATOR"
	FaultLoadInProgress      FaultKind = "COORDINATOR_LOAD_IN_PROGRESS"
	FaultCoordinatorNotAvail FaultKind = "COORDINATOR_NOT_AVAILABLE"
	FaultDrop                FaultKind = "dropped connection"
	FaultStall               FaultKind = "stall"
)

// AllFaultKinds lists every kind.
var AllFaultKinds = []FaultKind{FaultNotLeader, FaultLeaderNotAvailable, FaultUnknownTopic, FaultRequestTimedOut,
	FaultNotCoordinator, FaultLoadInProgress, FaultCoordinatorNotAvail, FaultDrop, FaultStall}

// faultKeys are the requests each error kind is injected into: the ones a
// broker answers with that code.
var faultKeys = map[FaultKind][]kmsg.Key{
	FaultNotLeader:           {kmsg.Fetch, kmsg.ListOffsets},
	FaultLeaderNotAvailable:  {kmsg.Fetch, kmsg.ListOffsets, kmsg.Metadata},
	FaultUnknownTopic:        {kmsg.Fetch, kmsg.ListOffsets},
	FaultRequestTimedOut:     {kmsg.Fetch, kmsg.ListOffsets, kmsg.OffsetCommit},
	FaultNotCoordinator:      {kmsg.FindCoordinator, kmsg.OffsetCommit, kmsg.OffsetFetch},
	FaultLoadInProgress:      {kmsg.FindCoordinator, kmsg.OffsetCommit, kmsg.OffsetFetch},
	FaultCoordinatorNotAvail: {kmsg.FindCoordinator, kmsg.OffsetCommit, kmsg.OffsetFetch},
}

var faultCodes = map[FaultKind]*kerr.Error{
	FaultNotLeader: kerr.NotLeaderForPartition, FaultLeaderNotAvailable: kerr.LeaderNotAvailable,
	FaultUnknownTopic: kerr.UnknownTopicOrPartition, FaultRequestTimedOut: kerr.RequestTimedOut,
	FaultNotCoordinator: kerr.NotCoordinator, FaultLoadInProgress: kerr.CoordinatorLoadInProgress,
	FaultCoordinatorNotAvail: kerr.CoordinatorNotAvailable,
}

// connKeys are the requests dropped connections and stalls hit: every
// request of the source side of a run.
var connKeys = []kmsg.Key{kmsg.Fetch, kmsg.ListOffsets, kmsg.Metadata, kmsg.FindCoordinator, kmsg.OffsetCommit, kmsg.OffsetFetch}

// FaultsConfig says what Faults injects.
type FaultsConfig struct {
	// Rate is the share of matching requests that fail, e.g. 0.05.
	Rate float64
	// Kinds are the faults injected (each request draws at most one).
	Kinds []FaultKind
	// Stall is how long a stalled request waits before the broker handles
	// it (after the client gave up on it, for a stall above its timeout).
	Stall time.Duration
	// Seed makes the draws repeatable (default 1).
	Seed uint64
	// EachKind makes sure every kind is injected at least once: a kind
	// none of whose first EachKind-1 matching requests drew a fault fails
	// the next one. 0: draws only.
	EachKind int
}

// Faults injects failures into a kfake cluster's answers at a rate, through
// its fault table (Kafka error codes, by request) and control hooks
// (ControlKey with KeepControl: a dropped connection; SleepControl: a
// stall), until Stop.
type Faults struct {
	c       *kfake.Cluster
	stopped atomic.Bool
	mu      sync.Mutex
	rng     *rand.Rand
	rate    float64
	each    int
	seen    map[FaultKind]int // matching requests, by kind
	hit     map[FaultKind]bool
	handles []*kfake.FaultHandle
	byKind  map[FaultKind][]*kfake.FaultHandle
	drops   atomic.Int64
	stalls  atomic.Int64
}

// NewFaults starts injecting cfg's faults into c; Stop ends it.
func NewFaults(c *kfake.Cluster, cfg FaultsConfig) *Faults {
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	f := &Faults{c: c, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed)), rate: cfg.Rate, byKind: map[FaultKind][]*kfake.FaultHandle{},
		each: cfg.EachKind, seen: map[FaultKind]int{}, hit: map[FaultKind]bool{}}
	for _, k := range cfg.Kinds {
		switch k {
		case FaultDrop:
			f.control(k, func(kmsg.Request) (kmsg.Response, error, bool) {
				f.drops.Add(1)
				return nil, errors.New("testenv: connection dropped"), true
			})
		case FaultStall:
			f.control(k, func(kmsg.Request) (kmsg.Response, error, bool) {
				f.stalls.Add(1)
				c.SleepControl(func() { time.Sleep(cfg.Stall) })
				return nil, nil, false // then answered, to a client that may have left
			})
		default:
			for _, key := range faultKeys[k] {
				h := c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Err: faultCodes[k], Count: -1,
					TopLevel: key == kmsg.FindCoordinator || key == kmsg.OffsetFetch, When: func(kmsg.Request) bool { return f.draw(k) }})
				f.handles = append(f.handles, h)
				f.byKind[k] = append(f.byKind[k], h)
			}
		}
	}
	return f
}

// control installs fn on every request of connKeys, for the drawn share.
func (f *Faults) control(k FaultKind, fn func(kmsg.Request) (kmsg.Response, error, bool)) {
	for _, key := range connKeys {
		f.c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			f.c.KeepControl()
			if !f.draw(k) {
				return nil, nil, false
			}
			return fn(req)
		})
	}
}

// draw decides whether one request fails with a fault of kind k.
func (f *Faults) draw(k FaultKind) bool {
	if f.stopped.Load() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen[k]++
	fail := f.rng.Float64() < f.rate || f.each > 0 && !f.hit[k] && f.seen[k] >= f.each
	f.hit[k] = f.hit[k] || fail
	return fail
}

// Injected is how many faults were injected so far, all kinds together.
func (f *Faults) Injected() int64 {
	n := f.drops.Load() + f.stalls.Load()
	for _, h := range f.handles {
		n += int64(h.Hits())
	}
	return n
}

// InjectedKind is how many faults of kind k were injected so far.
func (f *Faults) InjectedKind(k FaultKind) int64 {
	switch k {
	case FaultDrop:
		return f.drops.Load()
	case FaultStall:
		return f.stalls.Load()
	}
	var n int64
	for _, h := range f.byKind[k] {
		n += int64(h.Hits())
	}
	return n
}

// Stop ends the injection (requests after it are answered normally).
func (f *Faults) Stop() {
	f.stopped.Store(true)
	for _, h := range f.handles {
		h.Remove()
	}
}
