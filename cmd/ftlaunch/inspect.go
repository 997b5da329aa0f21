package main

// inspect.go is over 700 lines on purpose: the inspect command's flags,
// its report of one job and of a directory of jobs, and their JSON share
// one set of helpers (the timeline's drawing is launch/jobstate/svg.go).

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/jobstate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
)

const inspectUsage = `Usage: ftlaunch inspect [flags] [STATE]

Reads a job's state log after the job ended (or crashed) and prints its
timeline, launch phases, plan, node table, per-rank history and raft
metadata. STATE is a job's state directory, one replica's directory or its
raft.db file, a job id (looked up in the state directory), or nothing: the
latest job. The files are opened read-only; a running job holds them
locked (use ftlaunch status instead). See docs/state.md.

  --state-dir DIR   where jobs keep their state (default $XDG_STATE_HOME/ftlaunch/jobs,
                    else ~/.local/state/ftlaunch/jobs)
  --json            print one JSON object instead of text
  --svg FILE        also draw the launch timeline as SVG into FILE ("-": standard output,
                    instead of the text)
  --ranks N         node-table rows shown in text (default 64; 0: all; --json lists all)
  --help            print this help
`

type inspectOptions struct {
	stateDir string
	json     bool
	svg      string
	ranks    int
	target   string
}

// parseArgs parses flags that may come before or after the one
// positional argument.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func parseInspectFlags(args []string) (*inspectOptions, error) {
	o := &inspectOptions{}
	fs := flag.NewFlagSet("ftlaunch inspect", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.stateDir, "state-dir", "", "")
	fs.BoolVar(&o.json, "json", false, "")
	fs.StringVar(&o.svg, "svg", "", "")
	fs.IntVar(&o.ranks, "ranks", 64, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%v (see ftlaunch inspect --help)", err)
	}
	if len(pos) > 1 {
		return nil, fmt.Errorf("unexpected argument %q (see ftlaunch inspect --help)", pos[1])
	}
	if len(pos) == 1 {
		o.target = pos[0]
	}
	if o.ranks < 0 {
		return nil, fmt.Errorf("--ranks must be >= 0 (got %d)", o.ranks)
	}
	if o.json && o.svg == "-" {
		return nil, errors.New("--json and --svg - both write to standard output; give --svg a file")
	}
	return o, nil
}

func inspectCommand(args []string, stdout, stderr io.Writer) int {
	o, err := parseInspectFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, inspectUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch inspect: %v\n", err)
		return 2
	}
	res, err := jobstate.Load(o.stateDir, o.target)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch inspect: %v\n", err)
		return 1
	}
	out := newInspectOutput(res)
	if o.svg != "" {
		if err := jobstate.WriteSVGFile(o.svg, stdout, out.Report); err != nil {
			fmt.Fprintf(stderr, "ftlaunch inspect: %v\n", err)
			return 1
		}
		if o.svg == "-" {
			return 0
		}
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(out)
	} else {
		err = writeInspectText(stdout, out, o.ranks)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch inspect: write output: %v\n", err)
		return 1
	}
	return 0
}

// inspectOutput is what inspect prints (--json: this object).
type inspectOutput struct {
	StateDir string        `json:"state_dir"`
	Raft     raftInfo      `json:"raft"`
	Replicas []replicaInfo `json:"replicas"`
	*journal.Report
}

// raftInfo is the raft metadata of the replica the report was read from.
type raftInfo struct {
	Node           string      `json:"node"`
	Dir            string      `json:"dir"`
	Created        time.Time   `json:"created,omitzero"`
	Term           uint64      `json:"term"`
	FirstIndex     uint64      `json:"first_index"`
	LastIndex      uint64      `json:"last_index"`
	SnapshotIndex  uint64      `json:"snapshot_index,omitempty"`
	Members        []member    `json:"members"`
	Terms          []termStart `json:"terms"`
	RefusedEntries int         `json:"refused_entries"`
	Digest         string      `json:"digest"`
	Problems       []string    `json:"problems,omitempty"`
}

