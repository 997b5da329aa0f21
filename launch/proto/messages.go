package proto

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// The agent link's message types, every one of them. Down: root to agent
// (through the tree). Up: agent to root. Numbers are part of the protocol
// (docs/protocol.md): never reuse one.
const (
	MSpec        uint8 = 1  // down: job spec and this node's ranks (nodeSpec)
	MStdin       uint8 = 2  // down: bytes for rank 0's stdin
	MStdinClose  uint8 = 3  // down: end of rank 0's stdin
	MSignal      uint8 = 4  // down: deliver a signal to every rank
	MTerminate   uint8 = 5  // down: SIGTERM every rank, SIGKILL after a delay
	MKill        uint8 = 6  // down: SIGKILL every rank now
	MCollResult  uint8 = 7  // down: the result of a collective
	MShutdown    uint8 = 8  // down: the job is over; clean up and exit (a successor's: the replicas it added, which wait for the final status first)
	MPing        uint8 = 9  // both: heartbeat request
	MPong        uint8 = 10 // both: heartbeat answer
	MOutputAck   uint8 = 11 // down: output frames written, cumulative (outq.go)
	MRoute       uint8 = 12 // down: {dst, type, payload} for agent dst
	MBcast       uint8 = 13 // down: {type, payload} for every agent of the subtree
	MBackup      uint8 = 14 // down: {idx, name, addr}: connect to your backup parent
	MPrestage    uint8 = 15 // down: one chunk of the prestaged program
	MAdopted     uint8 = 16 // down: the successor root took the link
	MReplicas    uint8 = 17 // down: the replica agents' addresses (peerAddr...)
	MResyncReq   uint8 = 18 // down (broadcast): report your ranks and contributions again
	MSuspend     uint8 = 19 // down (broadcast): recovery: suspend your ranks (recMsg: epoch)
	MRespawn     uint8 = 20 // down: recovery: start rank again as incarnation (recMsg)
	MPatch       uint8 = 21 // down (broadcast): recovery: node-table rows (recMsg: epoch, version, rows)
	MResume      uint8 = 22 // down (broadcast): recovery: let your ranks go on (recMsg: epoch, version)
	MRestartJob  uint8 = 23 // down (broadcast): recovery: end your ranks and start them again (recMsg: epoch, restarts)
	MFenced      uint8 = 24 // down, on an adoption request's connection: your incarnation was declared lost: kill your ranks and exit (int: the incarnation)
	MRefused     uint8 = 25 // down, on a standby link: the backup parent will not take you (string: why)
	MRoutes      uint8 = 26 // down: agents now reached through one of your children (Routes)
	MSwitch      uint8 = 27 // down: to a backup parent (int: a standby child): tell it to switch now; on the standby link (int: -1): your parent was declared lost
	MSuspect     uint8 = 28 // down (int: a child's index): gossip finds it dead: end its link as silent if it was quiet for a heartbeat interval + ConfirmQuiet
	MHostReplica uint8 = 29 // down (ReplicaSpec): host a root replica from now on (a successor refilling the group)
	MFallbacks   uint8 = 30 // down (Peers): the parents to try, in order, when the parent and the backup are lost (the grandparent; the root, index -1)

	MStarted      uint8 = 32 // up: ranks started, with pids
	MOutput       uint8 = 33 // up: complete lines of one rank's stream, numbered
	MExit         uint8 = 34 // up: a rank ended
	MContrib      uint8 = 35 // up: a node's contribution to a collective
	MAbort        uint8 = 36 // up: a rank called Abort
	MStdinAck     uint8 = 37 // up: one stdin chunk was written
	MDone         uint8 = 38 // up: the agent cleaned up and is about to exit
	MHello        uint8 = 40 // up, first frame on a new connection: who is calling
	MFrom         uint8 = 41 // up: {src, type, payload} relayed from agent src
	MChildUp      uint8 = 42 // up: a child connected back (childUp)
	MChildFailed  uint8 = 43 // up: a child could not be started (childFailed)
	MChildGone    uint8 = 44 // up: a child's link ended (childFailed)
	MBackupUp     uint8 = 45 // up: the link to my backup parent is up (int: its index)
	MReplicaUp    uint8 = 46 // up: {name, raft address} of a replica agent, ready to join the group
	MOutputResync uint8 = 47 // up: {first}: the agent's output frames from first on follow, again
	MSuspended    uint8 = 48 // up: recovery: every rank of mine is suspended (recMsg: epoch)
	MRespawned    uint8 = 49 // up: recovery: a respawned rank published its I-tuple (recMsg: rank, incarnation, addr)
	MPatched      uint8 = 50 // up: recovery: my ranks hold the patched table (recMsg: epoch, version)
	MResumed      uint8 = 51 // up: recovery: my ranks go on (recMsg: epoch)
	MRestarted    uint8 = 52 // up: recovery: my ranks were started again (recMsg: epoch)
	MPMIInit      uint8 = 53 // up: a rank initialized PMI-1 (recMsg: rank), under --restart rank only
	MAdoptMe      uint8 = 54 // up, on a standby link: my parent is lost: take me as your child (Reparent)
	MReparented   uint8 = 55 // up: I took a standby child as my child (Reparent)
	MRankProto    uint8 = 56 // up: a rank opened the rank protocol (recMsg: rank), under --restart rank only
	MTableHeld    uint8 = 58 // up, on a resync: the node table my ranks hold (CollResult: OpPublish, its values as patched)
	MRingResult   uint8 = 59 // down, to one child: a ring's answer for its subtree (CollResult with only the values its ranks' neighbours gave)
	MRingAsk      uint8 = 60 // up: a ring's answer lacked values my ranks need (RingAsk); the root answers with 7, to this agent
	MRingRecall   uint8 = 61 // down (broadcast): send up the values you hold of these ranks of a ring (RingAsk)
	MRingValues   uint8 = 62 // up: the answer to 61: the values this agent holds of the ranks asked (CollResult, sparse; none: empty)
)

