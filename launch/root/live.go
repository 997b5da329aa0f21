package root

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ftlaunch/ftlaunch/recovery"
)

// The live report: while a job runs, its replicas hold the state log's
// files locked, so `ftlaunch status` cannot read them. The root (the
// front-end, or the successor that took its place) writes what it knows to
// STATE/JOB/live.json instead, once a second (not during the first second:
// a launch does not wait for a file write) and when the job fails, and
// removes it when the job's final status is committed.

// LiveFile is the live report's name in a job's state directory.
const LiveFile = "live.json"

// liveInterval is how often a running root rewrites its live report.
const liveInterval = time.Second

// Live is a running job's live report.
type Live struct {
	Job     string    `json:"job"`
	Root    string    `json:"root"`  // the node the root runs on
	Phase   string    `json:"phase"` // launching, running, terminating, ending
	Updated time.Time `json:"updated"`
	Start   time.Time `json:"start"`
	Argv    []string  `json:"argv"`

	Agents   int `json:"agents"`
	AgentsUp int `json:"agents_up"`
	N        int `json:"n"`
	Running  int `json:"running"` // ranks started and not ended
	Ended    int `json:"ended"`
	// Failure is the first failure that ends the job, if any.
	Failure string `json:"failure,omitempty"`
	// Failover is set once a successor took the root over.
	Failover bool `json:"failover,omitempty"`
	// Recoveries counts the recoveries this root saw to their end (a
	// successor counts from its takeover).
	Recoveries int `json:"recoveries,omitempty"`
	// Recovery is the recovery in progress, if any.
	Recovery *LiveRecovery `json:"recovery,omitempty"`
}

// LiveRecovery is where a recovery in progress stands.
type LiveRecovery struct {
	// Ranks are the ranks being started again (under --restart job: every
	// rank, and Ranks is empty).
	Ranks []int  `json:"ranks,omitempty"`
	Stage string `json:"stage"` // suspend, respawn, patch, resume, restart-job
	Epoch uint64 `json:"epoch"`
	// Failed is when the root learned of the failure that began it (for a
	// successor: when it carried the recovery on); Phase when its current
	// phase went to the state log (zero: not yet).
	Failed time.Time `json:"failed"`
	Phase  time.Time `json:"phase,omitzero"`
}

// ReadLive reads a job's live report; a job without one gets an error
// satisfying errors.Is(err, os.ErrNotExist).
func ReadLive(jobDir string) (*Live, error) {
	b, err := os.ReadFile(filepath.Join(jobDir, LiveFile))
	if err != nil {
		return nil, err
	}
	var l Live
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(jobDir, LiveFile), err)
	}
	return &l, nil
}

// live is what the root knows now.
func (fe *frontend) live() Live {
	l := Live{
		Job: fe.jobID, Root: fe.rootNode, Phase: "running", Updated: time.Now(), Start: cmp.Or(fe.jobStart, fe.start),
		Argv: fe.opts.Argv, Agents: len(fe.agents), AgentsUp: fe.agentsUp, N: fe.opts.N,
		Ended: fe.ended, Failover: fe.rec.Resumed(),
	}
	// Counted, not ranksUp - ended: ranks that never started end too
	// (a failed start, an agent that never came up). Once a second.
	for i := range fe.ranks {
		if rs := &fe.ranks[i]; rs.started && !rs.ended {
			l.Running++
		}
	}
	switch {
	case !fe.shutdownAt.IsZero():
		l.Phase = "ending"
	case fe.terminating || fe.rec.Failure() != nil:
		l.Phase = "terminating"
	case fe.agentsUp < len(fe.agents) || fe.ranksUp < fe.opts.N:
		l.Phase = "launching"
	}
	if f := fe.rec.Failure(); f != nil {
		l.Failure = f.Msg
	}
	l.Recoveries = fe.recoveries
	if st := fe.rec.Stage(); st != 0 {
		r := &LiveRecovery{Stage: st.String(), Epoch: fe.rec.Epoch(), Failed: fe.failedAt}
		if fe.recoveryAt.After(fe.failedAt) {
			r.Phase = fe.recoveryAt
		}
		if st != recovery.StageRestartJob {
			for i := range fe.ranks {
				if _, ok := fe.recovered[i]; ok || fe.rec.Replacing(i) {
					r.Ranks = append(r.Ranks, i)
				}
			}
		}
		l.Recovery = r
	}
	return l
}

// writeLive replaces the job's live report (write, then rename: a reader
// sees the old report or the new one). Errors are not the job's: a
// report that cannot be written is only missing.
func (fe *frontend) writeLive() {
	if fe.journal == nil || fe.journalDone || fe.journal.Dir() == "" {
		return
	}
	b, err := json.Marshal(fe.live())
	if err != nil {
		return
	}
	dir := fe.journal.Dir()
	tmp := filepath.Join(dir, "."+LiveFile+"."+fe.rootNode)
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return
	}
	if err := os.Rename(tmp, filepath.Join(dir, LiveFile)); err != nil {
		_ = os.Remove(tmp)
	}
}

// removeLive removes the live report once the final status is committed.
func (fe *frontend) removeLive() {
	if fe.journal == nil || fe.journal.Dir() == "" {
		return
	}
	if err := os.Remove(filepath.Join(fe.journal.Dir(), LiveFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		fe.warnf("live report: %v", err)
	}
}