// termStart is where a term's entries begin: each new term is a leader.
type termStart struct {
	Term       uint64 `json:"term"`
	FirstIndex uint64 `json:"first_index"`
}

type member struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
}

// replicaInfo is one replica's files.
type replicaInfo struct {
	Node      string `json:"node,omitempty"`
	Path      string `json:"path"`
	Term      uint64 `json:"term,omitempty"`
	LastIndex uint64 `json:"last_index,omitempty"`
	Digest    string `json:"digest,omitempty"`
	Error     string `json:"error,omitempty"`
}

func newInspectOutput(res *jobstate.Loaded) *inspectOutput {
	in := res.Best
	out := &inspectOutput{StateDir: res.JobDir, Report: journal.Analyze(in.State)}
	d := in.State.Digest()
	out.Raft = raftInfo{
		Node: in.Meta.Node, Dir: in.Dir, Created: in.Meta.Created, Term: in.CurrentTerm,
		FirstIndex: in.FirstIndex, LastIndex: in.LastIndex, Terms: []termStart{},
		Digest: hex.EncodeToString(d[:]), Problems: in.Problems, Members: []member{},
	}
	for _, t := range in.Terms() {
		out.Raft.Terms = append(out.Raft.Terms, termStart{Term: t.Term, FirstIndex: t.FirstIndex})
	}
	if in.Snapshot != nil {
		out.Raft.SnapshotIndex = in.Snapshot.Index
	}
	for _, s := range in.Configuration.Servers {
		out.Raft.Members = append(out.Raft.Members, member{ID: string(s.ID), Address: string(s.Address), Suffrage: s.Suffrage.String()})
	}
	for _, e := range in.Entries {
		if e.Err != nil {
			out.Raft.RefusedEntries++
		}
	}
	for _, r := range res.Replicas {
		ri := replicaInfo{Path: r.Path}
		if r.Err != nil {
			ri.Error = r.Err.Error()
		} else {
			d := r.In.State.Digest()
			ri.Node, ri.Term, ri.LastIndex, ri.Digest = r.In.Meta.Node, r.In.CurrentTerm, r.In.LastIndex, hex.EncodeToString(d[:])
		}
		out.Replicas = append(out.Replicas, ri)
	}
	return out
}

// sec formats a time as seconds since the job's start.
func sec(ms float64) string { return fmt.Sprintf("+%.3fs", ms/1000) }

