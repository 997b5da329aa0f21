package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/jobstate"
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
  --exit-code       exit with the job's exit code (an unfinished job: 1; a
                    running one: 1, after printing its state)
  --help            print this help
`

func statusCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftlaunch status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	stateDir := fs.String("state-dir", "", "")
	asJSON := fs.Bool("json", false, "")
	exitCode := fs.Bool("exit-code", false, "")
	pos, err := parseArgs(fs, args)
	if done, code := usageError("status", statusUsage, err, pos, 0, 1, stdout, stderr); done {
		return code
	}
	st, err := jobstate.ReadStatus(*stateDir, strings.Join(pos, ""))
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch status: %v\n", err)
		return 1
	}
	if code := printResult("status", *asJSON, st, func(w io.Writer) error { return writeStatusText(w, st) }, stdout, stderr); code != 0 {
		return code
	}
	if *exitCode {
		if st.ExitCode == nil {
			return 1 // running, or its end never recorded
		}
		return *st.ExitCode
	}
	return 0
}

func writeStatusText(w io.Writer, st *jobstate.Status) error {
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
		switch {
		case st.Lost != "":
			fmt.Fprintf(bw, ": %s", st.Lost)
		case st.Message != "":
			fmt.Fprintf(bw, ": %s", st.Message)
		default:
			fmt.Fprint(bw, " (the job's end was never recorded)")
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
	if p := st.Policy(); p != "" {
		fmt.Fprintf(bw, "  %s\n", p)
	}
	if st.UserSignal != "" {
		fmt.Fprintf(bw, "  ended by the user's %s, not by a failure\n", st.UserSignal)
	}
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