// NodeSpec is what an agent receives first: the job and its node's share.
type NodeSpec struct {
	JobID     string
	Argv      []string
	Env       []string
	Wdir      string
	Size      int
	KillAfter time.Duration
	Heartbeat time.Duration
	Node      string
	NodeID    int
	Ranks     []int // global ranks on this node, ascending

	ProcessMapping string // PMI_process_mapping of the whole job

	// The launch tree: set for an agent that listens for its children and
	// its standby links (Tree), with how to start its children.
	Tree     bool
	Launch   LaunchSpec
	Children []ChildSpec

	Prestage bool // the program was prestaged: run the node-local copy

	// Replica, if JobDir is set, makes the agent host a root replica.
	Replica ReplicaSpec
	// Addr is how the agent's parent reaches it (its IP), for the
	// addresses it advertises.
	Addr string
	// Survive: the job has a replicated root; the agent outlives its
	// session, and (RootChild) a child of the root outlives the root.
	Survive, RootChild bool

	// Apps lists the programs of an MPMD job in rank order (empty: Argv,
	// Env and Wdir for every rank). Bind is --bind-to (none, core or
	// socket; "" is none); BindShare lets ranks share cores (--oversubscribe).
	Apps      []App
	Bind      string
	BindShare bool

	// Restart is the restart policy (--restart: "none", "rank", "job").
	Restart string

	// Relaunch, if set, is an agent started again on its node after the
	// one before was lost (launch/agent/relaunch.go): it starts no rank by itself.
	Relaunch *RelaunchSpec

	// Gossip, if set, has the agent join the job's gossip cluster
	// (membership; launch/agent/gossip.go).
	Gossip *GossipSpec

	// Timing is the failure detectors' bounds beyond Heartbeat, for tests
	// (the zero value, production's, is what ftlaunch run sends).
	Timing Timing
	// MPI is what the ranks are served (--mpi): "" PMI-1, and PMIx to
	// programs that use it; "pmi1"; "pmix" (both, to every rank); "none".
	// MPIName names it.
	MPI string
	// RootMerge: the agents combine no collective (FTLAUNCH_COLL_ROOT_MERGE,
	// for make bench-coll's comparison only): each sends its ranks' part
	// up alone, every value of a ring too, and the root merges them all.
	RootMerge bool
}

// GossipSpec is how an agent joins the job's gossip cluster: the job's
// gossip secret (the key is derived from it) and the root's member, at
// Port on one of Hosts.
type GossipSpec struct {
	Secret []byte
	Hosts  []string
	Port   int
}