func writeInspectText(w io.Writer, out *inspectOutput, maxRanks int) error {
	rep := out.Report
	bw := &errWriter{w: w}
	job := rep.Job
	fmt.Fprintf(bw, "job %s: %d rank(s)", job.ID, job.N)
	if len(rep.Agents) > 0 {
		fmt.Fprintf(bw, " on %d node(s)", rep.Nodes())
	}
	if len(job.Argv) > 0 {
		fmt.Fprintf(bw, ": %s", strings.Join(job.Argv, " "))
	}
	fmt.Fprintln(bw)
	if !job.Start.IsZero() {
		fmt.Fprintf(bw, "started  %s\n", job.Start.Local().Format("2006-01-02 15:04:05.000 MST"))
	}
	if job.MPI != "" {
		fmt.Fprintf(bw, "served   %s (--mpi)\n", job.MPI)
	}
	switch {
	case rep.Status.Done:
		fmt.Fprintf(bw, "ended    %s, exit code %d", sec(rep.Status.EndMS), rep.Status.ExitCode)
		if rep.Status.Message != "" {
			fmt.Fprintf(bw, ": %s", rep.Status.Message)
		}
		fmt.Fprintln(bw)
	default:
		fmt.Fprintln(bw, "ended    never recorded: the front-end stopped before the job's end (crash or kill)")
	}
	fmt.Fprintf(bw, "state    %s\n", out.StateDir)
	fmt.Fprintf(bw, "policy   %s\n", jobstate.PolicyWords(job.Restart, job.MaxRestarts, job.Spares))

	fmt.Fprintln(bw, "\nPhases")
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	for _, p := range rep.Phases {
		fmt.Fprintf(tw, "  %s\t%s\t%10.1f ms\n", p.Name, sec(p.StartMS), p.Duration)
	}
	if len(rep.Phases) == 0 {
		fmt.Fprintln(tw, "  (no launch milestones recorded)")
	}
	tw.Flush()
	writeModel(bw, rep.Model)
	writeCollectives(bw, rep)

	writeRecoveries(bw, rep)

	fmt.Fprintln(bw, "\nTimeline")
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	evs := slices.Clone(rep.Events)
	slices.SortStableFunc(evs, func(a, b journal.ReportEvent) int { return a.Time.Compare(b.Time) })
	for _, ev := range evs {
		who := ev.Node
		if ev.Rank >= 0 {
			who = strings.TrimPrefix(fmt.Sprintf("%s rank %d", ev.Node, ev.Rank), " ")
		}
		if who == "" {
			who = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", sec(ev.AtMS), ev.Kind, who, ev.Detail)
	}
	tw.Flush()

	root := orDash(rep.Plan.Root)
	if rep.Leader != "" {
		// A replica agent took the root over: the plan's root is it now.
		root = fmt.Sprintf("%s, on node %s since it took over", root, rep.Leader)
	}
	fmt.Fprintf(bw, "\nPlan (%s tree, root %s)\n", orDash(rep.Plan.Kind), root)
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tLEVEL\tPRIMARY\tBACKUP\tADDRESS\tRANKS\tUP\tRANKS STARTED\tREM\tSEQ")
	for _, a := range rep.Agents {
		started := relTime(rep, a.RanksUp)
		if len(a.RanksRestarted) > 0 {
			// The launch's start; a recovery's are the agent's restarts.
			var again []string
			for i, t := range a.RanksRestarted {
				if i == 3 {
					again = append(again, fmt.Sprintf("... %d more", len(a.RanksRestarted)-i))
					break
				}
				again = append(again, relTime(rep, t))
			}
			started += " (again: " + strings.Join(again, ", ") + ")"
		}
		node, primary := a.Node, orDash(a.Primary)
		if a.Lost {
			node += " (lost)"
		}
		if rep.Leader != "" && a.Primary == rep.Plan.Root {
			primary = rep.Leader + " (root)"
			if a.Node == rep.Leader {
				primary = "- (the root)"
			}
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", node, a.Level, primary, orDash(a.Backup), orDash(a.Addr), a.Ranks,
			relTime(rep, a.Up), started, sampleSec(a.Rem), sampleSec(a.Seq))
	}
	tw.Flush()
	// The replicas the group had last (the raft configuration): the plan
	// names only those that were members when it was written.
	replicas := rep.Plan.Replicas
	if len(out.Raft.Members) > 0 {
		replicas = nil
		for _, m := range out.Raft.Members {
			replicas = append(replicas, m.ID)
		}
	}
	if len(replicas) > 0 {
		fmt.Fprintf(bw, "  root replicas: %s\n", strings.Join(replicas, ", "))
	}
	lost, never := replicasOut(*rep, replicas)
	if len(lost) > 0 {
		fmt.Fprintf(bw, "  root replicas lost and taken out of the group: %s\n", strings.Join(lost, ", "))
	}
	if len(never) > 0 {
		fmt.Fprintf(bw, "  root replicas that never joined the group: %s\n", strings.Join(never, ", "))
	}

	fmt.Fprintf(bw, "\nNode table (version %d, epoch %d", rep.Version, rep.Epoch)
	if rep.RecoveryEpoch > 0 {
		fmt.Fprintf(bw, ", recovery epoch %d", rep.RecoveryEpoch)
	}
	fmt.Fprintln(bw, ")")
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  RANK\tNODE\tPID\tINC\tSTATE\tEXIT\tI-TUPLE")
	for i, r := range rep.Ranks {
		if maxRanks > 0 && i == maxRanks {
			fmt.Fprintf(tw, "  ... %d more rank(s): --ranks 0 shows all\n", len(rep.Ranks)-i)
			break
		}
		it := r.ITuple
		if it == "" && len(r.ITupleBytes) > 0 {
			it = "0x" + hex.EncodeToString(r.ITupleBytes)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%d\t%s\t%d\t%s\n", r.Rank, orDash(r.Node), r.PID, r.Incarnation, r.State, r.ExitCode, orDash(it))
	}
	tw.Flush()

	writeRankHistory(bw, rep)

	ri := out.Raft
	fmt.Fprintf(bw, "\nRaft (read from replica %s)\n", ri.Node)
	fmt.Fprintf(bw, "  term %d, log %d..%d", ri.Term, ri.FirstIndex, ri.LastIndex)
	if ri.SnapshotIndex > 0 {
		fmt.Fprintf(bw, ", snapshot at %d", ri.SnapshotIndex)
	}
	fmt.Fprintf(bw, ", %d refused entr(ies)\n", ri.RefusedEntries)
	var ms []string
	for _, m := range ri.Members {
		ms = append(ms, fmt.Sprintf("%s (%s, %s)", m.ID, strings.ToLower(m.Suffrage), m.Address))
	}
	fmt.Fprintf(bw, "  members: %s\n", orDash(strings.Join(ms, ", ")))
	var ts []string
	for _, t := range ri.Terms {
		ts = append(ts, fmt.Sprintf("term %d from index %d", t.Term, t.FirstIndex))
	}
	fmt.Fprintf(bw, "  leaders: %s\n", orDash(strings.Join(ts, "; ")))
	fmt.Fprintf(bw, "  digest: %s\n", ri.Digest)
	for _, p := range ri.Problems {
		fmt.Fprintf(bw, "  problem: %s\n", p)
	}
	if len(out.Replicas) > 1 {
		fmt.Fprintln(bw, "  replicas:")
		for _, r := range out.Replicas {
			if r.Error != "" {
				fmt.Fprintf(bw, "    %s: %s\n", r.Path, r.Error)
				continue
			}
			fmt.Fprintf(bw, "    %s: term %d, last index %d, digest %.16s\n", r.Node, r.Term, r.LastIndex, r.Digest)
		}
	}
	if len(rep.Invariants) == 0 {
		fmt.Fprintln(bw, "  invariants: ok")
	} else {
		for _, v := range rep.Invariants {
			fmt.Fprintf(bw, "  invariant violated: %s\n", v)
		}
	}
	return bw.err
}

// subject names what failed: a rank (on its node, in its incarnation), a
// node, or the job.
func (r *recoveryView) subject() string {
	switch {
	case r.Rank >= 0 && r.Node != "":
		return fmt.Sprintf("rank %d on %s, incarnation %d", r.Rank, r.Node, r.Incarnation)
	case r.Rank >= 0:
		return fmt.Sprintf("rank %d, incarnation %d", r.Rank, r.Incarnation)
	case r.Node != "":
		return "node " + r.Node
	}
	return "the job"
}

type recoveryView struct{ *journal.Recovery }

// writeRecoveries prints each failure with the recovery phases that
// followed it, their durations and the outcome.
func writeRecoveries(w io.Writer, rep *journal.Report) {
	outcomes := map[string]int{}
	userSig, none := jobstate.UserSignal(rep), cmp.Or(rep.Job.Restart, "none") == "none"
	// A failure that ended the job where no recovery was due (the
	// policy restarts nothing, or it is the user's signal) is not "not
	// recovered".
	undue := func(r *journal.Recovery) bool {
		return r.Outcome == journal.OutcomeNotRecovered && (none || userSig != "" && r.Rank < 0 && r.Node == "")
	}
	for i := range rep.Recoveries {
		if o := rep.Recoveries[i].Outcome; undue(&rep.Recoveries[i]) {
			outcomes["ended the job"]++
		} else {
			outcomes[o]++
		}
	}
	var counts []string
	for _, o := range []string{journal.OutcomeResumed, journal.OutcomeRestarted, journal.OutcomeRecovered, journal.OutcomeInProgress, journal.OutcomeNotRecovered, "ended the job"} {
		if outcomes[o] > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", outcomes[o], o))
		}
	}
	fmt.Fprintf(w, "\nRecoveries (%d failure(s)", len(rep.Recoveries))
	if len(counts) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(counts, ", "))
	}
	fmt.Fprintln(w, ")")
	if len(rep.Recoveries) == 0 {
		fmt.Fprintln(w, "  (none: no failure was declared)")
	}
	for i := range rep.Recoveries {
		r := recoveryView{&rep.Recoveries[i]}
		fmt.Fprintf(w, "  %s  %s: %s\n", sec(r.Failure.AtMS), r.subject(), r.Failure.Detail)
		for _, x := range r.Repeats {
			fmt.Fprintf(w, "    %s  failed again (incarnation %d): %s\n", sec(x.AtMS), x.Incarnation, x.Detail)
		}
		switch {
		case len(r.Phases) == 0 && (r.Rank >= 0 || r.Node != ""):
			fmt.Fprintln(w, "    (no recovery phase recorded)")
		case len(r.Phases) > 0:
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "    PHASE\tEPOCH\tAT\tAFTER FAILURE\tDURATION\tDETAIL")
			for _, p := range r.Phases {
				dur := fmt.Sprintf("%.1f ms", p.DurationMS)
				switch {
				case p.Stage == "resumed" || p.Stage == "restarted":
					dur = "-"
				case p.Open && r.Outcome == journal.OutcomeNotRecovered:
					dur += " (until the job's end)"
				case p.Open:
					dur = "(the log ends here)"
				}
				_, detail, _ := strings.Cut(p.Detail, "; ")
				detail = orDash(detail)
				fmt.Fprintf(tw, "    %s\t%d\t%s\t+%.1f ms\t%s\t%s\n", orDash(p.Stage), p.Epoch, sec(p.AtMS), p.OffsetMS, dur, detail)
			}
			tw.Flush()
		}
		var again string
		if !r.Restarted.IsZero() {
			again = fmt.Sprintf(", started again at %s", sec(r.RestartedMS))
		}
		switch r.Outcome {
		case journal.OutcomeResumed, journal.OutcomeRestarted, journal.OutcomeRecovered:
			what := map[string]string{
				journal.OutcomeResumed:   "every rank went on",
				journal.OutcomeRestarted: "every rank was started again",
				journal.OutcomeRecovered: "resume sent; not every agent acknowledged it",
			}[r.Outcome]
			inc := ""
			if r.NewIncarnation > 0 {
				inc = fmt.Sprintf("; rank %d runs as incarnation %d%s", r.Rank, r.NewIncarnation, again)
			}
			fmt.Fprintf(w, "    %s at %s, %.1f ms after the failure: %s%s\n", r.Outcome, sec(r.EndMS), r.TotalMS, what, inc)
		case journal.OutcomeNotRecovered:
			at := ""
			switch {
			case undue(r.Recovery) && r.Rank < 0 && r.Node == "" && userSig != "":
				fmt.Fprintf(w, "    ended by the user's %s: no recovery was due\n", userSig)
				continue
			case undue(r.Recovery):
				fmt.Fprintf(w, "    no recovery was due (restart: none): the job ended at %s\n", sec(rep.Status.EndMS))
				continue
			}
			if p := r.Stage(); p != nil {
				at = fmt.Sprintf(" during its %s phase", p.Stage)
			}
			switch {
			case rep.Status.Done:
				fmt.Fprintf(w, "    not recovered: the job ended at %s%s%s\n", sec(rep.Status.EndMS), at, again)
			default:
				fmt.Fprintln(w, "    not recovered: the job's own failure ends it")
			}
		default:
			at := "before any recovery phase"
			if p := r.Stage(); p != nil {
				at = fmt.Sprintf("at its %s phase since %s", p.Stage, sec(p.AtMS))
			}
			fmt.Fprintf(w, "    in progress: the log ends %s%s (the job's end was never recorded)\n", at, again)
		}
	}
}

