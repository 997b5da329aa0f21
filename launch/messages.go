package launch

import (
	"fmt"
	"sort"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// nodeSpec is what an agent receives first: the job and its node's share.
type nodeSpec struct {
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
	Launch   launchSpec
	Children []childSpec

	Prestage bool // the program was prestaged: run the node-local copy

	// Replica, if JobDir is set, makes the agent host a root replica.
	Replica replicaSpec
	// Addr is how the agent's parent reaches it (its IP), for the
	// addresses it advertises.
	Addr string
	// Survive: the job has a replicated root; the agent outlives its
	// session, and (RootChild) a child of the root outlives the root.
	Survive, RootChild bool
}

func (s *nodeSpec) encode() []byte {
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
	return e.Data()
}

func decodeNodeSpec(p []byte) (*nodeSpec, error) {
	d := wire.NewDecoder(p)
	s := &nodeSpec{JobID: d.String(), Argv: d.Strings(), Env: d.Strings(), Wdir: d.String(), Size: int(d.Uint())}
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
	if err := d.Err(); err != nil {
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

// rankStatus is how a rank ended (or failed to start).
type rankStatus struct {
	Rank   int
	Code   int    // exit code, when Signal is 0
	Signal int    // terminating signal, or 0
	Reason string // set when the rank never ran, or failed for a reason other than its exit
	// Skipped: the rank was not started because an earlier rank of its
	// node could not start (that one is the failure).
	Skipped bool
}

func (s rankStatus) encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(s.Rank)).Int(int64(s.Code)).Int(int64(s.Signal)).String(s.Reason).Bool(s.Skipped)
	return e.Data()
}

func decodeRankStatus(p []byte) (rankStatus, error) {
	d := wire.NewDecoder(p)
	s := rankStatus{Rank: int(d.Uint()), Code: int(d.Int()), Signal: int(d.Int()), Reason: d.String(), Skipped: d.Bool()}
	return s, d.Err()
}

// started lists ranks that are running, with their pids.
type started struct {
	Ranks, Pids []int
}

func (s started) encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(len(s.Ranks)))
	for i := range s.Ranks {
		e.Uint(uint64(s.Ranks[i])).Uint(uint64(s.Pids[i]))
	}
	return e.Data()
}

func decodeStarted(p []byte) (started, error) {
	d := wire.NewDecoder(p)
	n := d.Count(2)
	var s started
	for range n {
		s.Ranks = append(s.Ranks, int(d.Uint()))
		s.Pids = append(s.Pids, int(d.Uint()))
	}
	return s, d.Err()
}

// Output streams.
const (
	streamStdout = 1
	streamStderr = 2
)

// encodeOutput is an output frame: the agent's frame number (outq.go), the
// rank, the stream, complete lines.
func encodeOutput(seq uint64, rank, stream int, data []byte) []byte {
	var e wire.Encoder
	e.Uint(seq).Uint(uint64(rank)).Uint(uint64(stream)).Bytes(data)
	return e.Data()
}

func decodeOutput(p []byte) (seq uint64, rank, stream int, data []byte, err error) {
	d := wire.NewDecoder(p)
	seq, rank, stream, data = d.Uint(), int(d.Uint()), int(d.Uint()), d.Bytes()
	if d.Err() == nil && stream != streamStdout && stream != streamStderr {
		return 0, 0, 0, nil, fmt.Errorf("output: unknown stream %d", stream)
	}
	return seq, rank, stream, data, d.Err()
}

// contrib is one node's contribution to collective number Seq: the values
// of its ranks and, for a fence, the node's puts since the last fence.
type contrib struct {
	Seq    uint64
	Op     rankproto.Op
	Ranks  []int
	Values [][]byte
	KV     map[string][]byte
}

func (c *contrib) encode() []byte {
	var e wire.Encoder
	e.Uint(c.Seq).Uint(uint64(c.Op)).Uint(uint64(len(c.Ranks)))
	for i, r := range c.Ranks {
		e.Uint(uint64(r)).Bytes(c.Values[i])
	}
	encodeKV(&e, c.KV)
	return e.Data()
}

func decodeContrib(p []byte) (*contrib, error) {
	d := wire.NewDecoder(p)
	c := &contrib{Seq: d.Uint(), Op: rankproto.Op(d.Uint())}
	n := d.Count(2)
	for range n {
		c.Ranks = append(c.Ranks, int(d.Uint()))
		c.Values = append(c.Values, d.Bytes())
	}
	c.KV = decodeKV(d)
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("contribution: %w", err)
	}
	return c, nil
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

// isKVOp reports whether a collective carries key/value puts instead of
// one value per rank.
func isKVOp(op rankproto.Op) bool {
	return op == rankproto.OpFence || op == opPMIBarrier
}

// collResult is the root's answer to collective Seq: for a fence the merged
// puts, otherwise one value per rank of the job (empty for a barrier).
type collResult struct {
	Seq    uint64
	Op     rankproto.Op
	Values [][]byte
	KV     map[string][]byte
}

func (c *collResult) encode() []byte {
	var e wire.Encoder
	e.Uint(c.Seq).Uint(uint64(c.Op)).Uint(uint64(len(c.Values)))
	for _, v := range c.Values {
		e.Bytes(v)
	}
	encodeKV(&e, c.KV)
	return e.Data()
}

func decodeCollResult(p []byte) (*collResult, error) {
	d := wire.NewDecoder(p)
	c := &collResult{Seq: d.Uint(), Op: rankproto.Op(d.Uint())}
	n := d.Count(1)
	c.Values = make([][]byte, 0, n)
	for range n {
		c.Values = append(c.Values, d.Bytes())
	}
	c.KV = decodeKV(d)
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("collective result: %w", err)
	}
	return c, nil
}

func encodeInt(v int64) []byte {
	var e wire.Encoder
	e.Int(v)
	return e.Data()
}

func decodeInt(p []byte) (int64, error) {
	d := wire.NewDecoder(p)
	v := d.Int()
	return v, d.Err()
}

// abortMsg is a rank's call of Abort, or (Failed) a failure of the rank
// the agent found: a broken protocol, a stranded collective.
type abortMsg struct {
	Rank, Code int
	Msg        string
	Failed     bool
}

func (a abortMsg) encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(a.Rank)).Int(int64(a.Code)).String(a.Msg).Bool(a.Failed)
	return e.Data()
}

func decodeAbort(p []byte) (abortMsg, error) {
	d := wire.NewDecoder(p)
	a := abortMsg{Rank: int(d.Uint()), Code: int(d.Int()), Msg: d.String(), Failed: d.Bool()}
	return a, d.Err()
}