// Template is the job's part of s, what every agent a root starts is told
// alike (its node's part, the launch tree's and the replica's, the gossip
// cluster and prestaging left out): a successor root's, from the
// NodeSpec its own agent was given, as the front-end's, from its options.
func (s *NodeSpec) Template() NodeSpec {
	return NodeSpec{
		JobID: s.JobID, Argv: s.Argv, Env: s.Env, Wdir: s.Wdir, Size: s.Size, KillAfter: s.KillAfter, Heartbeat: s.Heartbeat,
		ProcessMapping: s.ProcessMapping, Launch: s.Launch, Apps: s.Apps, Bind: s.Bind, BindShare: s.BindShare,
		Restart: s.Restart, Timing: s.Timing, MPI: s.MPI, RootMerge: s.RootMerge,
	}
}

func (s *NodeSpec) Encode() []byte {
	var e wire.Encoder
	e.String(s.JobID).Strings(s.Argv).Strings(s.Env).String(s.Wdir).Uint(uint64(s.Size))
	e.Int(int64(s.KillAfter)).Int(int64(s.Heartbeat)).String(s.Node).Uint(uint64(s.NodeID))
	e.Uint(uint64(len(s.Ranks)))
	for _, r := range s.Ranks {
		e.Uint(uint64(r))
	}
	e.String(s.ProcessMapping)
	e.Bool(s.Tree)
	encodeTree(&e, s.Launch, s.Children)
	e.Bool(s.Prestage)
	encodeReplica(&e, s.Replica)
	e.String(s.Addr).Bool(s.Survive).Bool(s.RootChild)
	encodeApps(&e, s.Apps)
	e.String(s.Bind).Bool(s.BindShare)
	e.String(s.Restart)
	encodeRelaunch(&e, s.Relaunch)
	e.Bool(s.Gossip != nil)
	if g := s.Gossip; g != nil {
		e.Bytes(g.Secret).Strings(g.Hosts).Uint(uint64(g.Port))
	}
	encodeTiming(&e, s.Timing)
	e.String(s.MPI)
	e.Bool(s.RootMerge)
	return e.Data()
}

func DecodeNodeSpec(p []byte) (*NodeSpec, error) {
	d := wire.NewDecoder(p)
	s := &NodeSpec{JobID: d.String(), Argv: d.Strings(), Env: d.Strings(), Wdir: d.String(), Size: int(d.Uint())}
	s.KillAfter, s.Heartbeat = time.Duration(d.Int()), time.Duration(d.Int())
	s.Node, s.NodeID = d.String(), int(d.Uint())
	n := d.Count(1)
	for range n {
		s.Ranks = append(s.Ranks, int(d.Uint()))
	}
	s.ProcessMapping = d.String()
	s.Tree = d.Bool()
	s.Launch, s.Children = decodeTree(d)
	s.Prestage = d.Bool()
	s.Replica = decodeReplica(d)
	s.Addr = d.String()
	s.Survive, s.RootChild = d.Bool(), d.Bool()
	s.Apps = decodeApps(d)
	s.Bind, s.BindShare = d.String(), d.Bool()
	if d.Len() > 0 {
		s.Restart = d.String()
	}
	if d.Len() > 0 {
		s.Relaunch = decodeRelaunch(d)
	}
	if d.Len() > 0 && d.Bool() {
		s.Gossip = &GossipSpec{Secret: d.Bytes(), Hosts: d.Strings(), Port: int(d.Uint())}
	}
	if d.Len() > 0 {
		s.Timing = decodeTiming(d)
	}
	if d.Len() > 0 {
		s.MPI = d.String()
	}
	if d.Len() > 0 {
		s.RootMerge = d.Bool()
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("job spec: %w", err)
	}
	if rl := s.Relaunch; rl != nil && (len(rl.Incs) != len(s.Ranks) || len(rl.Table) > s.Size) {
		return nil, fmt.Errorf("job spec: a relaunch with %d incarnations for %d ranks and a table of %d rows for a job of %d",
			len(rl.Incs), len(s.Ranks), len(rl.Table), s.Size)
	}
	if err := CheckApps(s.Apps, s.Size); err != nil {
		return nil, fmt.Errorf("job spec: %w", err)
	}
	if len(s.Argv) == 0 || s.Size < 1 {
		return nil, fmt.Errorf("job spec: no program or no ranks")
	}
	for _, r := range s.Ranks {
		if r >= s.Size {
			return nil, fmt.Errorf("job spec: rank %d outside a job of %d", r, s.Size)
		}
	}
	return s, nil
}