// writeRankHistory prints the ranks that failed, ended uncleanly or ran
// more than once: each incarnation with the events about it. Ranks with
// no event of their own (ranks restarted with the job, ranks that ended
// with the others of their node) are summed up by what befell them.
func writeRankHistory(w io.Writer, rep *journal.Report) {
	fmt.Fprintln(w, "\nRank history (ranks that failed, ended uncleanly or ran more than once)")
	n := 0
	type group struct {
		ranks []int
		text  string
	}
	var groups []*group
	byText := map[string]*group{}
	for _, r := range rep.Ranks {
		incs := r.Incarnations
		if len(r.History) == 0 {
			if len(incs) <= 1 && r.ExitCode == 0 {
				continue
			}
			var parts []string
			if len(incs) > 1 {
				var starts []string
				for _, in := range incs {
					starts = append(starts, fmt.Sprintf("%s (incarnation %d)", startText(in), in.Incarnation))
				}
				parts = append(parts, "started "+strings.Join(starts, ", "))
			}
			parts = append(parts, fmt.Sprintf("now incarnation %d, %s, exit code %d", r.Incarnation, r.State, r.ExitCode))
			if len(incs) > 0 && incs[len(incs)-1].End != "" && r.ExitCode != 0 {
				last := incs[len(incs)-1]
				how := last.End
				if last.Shared {
					how += ", with other ranks of its node"
				}
				parts = append(parts, "ended: "+how)
			}
			text := strings.Join(parts, "; ")
			g := byText[text]
			if g == nil {
				g = &group{text: text}
				byText[text] = g
				groups = append(groups, g)
			}
			g.ranks = append(g.ranks, r.Rank)
			continue
		}
		n++
		fmt.Fprintf(w, "  rank %d (now incarnation %d on %s, %s, exit code %d)\n", r.Rank, r.Incarnation, orDash(r.Node), r.State, r.ExitCode)
		// Each event goes to the incarnation it names, else to the one
		// that ran at its time (a recovery's phases).
		evs := make([][]journal.ReportEvent, len(incs))
		var loose []journal.ReportEvent
		for _, h := range r.History {
			k := -1
			for i, in := range incs {
				if h.Incarnation > 0 && in.Incarnation == h.Incarnation {
					k = i
					break
				}
				if h.Incarnation == 0 && (in.Started.IsZero() || !in.Started.After(h.Time)) {
					k = i
				}
			}
			if k < 0 && h.Incarnation == 0 && len(incs) > 0 {
				k = 0
			}
			if k < 0 {
				loose = append(loose, h)
				continue
			}
			evs[k] = append(evs[k], h)
		}
		for i, in := range incs {
			fmt.Fprintf(w, "    incarnation %d", in.Incarnation)
			if in.Node != "" {
				fmt.Fprintf(w, " on %s", in.Node)
			}
			fmt.Fprintf(w, ": started %s", startText(in))
			if !in.Ended.IsZero() {
				fmt.Fprintf(w, ", ended %s: %s", sec(in.EndedMS), in.End)
				if in.Shared {
					fmt.Fprint(w, ", with other ranks of its node")
				}
			}
			fmt.Fprintln(w)
			writeHistory(w, "      ", evs[i], in.Node)
		}
		writeHistory(w, "    ", loose, "")
	}
	for _, g := range groups {
		what := "rank"
		if len(g.ranks) > 1 {
			what = "ranks"
		}
		fmt.Fprintf(w, "  %s %s: %s\n", what, journal.RankList(g.ranks), g.text)
		n++
	}
	if n == 0 {
		fmt.Fprintln(w, "  (none: no rank failed, ended uncleanly or was started again)")
	}
}

