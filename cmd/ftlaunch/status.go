package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch"
	"github.com/ftlaunch/ftlaunch/launch/journal"
)

const statusUsage = `Usage: ftlaunch status [flags] [JOB]

Prints a job's state once: running, finished (with its exit code) or
unfinished (its front-end stopped before the end), and its ranks by state.
JOB is a job id, a job's state directory, or nothing: the latest job.

A finished job's state is read from its files. A running job holds them
locked; its root (the front-end, or the replica agent that took over after
the front-end was lost) keeps a live report beside them (live.json,
rewritten every second), which status prints instead: the launch phase,
agents up, ranks running and ended, the failure that ends the job if any.

  --state-dir DIR   where jobs keep their state (default $XDG_STATE_HOME/ftlaunch/jobs,
                    else ~/.local/state/ftlaunch/jobs)
  --json            print one JSON object instead of text
  --help            print this help
`

// jobStatus is what status prints (--json: this object).
type jobStatus struct {
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
}

func statusCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftlaunch status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	stateDir := fs.String("state-dir", "", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, statusUsage)
		return 0
	}
	if err == nil && len(pos) > 1 {
		err = fmt.Errorf("unexpected argument %q", pos[1])
	}
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch status: %v (see ftlaunch status --help)\n", err)
		return 2
	}
	target := ""
	if len(pos) == 1 {
		target = pos[0]
	}
	st, err := readStatus(*stateDir, target)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch status: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(st)
	} else {
		err = writeStatusText(stdout, st)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch status: write output: %v\n", err)
		return 1
	}
	return 0
}

// readStatus reads a job's status from its files; a job whose files are
// locked is running.
func readStatus(stateDir, target string) (*jobStatus, error) {
	res, err := loadState(stateDir, target)
	var running *errRunning
	if errors.As(err, &running) {
		st := &jobStatus{Job: filepath.Base(running.path), StateDir: running.path, State: "running"}
		if l, err := launch.ReadLive(running.path); err == nil {
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
	st := &jobStatus{
		Job: rep.Job.ID, StateDir: res.JobDir, State: "unfinished", Argv: rep.Job.Argv, N: rep.Job.N,
		Nodes: len(rep.Agents), Start: rep.Job.Start, Ranks: map[string]int{},
	}
	if rep.Status.Done {
		code := rep.Status.ExitCode
		st.State, st.ExitCode, st.Message, st.End = "finished", &code, rep.Status.Message, rep.Status.End
	}
	frontendLost := !rep.Status.Done && rep.Job.Replicas <= 1
	if frontendLost {
		// Its files are not locked: the front-end, the job's only root, is
		// gone, and every agent that lost it killed its ranks.
		st.Lost = "front-end lost; ranks were cleaned up by their agents"
	}
	for _, r := range rep.Ranks {
		state := r.State
		if frontendLost && (state == "starting" || state == "running" || state == "suspended") {
			state = "cleaned up"
		}
		st.Ranks[state]++
	}
	// The failures, a rank's failure again while the first was open
	// included (the log keeps it as a launch event).
	for _, r := range rep.Recoveries {
		st.Failures = append(st.Failures, r.Failure.Detail)
		for _, again := range r.Repeats {
			st.Failures = append(st.Failures, again.Detail)
		}
	}
	recoveryStatus(st, rep)
	return st, nil
}

// recoveryStatus sums up a job's recoveries: how many were over, and
// where those still open stand.
func recoveryStatus(st *jobStatus, rep *journal.Report) {
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
			how := "before any recovery phase"
			if p := r.Stage(); p != nil {
				how = "during its " + p.Stage + " phase"
			}
			st.NotRecovered = append(st.NotRecovered, fmt.Sprintf("%s, failed at %s: the job ended %s", subject, sec(r.Failure.AtMS), how))
		}
	}
}