// RankStatus is how a rank ended (or failed to start).
type RankStatus struct {
	Rank   int
	Code   int    // exit code, when Signal is 0
	Signal int    // terminating signal, or 0
	Reason string // set when the rank never ran, or failed for a reason other than its exit
	// Skipped: the rank was not started because an earlier rank of its
	// node could not start (that one is the failure).
	Skipped bool
	// Incarnation is the process's incarnation (1: the first; 0: not
	// said, the current one).
	Incarnation uint64
}

func (s RankStatus) Encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(s.Rank)).Int(int64(s.Code)).Int(int64(s.Signal)).String(s.Reason).Bool(s.Skipped).Uint(s.Incarnation)
	return e.Data()
}

func DecodeRankStatus(p []byte) (RankStatus, error) {
	d := wire.NewDecoder(p)
	s := RankStatus{Rank: int(d.Uint()), Code: int(d.Int()), Signal: int(d.Int()), Reason: d.String(), Skipped: d.Bool()}
	if d.Len() > 0 {
		s.Incarnation = d.Uint()
	}
	return s, d.Err()
}

// Started lists ranks that are running, with their pids and, when bound
// (--bind-to), the CPUs each is bound to ("0-1,4"; empty when unbound).
type Started struct {
	Ranks, Pids []int
	CPUs        []string
	// Incs are the ranks' incarnations when they were started again (a
	// respawn, a restarted job); nil for a first start.
	Incs []uint64
}

func (s Started) Encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(len(s.Ranks)))
	for i := range s.Ranks {
		e.Uint(uint64(s.Ranks[i])).Uint(uint64(s.Pids[i]))
	}
	e.Strings(s.CPUs)
	e.Uint(uint64(len(s.Incs)))
	for _, inc := range s.Incs {
		e.Uint(inc)
	}
	return e.Data()
}

func DecodeStarted(p []byte) (Started, error) {
	d := wire.NewDecoder(p)
	n := d.Count(2)
	var s Started
	for range n {
		s.Ranks = append(s.Ranks, int(d.Uint()))
		s.Pids = append(s.Pids, int(d.Uint()))
	}
	s.CPUs = d.Strings()
	if d.Err() == nil && len(s.CPUs) != 0 && len(s.CPUs) != len(s.Ranks) {
		return s, fmt.Errorf("started: %d CPU lists for %d ranks", len(s.CPUs), len(s.Ranks))
	}
	if d.Len() > 0 {
		for range d.Count(1) {
			s.Incs = append(s.Incs, d.Uint())
		}
		if d.Err() == nil && len(s.Incs) != 0 && len(s.Incs) != len(s.Ranks) {
			return s, fmt.Errorf("started: %d incarnations for %d ranks", len(s.Incs), len(s.Ranks))
		}
	}
	return s, d.Err()
}

// Output streams.
const (
	StreamStdout = 1
	StreamStderr = 2
)

// encodeOutput is an output frame: the agent's frame number (outq.go), the
// rank, the stream, complete lines.
func encodeOutput(seq uint64, rank, stream int, data []byte) []byte {
	var e wire.Encoder
	e.Uint(seq).Uint(uint64(rank)).Uint(uint64(stream)).Bytes(data)
	return e.Data()
}

func DecodeOutput(p []byte) (seq uint64, rank, stream int, data []byte, err error) {
	d := wire.NewDecoder(p)
	seq, rank, stream, data = d.Uint(), int(d.Uint()), int(d.Uint()), d.Bytes()
	if d.Err() == nil && stream != StreamStdout && stream != StreamStderr {
		return 0, 0, 0, nil, fmt.Errorf("output: unknown stream %d", stream)
	}
	return seq, rank, stream, data, d.Err()
}

// Contrib is a subtree's contribution to collective number Seq, combined
// by the agent at its top: the values of its ranks, for a fence the puts
// since the last fence, and the agents it covers (Covers, by index), by
// which every combiner merges contributions and ignores what it has
// (docs/collectives.md).
//
// A ring's contribution is a scan's (docs/collectives.md, "Ring
// exchange"): Spans are the ranks it covers, as runs, and Ranks and
// Values only the values of the runs' ends (every rank's, with no Spans:
// under the root merging of FTLAUNCH_COLL_ROOT_MERGE).
type Contrib struct {
	Seq    uint64
	Op     rankproto.Op
	Ranks  []int
	Values [][]byte
	KV     map[string][]byte
	Covers []int
	Spans  []Span
}