func startText(in journal.RankIncarnation) string {
	if in.Started.IsZero() {
		return "-"
	}
	return sec(in.StartedMS)
}

// writeHistory prints a rank's events; node is the incarnation's (an
// event on another node says so).
func writeHistory(w io.Writer, indent string, evs []journal.ReportEvent, node string) {
	for _, h := range evs {
		where := ""
		if h.Node != "" && h.Node != node {
			where = " (on " + h.Node + ")"
		}
		detail := h.Detail
		if h.Step == journal.StepExit {
			detail = strings.TrimPrefix(detail, journal.StepExit+": ")
		}
		fmt.Fprintf(w, "%s%s  %-9s  %s%s\n", indent, sec(h.AtMS), h.Kind, detail, where)
	}
}

func relTime(rep *journal.Report, t time.Time) string {
	if t.IsZero() || rep.Job.Start.IsZero() {
		return "-"
	}
	return sec(float64(t.Sub(rep.Job.Start).Microseconds()) / 1000)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	_, e.err = e.w.Write(p)
	return len(p), nil
}

// sampleSec formats a model sample in seconds, "-" when not recorded.
func sampleSec(s float64) string {
	if s == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3fs", s)
}

// writeModel says the launch-time model's prediction beside the
// launch's measurement (docs/model.md), if the launch recorded them.
func writeModel(w io.Writer, m *journal.ReportModel) {
	if m == nil {
		return
	}
	fmt.Fprintf(w, "\nModel    %s tree: predicted %.3f s, measured %.3f s", orDash(m.Tree), m.PredictedSeconds, m.MeasuredSeconds)
	if m.Error != 0 {
		fmt.Fprintf(w, " (%+.0f %%)", 100*m.Error)
	}
	fmt.Fprintf(w, "\n         seq %.3f s, rem %.3f s, handoff %.3f s from %s", m.Seq, m.Rem, m.Hand, orDash(m.Source))
	if m.Launches > 0 {
		fmt.Fprintf(w, " (p%.0f of %d launches; rem p25-p75 %.3f-%.3f s)", 100*m.Quantile, m.Launches, m.RemLow, m.RemHigh)
	}
	if m.Cores > 0 {
		fmt.Fprintf(w, "; shared CPU: %d cores, %.1f ms each launch, %.1f ms each agent once up", m.Cores, 1000*m.Work, 1000*m.After)
		if m.Rate > 0 {
			fmt.Fprintf(w, " and %.3f cores while the launch goes on", m.Rate)
		}
	}
	fmt.Fprintln(w)
	if m.Choice != "" {
		fmt.Fprintf(w, "         auto: %s\n", m.Choice)
	}
}

