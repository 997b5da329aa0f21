// Package jobstate reads a job's state directory: it finds the job a
// command names (an id, a directory, a replica's file, or the latest),
// reads every replica's files, and sums up the job's status from the
// state log or, while the job runs, from its root's live report. The
// commands that report on jobs (inspect, status, attach) and the chaos
// harness's judge read jobs through it.
package jobstate

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftlaunch/ftlaunch/launch"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/raftstore"
)

// Loaded is a job's state read from its replicas' files.
type Loaded struct {
	JobDir   string
	Best     *raftstore.Inspection // the replica with the longest log
	Replicas []ReplicaFiles
}

// ReplicaFiles is one replica's files as read (Err: why they could not be).
type ReplicaFiles struct {
	Path string
	In   *raftstore.Inspection
	Err  error
}

// ErrRunning says that a job's files are held by its running replicas.
type ErrRunning struct {
	Path string // the job's directory
	err  error
}

func (e *ErrRunning) Error() string {
	return fmt.Sprintf("%s is held by a running ftlaunch: the job has not ended (see `ftlaunch status %s` for a running job)", e.Path, e.Path)
}

func (e *ErrRunning) Unwrap() error { return e.err }

// Resolve finds the replica files a STATE argument names, and the
// job directory they belong to.
func Resolve(stateDir, target string) (jobDir string, replicas []string, err error) {
	dir := func() (string, error) {
		if stateDir != "" {
			return stateDir, nil
		}
		return journal.DefaultStateDir()
	}
	switch {
	case target == "":
		d, err := dir()
		if err != nil {
			return "", nil, err
		}
		if target, err = journal.Latest(d); err != nil {
			return "", nil, err
		}
	case !exists(target) && !strings.ContainsRune(target, os.PathSeparator):
		// A job id.
		d, err := dir()
		if err != nil {
			return "", nil, err
		}
		id := target
		target = journal.JobDir(d, id)
		if !exists(target) {
			return "", nil, fmt.Errorf("no job %s in %s", id, d)
		}
	}
	fi, err := os.Stat(target)
	if err != nil {
		return "", nil, err
	}
	if !fi.IsDir() {
		// A replica's database file.
		return filepath.Dir(filepath.Dir(target)), []string{target}, nil
	}
	if exists(filepath.Join(target, raftstore.DBFile)) {
		return filepath.Dir(target), []string{target}, nil
	}
	if latest, err := journal.Latest(target); err == nil && exists(latest) {
		target = latest // a state directory: its latest job
	}
	entries, err := os.ReadDir(target)
	if err != nil {
		return "", nil, err
	}
	for _, e := range entries {
		p := filepath.Join(target, e.Name())
		if e.IsDir() && exists(filepath.Join(p, raftstore.DBFile)) {
			replicas = append(replicas, p)
		}
	}
	if len(replicas) == 0 {
		return "", nil, fmt.Errorf("%s holds no replica's files (looked for */%s)", target, raftstore.DBFile)
	}
	return target, replicas, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Load reads every replica of the job STATE names. It fails if none
// can be read; if one is locked, the job is running, and it says so.
func Load(stateDir, target string) (*Loaded, error) {
	jobDir, paths, err := Resolve(stateDir, target)
	if err != nil {
		return nil, err
	}
	res := &Loaded{JobDir: jobDir}
	var firstErr error
	for _, p := range paths {
		in, err := raftstore.OpenReadOnly(p)
		if errors.Is(err, raftstore.ErrLocked) {
			return nil, &ErrRunning{Path: jobDir, err: err}
		}
		res.Replicas = append(res.Replicas, ReplicaFiles{Path: p, In: in, Err: err})
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if res.Best == nil || in.CurrentTerm > res.Best.CurrentTerm ||
			in.CurrentTerm == res.Best.CurrentTerm && in.LastIndex > res.Best.LastIndex {
			res.Best = in
		}
	}
	if res.Best == nil {
		return nil, firstErr
	}
	return res, nil
}

// Status is what status prints (--json: this object).
type Status struct {
	Job      string         `json:"job"`
	StateDir string         `json:"state_dir"`
	State    string         `json:"state"` // running, finished, unfinished
	ExitCode *int           `json:"exit_code,omitempty"`
	Message  string         `json:"message,omitempty"`
	Argv     []string       `json:"argv,omitempty"`
	N        int            `json:"n,omitempty"`
	Nodes    int            `json:"nodes,omitempty"`
	Start    time.Time      `json:"start,omitzero"`
	End      time.Time      `json:"end,omitzero"`
	Ranks    map[string]int `json:"ranks,omitempty"` // rank state -> count
	Failures []string       `json:"failures,omitempty"`
	// Recoveries counts the failures recovered (the rank runs again);
	// Longest is the longest recovery, from failure to resumed, in ms.
	Recoveries int     `json:"recoveries,omitempty"`
	Longest    float64 `json:"longest_recovery_ms,omitempty"`
	// Recovering says where each recovery the log leaves open stands, in
	// a job that has not ended; NotRecovered, the failures a finished job
	// ended with before recovering them.
	Recovering   []string `json:"recovering,omitempty"`
	NotRecovered []string `json:"not_recovered,omitempty"`
	// Lost says what became of an unfinished job's ranks, when its files
	// tell: a job without replicas lost its only root, the front-end.
	Lost string `json:"lost,omitempty"`
	// Live is a running job's live report (absent: none yet, or ended).
	Live *launch.Live `json:"live,omitempty"`
	// Restart is the job's restart policy (--restart: none, rank or job),
	// MaxRestarts its bound under rank, Spares its spare nodes; unknown
	// (empty) for a running job.
	Restart     string   `json:"restart,omitempty"`
	MaxRestarts int      `json:"max_restarts,omitempty"`
	Spares      []string `json:"spares,omitempty"`
	// UserSignal names the user's signal that ended a finished job
	// ("SIGINT": Ctrl-C at the front-end; "SIGTERM": ftlaunch cancel),
	// empty if the job ended by itself or by a failure.
	UserSignal string `json:"user_signal,omitempty"`
}

// Word is the job's state in one word, as ftlaunch jobs prints it:
// running, finished (exit code 0), failed, cancelled (ended by the user's
// signal) or unfinished (its end was never recorded).
func (st *Status) Word() string {
	switch {
	case st.State != "finished":
		return st.State
	case st.UserSignal != "":
		return "cancelled"
	case st.ExitCode != nil && *st.ExitCode != 0:
		return "failed"
	}
	return "finished"
}

// Policy says the job's restart policy in words: "restart: rank (max 3),
// spares: node4"; "" when unknown.
func (st *Status) Policy() string {
	if st.Restart == "" {
		return ""
	}
	return PolicyWords(st.Restart, st.MaxRestarts, st.Spares)
}

// PolicyWords says a restart policy in words: "restart: rank (max 3),
// spares: node4" (restart "" is none).
func PolicyWords(restart string, maxRestarts int, spares []string) string {
	restart = cmp.Or(restart, "none")
	s := "restart: " + restart
	if restart == "rank" {
		s += fmt.Sprintf(" (max %d)", maxRestarts)
	}
	if len(spares) > 0 {
		s += ", spares: " + strings.Join(spares, ",")
	}
	return s
}

// ReadStatus reads a job's status from its files; a job whose files are
// locked is running.
func ReadStatus(stateDir, target string) (*Status, error) {
	res, err := Load(stateDir, target)
	var running *ErrRunning
	if errors.As(err, &running) {
		st := &Status{Job: filepath.Base(running.Path), StateDir: running.Path, State: "running"}
		if l, err := launch.ReadLive(running.Path); err == nil {
			st.Live, st.Argv, st.N, st.Nodes, st.Start = l, l.Argv, l.N, l.Agents, l.Start
			st.Ranks = map[string]int{"running": l.Running, "exited": l.Ended}
			if l.Failure != "" {
				st.Failures = []string{l.Failure}
			}
		}
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	rep := journal.Analyze(res.Best.State)
	st := &Status{
		Job: rep.Job.ID, StateDir: res.JobDir, State: "unfinished", Argv: rep.Job.Argv, N: rep.Job.N,
		Nodes: rep.Nodes(), Start: rep.Job.Start, Ranks: map[string]int{},
	}
	st.Restart, st.MaxRestarts, st.Spares = cmp.Or(rep.Job.Restart, "none"), rep.Job.MaxRestarts, rep.Job.Spares
	if !rep.Status.Done && lostWords(rep) == "" {
		st.Message = "its end was never recorded, after every rank had ended"
	}
	if rep.Status.Done {
		code := rep.Status.ExitCode
		st.State, st.ExitCode, st.Message, st.End = "finished", &code, rep.Status.Message, rep.Status.End
		st.UserSignal = UserSignal(rep)
	}
	st.Lost = lostWords(rep)
	for _, r := range rep.Ranks {
		state := r.State
		if st.Lost != "" && (state == "starting" || state == "running" || state == "suspended") {
			state = "cleaned up"
		}
		st.Ranks[state]++
	}
	// The failures, a rank's failure again while the first was open
	// included (the log keeps it as a launch event).
	for _, r := range rep.Recoveries {
		if st.UserSignal != "" && r.Rank < 0 && r.Node == "" {
			continue // the user's signal, not a failure (Message says it)
		}
		st.Failures = append(st.Failures, r.Failure.Detail)
		for _, again := range r.Repeats {
			st.Failures = append(st.Failures, again.Detail)
		}
	}
	recoveryStatus(st, rep)
	return st, nil
}

// lostWords says what became of an unfinished job's ranks ("": the job
// ended, or every rank had ended before its end went unrecorded). Its
// files are not locked: every root is gone (its front-end, and its root
// replicas if it had any), and every agent that lost its roots killed its
// ranks.
func lostWords(rep *journal.Report) string {
	switch {
	case rep.Status.Done:
		return ""
	case len(rep.Ranks) > 0 && !slices.ContainsFunc(rep.Ranks, func(r journal.ReportRank) bool { return !rankEnded(r.State) }):
		return "" // the job's end went unrecorded, not its ranks' (Message)
	case rep.Job.Replicas <= 1:
		return "front-end lost; ranks were cleaned up by their agents"
	}
	return "every root lost (the front-end and its root replicas); ranks were cleaned up by their agents"
}

// rankEnded says whether a rank state of the log is an end.
func rankEnded(state string) bool { return state == "exited" || state == "failed" }

// recoveryStatus sums up a job's recoveries: how many were over, and
// where those still open stand.
func recoveryStatus(st *Status, rep *journal.Report) {
	for i := range rep.Recoveries {
		r := &rep.Recoveries[i]
		subject := fmt.Sprintf("rank %d", r.Rank)
		if r.Rank < 0 {
			if r.Node == "" {
				continue // the job's own failure: it ends the job
			}
			subject = "node " + r.Node
		}
		switch r.Outcome {
		case journal.OutcomeResumed, journal.OutcomeRestarted, journal.OutcomeRecovered:
			st.Recoveries++
			st.Longest = max(st.Longest, r.TotalMS)
		case journal.OutcomeInProgress:
			if p := r.Stage(); p != nil {
				st.Recovering = append(st.Recovering, fmt.Sprintf("recovering %s: at its %s phase since %s (epoch %d)", subject, p.Stage, sec(p.AtMS), p.Epoch))
			} else {
				st.Recovering = append(st.Recovering, fmt.Sprintf("recovering %s: failed at %s, no recovery phase recorded yet", subject, sec(r.Failure.AtMS)))
			}
		case journal.OutcomeNotRecovered:
			if st.Restart == "none" || st.UserSignal != "" {
				// No recovery was due: the policy restarts nothing, or
				// the user ended the job.
				continue
			}
			how := "before any recovery phase"
			if p := r.Stage(); p != nil {
				how = "during its " + p.Stage + " phase"
			}
			st.NotRecovered = append(st.NotRecovered, fmt.Sprintf("%s, failed at %s: the job ended %s", subject, sec(r.Failure.AtMS), how))
		}
	}
}

// UserSignal names the user's signal that ended a finished job ("":
// none): the job's own failure (about no rank and no node), which only the
// user's signal and --timeout record, with an exit code of 128 plus a
// signal's number (--timeout's is 124).
func UserSignal(rep *journal.Report) string {
	if !rep.Status.Done {
		return ""
	}
	code := rep.Status.ExitCode
	if code <= 128 || code >= 128+65 {
		return ""
	}
	for i := range rep.Recoveries {
		if r := &rep.Recoveries[i]; r.Rank < 0 && r.Node == "" {
			return unix.SignalName(syscall.Signal(code - 128))
		}
	}
	return ""
}

func sec(ms float64) string { return fmt.Sprintf("+%.3fs", ms/1000) }