// Covered is the ranks c covers, as runs: its Spans, else its Ranks.
func (c *Contrib) Covered() []Span {
	if len(c.Spans) > 0 {
		return c.Spans
	}
	return SpansOf(c.Ranks)
}

func (c *Contrib) Encode() []byte {
	var e wire.Encoder
	e.Uint(c.Seq).Uint(uint64(c.Op)).Uint(uint64(len(c.Ranks)))
	for i, r := range c.Ranks {
		e.Uint(uint64(r)).Bytes(c.Values[i])
	}
	encodeKV(&e, c.KV)
	e.Uint(uint64(len(c.Covers)))
	for _, x := range c.Covers {
		e.Uint(uint64(x))
	}
	e.Uint(uint64(len(c.Spans)))
	for _, x := range c.Spans {
		e.Uint(uint64(x.Lo)).Uint(uint64(x.Hi))
	}
	return e.Data()
}

func DecodeContrib(p []byte) (*Contrib, error) {
	d := wire.NewDecoder(p)
	c := &Contrib{Seq: d.Uint(), Op: rankproto.Op(d.Uint())}
	n := d.Count(2)
	for range n {
		c.Ranks = append(c.Ranks, int(d.Uint()))
		c.Values = append(c.Values, d.Bytes())
	}
	c.KV = decodeKV(d)
	m := d.Count(1)
	for range m {
		c.Covers = append(c.Covers, int(d.Uint()))
	}
	if d.Len() > 0 {
		k := d.Count(2)
		for range k {
			lo, hi := d.Uint(), d.Uint()
			if d.Err() == nil && (lo > hi || hi > 1<<31 || len(c.Spans) > 0 && lo <= uint64(c.Spans[len(c.Spans)-1].Hi)+1) {
				return nil, fmt.Errorf("contribution: spans not sorted, disjoint runs")
			}
			c.Spans = append(c.Spans, Span{int(lo), int(hi)})
		}
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("contribution: %w", err)
	}
	return c, nil
}

// RingAsk names the ranks of ring Seq whose values an agent lacks to
// answer its ranks (up, 60), or that the root asks every agent for (down,
// broadcast, 61): docs/collectives.md, "Ring exchange".
type RingAsk struct {
	Seq   uint64
	Ranks []int
}

func (a RingAsk) Encode() []byte {
	var e wire.Encoder
	e.Uint(a.Seq).Uint(uint64(len(a.Ranks)))
	for _, r := range a.Ranks {
		e.Uint(uint64(r))
	}
	return e.Data()
}

func DecodeRingAsk(p []byte) (RingAsk, error) {
	d := wire.NewDecoder(p)
	a := RingAsk{Seq: d.Uint()}
	n := d.Count(1)
	for range n {
		a.Ranks = append(a.Ranks, int(d.Uint()))
	}
	if err := d.Err(); err != nil {
		return RingAsk{}, fmt.Errorf("ring ask: %w", err)
	}
	return a, nil
}

func encodeKV(e *wire.Encoder, kv map[string][]byte) {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.Uint(uint64(len(keys)))
	for _, k := range keys {
		e.String(k).Bytes(kv[k])
	}
}

func decodeKV(d *wire.Decoder) map[string][]byte {
	n := d.Count(2)
	kv := make(map[string][]byte, n)
	for range n {
		k := d.String()
		kv[k] = d.Bytes()
	}
	return kv
}

// IsKVOp reports whether a collective carries key/value puts instead of
// one value per rank.
func IsKVOp(op rankproto.Op) bool {
	return op == rankproto.OpFence || op == OpPMIBarrier
}

// CollResult is the root's answer to collective Seq: for a fence the merged
// puts, otherwise one value per rank of the job (empty for a barrier).
type CollResult struct {
	Seq    uint64
	Op     rankproto.Op
	Values [][]byte
	KV     map[string][]byte
	// N, when set, makes the result sparse (a ring's answer for one
	// subtree): Values[i] is rank Ranks[i]'s, of N ranks in all.
	Ranks []int
	N     int

	Recovering bool // not sent: the agent abandoned the collective for a recovery
}

func (c *CollResult) Encode() []byte {
	var e wire.Encoder
	e.Uint(c.Seq).Uint(uint64(c.Op)).Uint(uint64(len(c.Values)))
	for _, v := range c.Values {
		e.Bytes(v)
	}
	encodeKV(&e, c.KV)
	e.Uint(uint64(c.N)).Uint(uint64(len(c.Ranks)))
	for _, r := range c.Ranks {
		e.Uint(uint64(r))
	}
	return e.Data()
}