// writeCollectives says what the job's collectives cost the root that
// ended it, by kind (docs/collectives.md), and which were stranded.
func writeCollectives(w io.Writer, rep *journal.Report) {
	if len(rep.Collectives) > 0 {
		fmt.Fprintln(w, "\nCollectives (the root that ended the job)")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  kind\tanswered\tmessages at the root\tagents covered\tbytes sent down\t")
		for _, k := range rep.Collectives {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t\n", k.Kind, k.Count, k.Messages, k.Agents, k.BytesDown)
		}
		tw.Flush()
	}
	for _, s := range rep.Stranded {
		who := "the ranks of node " + s.Node
		if s.Rank >= 0 {
			who = fmt.Sprintf("rank %d on node %s", s.Rank, s.Node)
		}
		what := "a collective"
		if s.Op != "" {
			what = fmt.Sprintf("collective %d (%s) of epoch %d", s.Seq, s.Op, s.Epoch)
		}
		fmt.Fprintf(w, "stranded %s: %s ended without joining it\n", what, who)
	}
}

// replicasOut sorts the plan's replicas that are not in the group's last
// configuration (members): those lost after they had joined, and those
// that never joined (the job ended before its group formed, or they were
// lost first). The front-end's replica founded the group, so once a
// replica agent took the root over (Leader) the front-end's is a lost
// one; so is a replica whose agent the job lost. The front-end's replica
// is named for its host, which is no node of the plan (the plan calls
// the root journal.RootName), so it is the replica the plan's nodes do
// not name.
func replicasOut(rep journal.Report, members []string) (lost, never []string) {
	for _, n := range rep.Plan.Replicas {
		if slices.Contains(members, n) {
			continue
		}
		founder := rep.Leader != "" && !slices.ContainsFunc(rep.Plan.Nodes, func(p journal.ReportNode) bool { return p.Name == n })
		agentLost := slices.ContainsFunc(rep.Agents, func(a journal.AgentTimeline) bool { return a.Node == n && a.Lost })
		if founder || agentLost {
			lost = append(lost, n)
		} else {
			never = append(never, n)
		}
	}
	return lost, never
}