func writeStatusText(w io.Writer, st *jobStatus) error {
	bw := &errWriter{w: w}
	fmt.Fprintf(bw, "job %s: %s", st.Job, st.State)
	switch st.State {
	case "running":
		l := st.Live
		if l == nil {
			fmt.Fprintf(bw, " (its files are held by its replicas; no live report yet)\n")
			fmt.Fprintf(bw, "  state: %s\n", st.StateDir)
			return bw.err
		}
		age := time.Since(l.Updated)
		if l.Phase != "running" {
			fmt.Fprintf(bw, ", %s", l.Phase)
		}
		fmt.Fprintf(bw, " (live report of its root on %s, %.1f s old", l.Root, age.Seconds())
		if age > 5*time.Second {
			fmt.Fprint(bw, "; stale: the root may be stuck or gone")
		}
		fmt.Fprint(bw, ")")
		if l.Failover {
			fmt.Fprint(bw, "\n  the front-end was lost; a root replica took over")
		}
		fmt.Fprintln(bw)
		fmt.Fprintf(bw, "  %d rank(s) on %d node(s): %s\n", st.N, st.Nodes, strings.Join(st.Argv, " "))
		fmt.Fprintf(bw, "  started %s, %.1f s ago\n", st.Start.Local().Format("2006-01-02 15:04:05 MST"), time.Since(st.Start).Seconds())
		fmt.Fprintf(bw, "  agents: %d of %d up; ranks: %d running, %d ended\n", l.AgentsUp, l.Agents, l.Running, l.Ended)
		if r := l.Recovery; r != nil {
			subject := "the job (every rank started again)"
			if len(r.Ranks) > 0 {
				subject = "rank(s) " + strings.Trim(fmt.Sprint(r.Ranks), "[]")
			}
			fmt.Fprintf(bw, "  recovering %s: at its %s phase (epoch %d), %.1f s after the failure\n", subject, r.Stage, r.Epoch, l.Updated.Sub(r.Failed).Seconds())
		}
		if l.Recoveries > 0 {
			fmt.Fprintf(bw, "  recoveries: %d over\n", l.Recoveries)
		}
		for _, f := range st.Failures {
			fmt.Fprintf(bw, "  failure: %s\n", f)
		}
		fmt.Fprintf(bw, "  state: %s\n", st.StateDir)
		return bw.err
	case "finished":
		fmt.Fprintf(bw, ", exit code %d", *st.ExitCode)
		if st.Message != "" {
			fmt.Fprintf(bw, ": %s", st.Message)
		}
	case "unfinished":
		if st.Lost != "" {
			fmt.Fprintf(bw, ": %s", st.Lost)
		} else {
			fmt.Fprint(bw, " (the front-end stopped before the job's end was recorded)")
		}
	}
	fmt.Fprintln(bw)
	fmt.Fprintf(bw, "  %d rank(s) on %d node(s): %s\n", st.N, st.Nodes, strings.Join(st.Argv, " "))
	if !st.Start.IsZero() {
		fmt.Fprintf(bw, "  started %s", st.Start.Local().Format("2006-01-02 15:04:05 MST"))
		if !st.End.IsZero() {
			fmt.Fprintf(bw, ", ran %.3f s", st.End.Sub(st.Start).Seconds())
		}
		fmt.Fprintln(bw)
	}
	var parts []string
	for _, s := range []string{"unknown", "starting", "running", "suspended", "exited", "failed", "cleaned up"} {
		if n := st.Ranks[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	fmt.Fprintf(bw, "  ranks: %s\n", strings.Join(parts, ", "))
	for _, f := range st.Failures {
		fmt.Fprintf(bw, "  failure: %s\n", f)
	}
	if st.Recoveries > 0 {
		fmt.Fprintf(bw, "  recoveries: %d, the longest %.1f ms from the failure to the rank running again\n", st.Recoveries, st.Longest)
	}
	for _, r := range st.Recovering {
		fmt.Fprintf(bw, "  %s", r)
		if st.State == "unfinished" {
			fmt.Fprint(bw, "; the log ends there")
		}
		fmt.Fprintln(bw)
	}
	for _, r := range st.NotRecovered {
		fmt.Fprintf(bw, "  not recovered: %s\n", r)
	}
	fmt.Fprintf(bw, "  state: %s\n", st.StateDir)
	return bw.err
}