// Size is the number of ranks the result is of.
func (c *CollResult) Size() int {
	if c.N > 0 {
		return c.N
	}
	return len(c.Values)
}

// Value is rank r's value, if the result carries it.
func (c *CollResult) Value(r int) ([]byte, bool) {
	if c.N == 0 {
		if r < 0 || r >= len(c.Values) {
			return nil, false
		}
		return c.Values[r], true
	}
	i, ok := slices.BinarySearch(c.Ranks, r)
	if !ok {
		return nil, false
	}
	return c.Values[i], true
}

// ValueMap returns the values c carries, by rank.
func (c *CollResult) ValueMap() map[int][]byte {
	out := make(map[int][]byte, len(c.Values))
	for i, v := range c.Values {
		r := i
		if c.N > 0 {
			r = c.Ranks[i]
		}
		out[r] = v
	}
	return out
}

// RingPart is a ring's answer, sparse: the values of vals of those of
// ranks it holds, for a ring of n ranks.
func RingPart(seq uint64, n int, vals map[int][]byte, ranks []int) *CollResult {
	out := &CollResult{Seq: seq, Op: rankproto.OpRing, N: n}
	for _, r := range slices.Sorted(slices.Values(ranks)) {
		if v, ok := vals[r]; ok && r >= 0 && r < n && (len(out.Ranks) == 0 || out.Ranks[len(out.Ranks)-1] != r) {
			out.Ranks = append(out.Ranks, r)
			out.Values = append(out.Values, v)
		}
	}
	return out
}

// WithValues is c with the values of vals (by rank) added, sparse.
func (c *CollResult) WithValues(vals map[int][]byte) *CollResult {
	all := maps.Clone(vals)
	if all == nil {
		all = map[int][]byte{}
	}
	maps.Copy(all, c.ValueMap())
	return RingPart(c.Seq, c.Size(), all, slices.Collect(maps.Keys(all)))
}

func DecodeCollResult(p []byte) (*CollResult, error) {
	d := wire.NewDecoder(p)
	c := &CollResult{Seq: d.Uint(), Op: rankproto.Op(d.Uint())}
	n := d.Count(1)
	c.Values = make([][]byte, 0, n)
	for range n {
		c.Values = append(c.Values, d.Bytes())
	}
	c.KV = decodeKV(d)
	c.N = int(d.Uint())
	m := d.Count(1)
	for range m {
		c.Ranks = append(c.Ranks, int(d.Uint()))
	}
	if d.Err() == nil && c.N > 0 && (len(c.Ranks) != len(c.Values) || !slices.IsSorted(c.Ranks)) {
		return nil, fmt.Errorf("collective result: %d ranks for %d values, or unsorted", len(c.Ranks), len(c.Values))
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("collective result: %w", err)
	}
	return c, nil
}

func EncodeInt(v int64) []byte {
	var e wire.Encoder
	e.Int(v)
	return e.Data()
}

func DecodeInt(p []byte) (int64, error) {
	d := wire.NewDecoder(p)
	v := d.Int()
	return v, d.Err()
}

// AbortMsg is a rank's call of Abort, or (Failed) a failure of the rank
// the agent found: a broken protocol, a stranded collective.
type AbortMsg struct {
	Rank, Code int
	Msg        string
	Failed     bool
	// Stranded: the rank ended without joining a collective its node's
	// other ranks wait in (the agent's report, recorded as such).
	Stranded bool
}

func (a AbortMsg) Encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(a.Rank)).Int(int64(a.Code)).String(a.Msg).Bool(a.Failed).Bool(a.Stranded)
	return e.Data()
}

func DecodeAbort(p []byte) (AbortMsg, error) {
	d := wire.NewDecoder(p)
	a := AbortMsg{Rank: int(d.Uint()), Code: int(d.Int()), Msg: d.String(), Failed: d.Bool()}
	if d.Len() > 0 {
		a.Stranded = d.Bool()
	}
	return a, d.Err()
}

// MPIName names what --mpi serves the ranks (NodeSpec.MPI), as --verbose
// and the state log say it: "pmi1+pmix" for the default ("").
func MPIName(mpi string) string {
	if mpi == "" {
		return "pmi1+pmix"
	}
	return mpi
}
