package journal

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// Job is the job as the front-end starts it. It is stored, JSON-encoded,
// as the raftstore job's opaque spec.
type Job struct {
	ID       string    `json:"id"`
	Argv     []string  `json:"argv"`
	N        int       `json:"n"`               // number of ranks
	Nodes    []string  `json:"nodes,omitempty"` // the allocation, if known at Open
	Start    time.Time `json:"start"`           // when the front-end started the job
	Replicas int       `json:"replicas"`        // size of the root replica group
	// Restart and MaxRestarts are the job's restart policy (--restart:
	// "" is none) and bound, for a successor root.
	Restart     string `json:"restart,omitempty"`
	MaxRestarts int    `json:"max_restarts,omitempty"`
	// Spares are the spare nodes, in order (--spare-nodes), for a
	// successor root.
	Spares []string `json:"spares,omitempty"`
	// Slots are the nodes' slots (node name → ranks it holds; a node
	// not named has no free slot) and Oversubscribe whether a silent
	// node's ranks may share a surviving node's, for a successor root.
	Slots         map[string]int `json:"slots,omitempty"`
	Oversubscribe bool           `json:"oversubscribe,omitempty"`
	Version       string         `json:"version,omitempty"`
	// MPI is what the ranks are served (--mpi): "pmi1+pmix" (the
	// default: PMI-1, and PMIx to programs that use it), "pmi1", "pmix"
	// or "none".
	MPI string `json:"mpi,omitempty"`
}

// DecodeJob decodes the spec of a job written by this package.
func DecodeJob(spec []byte) (Job, error) {
	var j Job
	if err := json.Unmarshal(spec, &j); err != nil {
		return Job{}, fmt.Errorf("job spec: %w", err)
	}
	return j, nil
}

// Tree kinds of a Plan.
const (
	TreeFlat = "flat" // every agent is a child of the root
)

// Plan is the launch tree. The root is the front-end, named Root;
// every other node names its primary parent (Root for the root's
// children) and a backup parent ("" if none).
type Plan struct {
	Kind  string // TreeFlat, or the kind the plan builder reports
	Root  string
	Nodes []PlanNode
	// Replicas are the agents' nodes that host root replicas besides the
	// journal's own (the group they join once it leads; `ftlaunch
	// inspect` names those that never did).
	Replicas []string
	// Change says what changed, for a plan recorded again after a loss
	// ("node7 moved under node4: ..."; "": the first plan).
	Change string
	// Model is the launch-time prediction for this plan (nil: none).
	Model *ModelPrediction
}

// PlanNode is one agent's place in the tree.
type PlanNode struct {
	Name    string
	Primary string
	Backup  string
}

// RootName is the name of the front-end in the launch tree.
const RootName = "ftlaunch-root"

// FlatPlan returns the plan of a local launch: every node a child of the
// root, no backups.
func FlatPlan(nodes []string) Plan {
	p := Plan{Kind: TreeFlat, Root: RootName}
	for _, n := range nodes {
		p.Nodes = append(p.Nodes, PlanNode{Name: n, Primary: RootName})
	}
	return p
}

// AgentUp is what the front-end knows when an agent has connected back.
type AgentUp struct {
	Node string
	// Incarnation is the agent's (0: the first); a relaunched agent's
	// later failure is recorded as its own, not its lost predecessor's.
	Incarnation uint64
	Addr        string // where the agent is reached ("" for a local agent on a socket pair)
	// Launched is when the agent's launch began (the SSH session was
	// requested, or the local process forked); zero: unknown.
	Launched time.Time
	// SSH is how long the agent's start took (its SSH session or srun
	// step came up, or its process was started), queueing for a slot
	// included (0 for a local agent on a socket pair).
	SSH time.Duration
	// Connected is when the agent connected back; zero: now.
	Connected time.Time
	// Start is how the agent was started: StartSSH ("": the same),
	// StartSrun or StartProcess.
	Start string
}

// How agents are started (AgentUp.Start).
const (
	StartSSH     = "ssh"
	StartSrun    = "srun"
	StartProcess = "process" // a local process (test nodes, or a job on this machine)
)

// RankExit is how a rank ended, as the agent reported it.
type RankExit struct {
	Rank   int
	Code   int    // exit code, when it exited
	Signal int    // the signal that killed it, or 0
	Reason string // why the launcher ended it, if it did ("" for a plain exit)
}

// exitCode is the code recorded in the node table: the exit code, or
// 128+N for signal N.
func (e RankExit) exitCode() int {
	if e.Signal != 0 {
		return 128 + e.Signal
	}
	return e.Code
}

func (e RankExit) describe() string {
	switch {
	case e.Reason != "":
		return e.Reason
	case e.Signal != 0:
		return fmt.Sprintf("killed by signal %d", e.Signal)
	case e.Code == 0:
		return "exited with code 0"
	default:
		return fmt.Sprintf("exited with code %d", e.Code)
	}
}

// Failure is a failure the front-end declared. Rank is raftstore.NoRank
// when it is not about one rank; Node is "" when it is about no node
// (then the failure is the job's, such as a timeout).
type Failure struct {
	Node    string
	Rank    int
	Message string
}

// Fence is the fence of a node whose agent was declared lost (launch/fence):
// the agent incarnations up to Incarnation and their ranks killed there.
type Fence struct {
	Node        string
	Incarnation uint64
	Took        time.Duration
	Result      string // what it killed ("killed 1 agent process(es) and 2 rank process(es)")
	Err         string // why it failed ("": it did not)
}

// Launch steps: the Detail of an EventLaunch starts with one of these and
// ": ". Exit events start with StepExit.
const (
	StepJob      = "job"     // the job was recorded (at Job.Start)
	StepPlan     = "plan"    // the plan was recorded
	StepLaunch   = "launch"  // an agent's launch began
	StepSSH      = "ssh"     // an agent's SSH session came up
	StepStart    = "start"   // an agent's srun step or local process started (StepSSH for an SSH session)
	StepUp       = "up"      // an agent connected back
	StepRanks    = "ranks"   // a node's ranks were started
	StepTable    = "table"   // the node table went to every rank
	StepExit     = "exit"    // ranks exited (EventExit)
	StepFailure  = "failure" // a failure already open for its subject (EventLaunch)
	StepFence    = "fence"   // a lost agent's node was fenced (Fence)
	stepSplitter = ": "
)

// Step splits an event's Detail into its step name and the rest; an event
// not written by this package returns "" and the whole detail.
func Step(ev *raftstore.Event) (step, text string) {
	s, t, ok := strings.Cut(ev.Detail, stepSplitter)
	if !ok || strings.ContainsAny(s, " \t") {
		return "", ev.Detail
	}
	return s, t
}

func detail(step, format string, args ...any) string {
	return step + stepSplitter + fmt.Sprintf(format, args...)
}
