package harness

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/trial"
	"github.com/ftlaunch/ftlaunch/launch/sshspawn"
)

func faultList(fs []trial.Fault) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ",")
}

// replayCommand is the command line that runs trial r again, with every
// flag that shaped it, each word quoted for a POSIX shell (an application's
// `-c 'sleep 3; exit 3'` must not run `exit 3` in the shell it is pasted
// into).
func replayCommand(o *Options, seed uint64) string {
	self, err := os.Executable()
	if err != nil {
		self = "ftlaunch"
	}
	args := []string{self, "chaos", "--cluster", o.Cluster, "--nodes", strconv.Itoa(o.Nodes), "--ppn", strconv.Itoa(o.PPN),
		"--trials", "1", "--seed", strconv.FormatUint(seed, 10), "--when", o.When, "--concurrent", strconv.Itoa(o.Concurrent),
		"--restart", o.Restart, "--replicas", strconv.Itoa(o.Replicas), "--spare-nodes", strconv.Itoa(o.SpareNodes), "--tree", o.Tree,
		"--steps", strconv.Itoa(o.Steps), "--interval", o.Interval.String()}
	if o.Faults != "" {
		args = append(args, "--faults", o.Faults)
	}
	if o.Strict {
		args = append(args, "--strict")
	}
	if o.TrialLimit > 0 {
		args = append(args, "--trial-timeout", o.TrialLimit.String())
	}
	if o.Out != "" {
		args = append(args, "--out", o.Out)
	}
	if o.Cluster == string(trial.Emulated) && (o.ClusterName != DefaultClusterName || o.ClusterPrefix != DefaultClusterPrefix) {
		args = append(args, "--cluster-name", o.ClusterName, "--cluster-prefix", o.ClusterPrefix)
	}
	if o.AppKind != KindDefault {
		args = append(args, "--app-kind", string(o.AppKind))
	}
	if o.App != "" {
		args = append(args, "--app", o.App)
		if len(o.AppArgs) > 0 {
			args = append(append(args, "--"), o.AppArgs...)
		}
	}
	for i, a := range args {
		args[i] = sshspawn.Quote(a)
	}
	return strings.Join(args, " ")
}

// at is ds[k], or -1 beyond its end.
func at(ds []time.Duration, k int) time.Duration {
	if k < len(ds) {
		return ds[k]
	}
	return -1
}

func secs(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprintf("%.3fs", d.Seconds())
}

// writeTrialReport prints one trial: its faults with their times, the
// ending, the durations measured, and pass or the first violation.
func writeTrialReport(w io.Writer, o *Options, r *trialResult) {
	tr := r.trial
	fmt.Fprintf(w, "trial %d seed %d, %s phase", tr.Index+1, tr.Seed, tr.Phase)
	if tr.Hold >= 0 {
		fmt.Fprintf(w, " (%s held back)", r.hold)
	}
	fmt.Fprintln(w, ":")
	for k, a := range r.applied {
		if a.Skipped != "" {
			fmt.Fprintf(w, "  fault %-16s not applied: %s\n", a.Action.String(), a.Skipped)
			continue
		}
		fmt.Fprintf(w, "  fault %-16s", a.Action.String())
		if a.PID > 0 {
			fmt.Fprintf(w, " pid %d", a.PID)
		}
		fmt.Fprintf(w, " at +%.3fs", a.Time.Sub(r.start).Seconds())
		if a.Trigger {
			fmt.Fprint(w, " (the trigger)")
		}
		if a.During != "" {
			fmt.Fprintf(w, " in the recovery's %s stage", a.During)
		}
		if d := at(r.detect, k); d >= 0 {
			fmt.Fprintf(w, ", detected after %s", secs(d))
			if tr.Phase == trial.Launch && a.Tabled && o.Policy != trial.NoRestart {
				fmt.Fprint(w, " (after the first node table)")
			}
		}
		if d := at(r.resumed, k); d >= 0 {
			again := "SIGCONT"
			if a.Fault == trial.Partition {
				again = "healed"
			}
			fmt.Fprintf(w, ", %s after %s", again, secs(d))
		}
		if k < len(r.stale) && r.stale[k] != nil {
			st := r.stale[k]
			fmt.Fprintf(w, "; its incarnation: %d process(es) up at the job's end", st.atEnd)
			if st.back {
				fmt.Fprintf(w, ", %d when it ran again", st.atBack)
			}
			if st.back && st.atBack > 0 && st.gone >= 0 {
				fmt.Fprintf(w, ", the last gone %s after", secs(st.gone))
			}
		}
		fmt.Fprintln(w)
	}
	for _, rc := range r.outcome.Recoveries {
		fmt.Fprintf(w, "  recovery of %s: %s", rc.Subject, rc.Outcome)
		if rc.Done {
			fmt.Fprintf(w, ", %.3fs after the failure", rc.TotalMS/1000)
		}
		fmt.Fprintln(w)
	}
	if gap, rank, ok := trial.ClosestReplacement(r.outcome.Spans); ok {
		fmt.Fprintf(w, "  incarnations: the closest replacement (rank %d) started %.3fs after its predecessor ended\n", rank, gap.Seconds())
	}
	fmt.Fprintf(w, "  ended %s", r.ending())
	if r.takeover >= 0 {
		fmt.Fprintf(w, "; successor root took over after %s", secs(r.takeover))
	}
	fmt.Fprintf(w, "; job over after %s with %d of its processes up; the last gone %s after that (or after the last SIGCONT)\n",
		secs(r.jobTime), r.atEnd, secs(r.cleanup))
	for _, n := range r.notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if r.pass() {
		fmt.Fprintln(w, "  PASS")
		return
	}
	fmt.Fprintf(w, "  FAIL %s\n", r.violations[0])
	for _, v := range r.violations[1:] {
		fmt.Fprintf(w, "       also %s\n", v)
	}
	fmt.Fprintf(w, "  kept: %s\n", r.dir)
	fmt.Fprintf(w, "  replay: %s\n", replayCommand(o, tr.Seed))
}

// writeChaosSummary prints one row per trial.
func writeChaosSummary(w io.Writer, rs []*trialResult) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRIAL\tSEED\tPHASE\tFAULTS\tDETECTED\tRECOVERED\tENDED\tCLEANUP\tRESULT")
	for _, r := range rs {
		var fs, det []string
		for k, a := range r.applied {
			s := a.Action.String()
			if a.Skipped != "" {
				s += " (not applied)"
			}
			fs = append(fs, s)
			if d := at(r.detect, k); d >= 0 {
				det = append(det, secs(d))
			}
		}
		if r.takeover >= 0 {
			det = append(det, "takeover "+secs(r.takeover))
		}
		if len(det) == 0 {
			det = []string{"-"}
		}
		var rec []string
		for _, rc := range r.outcome.Recoveries {
			if rc.Done {
				rec = append(rec, fmt.Sprintf("%.3fs", rc.TotalMS/1000))
			} else {
				rec = append(rec, rc.Outcome)
			}
		}
		if len(rec) == 0 {
			rec = []string{"-"}
		}
		res := "pass"
		if !r.pass() {
			res = "FAIL " + r.violations[0].Invariant
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.trial.Index+1, r.trial.Seed, r.trial.Phase,
			strings.Join(fs, " + "), strings.Join(det, ","), strings.Join(rec, ","), r.ending(), secs(r.cleanup), res)
	}
	tw.Flush()
}
