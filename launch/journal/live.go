package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The live report: while a job runs, its replicas hold the state log's
// files locked, so `ftlaunch status` cannot read them. The root (the
// front-end, or the successor that took its place) writes what it knows to
// STATE/JOB/live.json instead, once a second (not during the first second:
// a launch does not wait for a file write) and when the job fails, and
// removes it when the job's final status is committed.

// LiveFile is the live report's name in a job's state directory.
const LiveFile = "live.json"

// LiveEvery is how often a running root rewrites its live report.
const LiveEvery = time.Second

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
	// Table is set once every rank held the first node table (the ranks'
	// first Publish, or PMI's first fence); BackupsUp once every agent
	// that has a backup parent holds its standby link to it.
	Table     bool `json:"table,omitempty"`
	BackupsUp bool `json:"backups_up,omitempty"`
	// ReplicasJoined names the replica agents that joined this root's
	// state-log group (--replicas 3 or 5), in the order they joined.
	ReplicasJoined []string `json:"replicas_joined,omitempty"`
	// Failure is the first failure that ends the job, if any.
	Failure string `json:"failure,omitempty"`
	// Failover is set once a successor took the root over; Term is the
	// raft term it took over in.
	Failover bool   `json:"failover,omitempty"`
	Term     uint64 `json:"term,omitempty"`
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

// SetPhase sets where the job stands: ending once its agents were told to
// exit, else terminating once it failed or is terminated, else launching
// until every agent got its job and every rank started, else running.
func (l *Live) SetPhase(ending, terminating, launching bool) {
	switch {
	case ending:
		l.Phase = "ending"
	case terminating:
		l.Phase = "terminating"
	case launching:
		l.Phase = "launching"
	default:
		l.Phase = "running"
	}
}

// RecoveryAt dates the recovery in progress, if any: its failure came at
// failed, and its current phase was committed at phase, if that is later
// (an earlier one was the last recovery's).
func (l *Live) RecoveryAt(failed, phase time.Time) {
	if r := l.Recovery; r != nil {
		r.Failed = failed
		if phase.After(failed) {
			r.Phase = phase
		}
	}
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

// WriteLive replaces a job's live report with l (write, then rename: a
// reader sees the old report or the new one); node, the writer's, names
// its temporary file.
func WriteLive(jobDir, node string, l Live) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("live report: %w", err)
	}
	tmp := filepath.Join(jobDir, "."+LiveFile+"."+node)
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("live report: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(jobDir, LiveFile)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("live report: %w", err)
	}
	return nil
}

// RemoveLive removes a job's live report (none is no error): its final
// status is committed.
func RemoveLive(jobDir string) error {
	if err := os.Remove(filepath.Join(jobDir, LiveFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("live report: %w", err)
	}
	return nil
}
