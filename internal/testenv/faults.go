package testenv

import (
	"errors"
	"math/rand/v2"
	"slices"
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
	FaultConcurrentTxns      FaultKind = "CONCURRENT_TRANSACTIONS"
	FaultDrop                FaultKind = "dropped connection"
	FaultStall               FaultKind = "stall"
)

// AllFaultKinds lists every kind that the source side's requests draw
// (each is injected into a plain run).
var AllFaultKinds = []FaultKind{FaultNotLeader, FaultLeaderNotAvailable, FaultUnknownTopic, FaultRequestTimedOut,
	FaultNotCoordinator, FaultLoadInProgress, FaultCoordinatorNotAvail, FaultDrop, FaultStall}

// EveryFaultKind is AllFaultKinds and the kinds only the transaction APIs
// draw: every kind, for a run whose sink produces in transactions to the
// faulted cluster.
var EveryFaultKind = append(slices.Clip(AllFaultKinds), FaultConcurrentTxns)

// groupKeys are the requests of a group's member (the hold of a plain run,
// a --join member) and of the group's checks: the coordinator answers them.
var groupKeys = []kmsg.Key{kmsg.FindCoordinator, kmsg.OffsetCommit, kmsg.OffsetFetch,
	kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup}

// txnKeys are the requests of a transactional producer (the exactly-once
// kafka sink) besides Produce: InitProducerID, AddPartitionsToTxn,
// AddOffsetsToTxn and EndTxn go to the transaction coordinator,
// TxnOffsetCommit to the group coordinator.
var txnKeys = []kmsg.Key{kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.TxnOffsetCommit, kmsg.EndTxn}

// TxnKeys returns the transaction APIs (txnKeys) and Produce.
func TxnKeys() []kmsg.Key { return append(slices.Clone(txnKeys), kmsg.Produce) }

// GroupKeys returns the requests of a group's member and of the group's
// checks (groupKeys).
func GroupKeys() []kmsg.Key { return slices.Clone(groupKeys) }

// faultKeys are the requests each error kind is injected into: the ones a
// broker answers with that code (Kafka's own handlers: a coordinator that
// moved or loads answers every coordinator request so, a transaction
// coordinator completing the previous transaction's markers answers
// CONCURRENT_TRANSACTIONS; REQUEST_TIMED_OUT on Produce, OffsetCommit and
// TxnOffsetCommit comes after the broker applied the request, as a
// replication timeout does).
var faultKeys = map[FaultKind][]kmsg.Key{
	FaultNotLeader:           {kmsg.Fetch, kmsg.ListOffsets, kmsg.Produce},
	FaultLeaderNotAvailable:  {kmsg.Fetch, kmsg.ListOffsets, kmsg.Metadata},
	FaultUnknownTopic:        {kmsg.Fetch, kmsg.ListOffsets},
	FaultRequestTimedOut:     {kmsg.Fetch, kmsg.ListOffsets, kmsg.OffsetCommit, kmsg.Produce, kmsg.TxnOffsetCommit},
	FaultNotCoordinator:      append(slices.Clip(groupKeys), txnKeys...),
	FaultLoadInProgress:      append(slices.Clip(groupKeys), txnKeys...),
	FaultCoordinatorNotAvail: append(slices.Clip(groupKeys), txnKeys...),
	FaultConcurrentTxns:      {kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn},
}

// topLevel are the requests whose error code is the answer's, not a
// partition's, in every version. FindCoordinator and OffsetFetch are not:
// their top-level code exists only up to v3 and v7, and a later answer
// carries it per coordinator key and per group, where kfake's entity
// faults put it (a top-level fault answered them with no coordinator and
// no group at all, which a client reads as "no offsets"); AddPartitionsToTxn
// and TxnOffsetCommit answer per partition.
var topLevel = map[kmsg.Key]bool{kmsg.JoinGroup: true, kmsg.SyncGroup: true, kmsg.Heartbeat: true, kmsg.LeaveGroup: true,
	kmsg.InitProducerID: true, kmsg.AddOffsetsToTxn: true, kmsg.EndTxn: true}

var faultCodes = map[FaultKind]*kerr.Error{
	FaultNotLeader: kerr.NotLeaderForPartition, FaultLeaderNotAvailable: kerr.LeaderNotAvailable,
	FaultUnknownTopic: kerr.UnknownTopicOrPartition, FaultRequestTimedOut: kerr.RequestTimedOut,
	FaultNotCoordinator: kerr.NotCoordinator, FaultLoadInProgress: kerr.CoordinatorLoadInProgress,
	FaultCoordinatorNotAvail: kerr.CoordinatorNotAvailable, FaultConcurrentTxns: kerr.ConcurrentTransactions,
}

// connKeys are the requests dropped connections and stalls hit: every
// request of the source side of a run, the group member's included, and
// every request of a transactional producer.
var connKeys = slices.Concat([]kmsg.Key{kmsg.Fetch, kmsg.ListOffsets, kmsg.Metadata}, groupKeys, txnKeys, []kmsg.Key{kmsg.Produce})

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
	// EachKey applies EachKind to every request key of every kind: each
	// request the kind applies to (JoinGroup, Heartbeat, ...) is failed
	// at least once.
	EachKey bool
	// Keys, when set, limits the faults to these requests.
	Keys []kmsg.Key
}

// draw is one kind's draws on one request key (EachKey), or on all (0).
type draw struct {
	kind FaultKind
	key  kmsg.Key
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
	cfg     FaultsConfig
	seen    map[draw]int // matching requests, by kind (and key with EachKey)
	hit     map[draw]bool
	byKey   map[kmsg.Key]int64
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
	f := &Faults{c: c, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed)), cfg: cfg, byKind: map[FaultKind][]*kfake.FaultHandle{},
		seen: map[draw]int{}, hit: map[draw]bool{}, byKey: map[kmsg.Key]int64{}}
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
			for _, key := range f.only(faultKeys[k]) {
				h := c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Err: faultCodes[k], Count: -1,
					TopLevel: topLevel[key], When: func(kmsg.Request) bool { return f.draw(k, key) }})
				f.handles = append(f.handles, h)
				f.byKind[k] = append(f.byKind[k], h)
			}
		}
	}
	return f
}

// control installs fn on every request of connKeys, for the drawn share.
func (f *Faults) control(k FaultKind, fn func(kmsg.Request) (kmsg.Response, error, bool)) {
	for _, key := range f.only(connKeys) {
		f.c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			f.c.KeepControl()
			if !f.draw(k, key) {
				return nil, nil, false
			}
			return fn(req)
		})
	}
}

// only is keys limited to FaultsConfig.Keys.
func (f *Faults) only(keys []kmsg.Key) []kmsg.Key {
	if f.cfg.Keys == nil {
		return keys
	}
	return slices.DeleteFunc(slices.Clone(keys), func(k kmsg.Key) bool { return !slices.Contains(f.cfg.Keys, k) })
}

// draw decides whether one request (key) fails with a fault of kind k.
func (f *Faults) draw(k FaultKind, key kmsg.Key) bool {
	if f.stopped.Load() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d := draw{kind: k}
	if f.cfg.EachKey {
		d.key = key
	}
	f.seen[d]++
	fail := f.rng.Float64() < f.cfg.Rate || f.cfg.EachKind > 0 && !f.hit[d] && f.seen[d] >= f.cfg.EachKind
	f.hit[d] = f.hit[d] || fail
	if fail {
		f.byKey[key]++
	}
	return fail
}

// InjectedKey is how many faults, of any kind, were injected into
// requests of key so far.
func (f *Faults) InjectedKey(key kmsg.Key) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byKey[key]
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
