package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/ftlaunch/ftlaunch/launch/jobstate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/raftstore"
)

var testNodes = []string{"node0", "node1", "node2", "node3"}

// recordJob writes a finished job of 4 nodes x 4 ranks through the
// journal, as the front-end does; rank 6 exits with code 3 and the job
// fails.
func recordJob(t *testing.T, stateDir, id string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(context.Background(), journal.Config{StateDir: stateDir, Node: "fe",
		Job: journal.Job{ID: id, Argv: []string{"./app", "--size", "16"}, N: 16, Nodes: testNodes}})
	if err != nil {
		t.Fatal(err)
	}
	j.Plan(journal.FlatPlan(testNodes))
	t0 := time.Now()
	for i, n := range testNodes {
		j.AgentUp(journal.AgentUp{Node: n, Addr: fmt.Sprintf("10.0.0.%d:7100", i+1), Launched: t0.Add(time.Duration(i) * time.Millisecond),
			SSH: 3 * time.Millisecond, Connected: t0.Add(time.Duration(5+i) * time.Millisecond)})
	}
	names, its := make([]string, 16), make([][]byte, 16)
	for i, n := range testNodes {
		var ranks, pids []int
		for r := 4 * i; r < 4*i+4; r++ {
			ranks, pids = append(ranks, r), append(pids, 2000+r)
			names[r], its[r] = n, fmt.Appendf(nil, "10.0.0.%d:%d", i+1, 30000+r)
		}
		j.RanksStarted(n, ranks, pids)
	}
	j.NodeTable(names, its)
	for r := range 16 {
		if r == 6 {
			j.RankExited(journal.RankExit{Rank: 6, Code: 3})
			j.Failure(journal.Failure{Node: "node1", Rank: 6, Message: "rank 6 on node node1 exited with code 3"})
			continue
		}
		j.RankExited(journal.RankExit{Rank: r, Signal: 15 * boolInt(r > 6)})
	}
	if err := j.Close(context.Background(), 3, "rank 6 on node node1 exited with code 3"); err != nil {
		t.Fatal(err)
	}
	return j
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func run(t *testing.T, cmd func([]string, io.Writer, io.Writer) int, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cmd(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestInspectText(t *testing.T) {
	dir := t.TempDir()
	recordJob(t, dir, "ft-older")
	recordJob(t, dir, "ft-text")
	code, out, errs := run(t, inspectCommand, "--state-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"job ft-text: 16 rank(s) on 4 node(s): ./app --size 16",
		"exit code 3: rank 6 on node node1 exited with code 3",
		"launch agents", "exchange node table", "up: connected back from 10.0.0.2:7100",
		"Plan (flat tree, root ftlaunch-root)", "node3  1      ftlaunch-root",
		"Node table (version", "10.0.0.2:30006", "rank 6 (now incarnation 1 on node1, exited, exit code 3)",
		"    incarnation 1 on node1: started +", ", ended +",
		"Recoveries (1 failure(s): 1 ended the job)", "rank 6 on node1, incarnation 1: rank 6 on node node1 exited with code 3",
		"    no recovery was due (restart: none): the job ended at +", "policy   restart: none\n", "now incarnation 1, exited, exit code 143; ended: killed by signal 15 (exit code 143), with other ranks of its node",
		"members: fe (voter,", "invariants: ok",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if t.Failed() {
		return
	}
	// --ranks bounds the table.
	_, out, _ = run(t, inspectCommand, "--state-dir", dir, "--ranks", "2", "ft-older")
	if !strings.Contains(out, "job ft-older") || !strings.Contains(out, "... 14 more rank(s)") {
		t.Errorf("--ranks 2:\n%s", out)
	}
}

func TestInspectJSON(t *testing.T) {
	dir := t.TempDir()
	j := recordJob(t, dir, "ft-json")
	code, out, errs := run(t, inspectCommand, j.Dir(), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		StateDir string `json:"state_dir"`
		Job      struct {
			ID   string
			N    int
			Argv []string
		}
		Status struct {
			Done     bool
			ExitCode int `json:"exit_code"`
		}
		Raft struct {
			LastIndex uint64 `json:"last_index"`
			Members   []struct{ ID string }
			Digest    string
		}
		Events []struct {
			Index uint64
			Kind  string
		}
		Ranks []struct {
			Rank     int
			Node     string
			ITuple   string
			State    string
			ExitCode int `json:"exit_code"`
		}
		Agents []struct {
			Node  string
			Level int
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.StateDir != j.Dir() || got.Job.ID != "ft-json" || got.Job.N != 16 || !got.Status.Done || got.Status.ExitCode != 3 {
		t.Errorf("job %+v status %+v dir %s", got.Job, got.Status, got.StateDir)
	}
	if got.Raft.LastIndex == 0 || len(got.Raft.Members) != 1 || got.Raft.Members[0].ID != "fe" || len(got.Raft.Digest) != 64 {
		t.Errorf("raft %+v", got.Raft)
	}
	if len(got.Ranks) != 16 {
		t.Fatalf("%d ranks", len(got.Ranks))
	}
	for r, rk := range got.Ranks {
		if rk.Rank != r || rk.Node != testNodes[r/4] || rk.ITuple != fmt.Sprintf("10.0.0.%d:%d", r/4+1, 30000+r) {
			t.Errorf("rank %d: %+v", r, rk)
		}
	}
	if got.Ranks[7].ExitCode != 143 || got.Ranks[6].ExitCode != 3 {
		t.Errorf("exit codes: rank 6 %d, rank 7 %d", got.Ranks[6].ExitCode, got.Ranks[7].ExitCode)
	}
	for i := 1; i < len(got.Events); i++ {
		if got.Events[i].Index < got.Events[i-1].Index {
			t.Errorf("event %d at index %d after %d", i, got.Events[i].Index, got.Events[i-1].Index)
		}
	}
	if got.Events[len(got.Events)-1].Kind != "job-end" || len(got.Agents) != 4 {
		t.Errorf("events %+v agents %+v", got.Events, got.Agents)
	}
}

func TestInspectSVG(t *testing.T) {
	dir := t.TempDir()
	j := recordJob(t, dir, "ft-svg")
	svg := filepath.Join(t.TempDir(), "job.svg")
	if code, _, errs := run(t, inspectCommand, "--svg", svg, "--state-dir", dir, "ft-svg"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	rows, bars, markers, recoveries := 0, 0, 0, 0
	var nodes []string
	dec := xml.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, b)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch attr(se, "class") {
			case "row":
				rows++
				nodes = append(nodes, attr(se, "data-node"))
			case "bar":
				bars++
			case "marker":
				markers++
			case "recovery":
				recoveries++
			}
		}
	}
	if rows != 4 || strings.Join(nodes, ",") != strings.Join(testNodes, ",") {
		t.Errorf("%d rows %q, want one per agent", rows, nodes)
	}
	// Each agent: ssh, connect-back, rank start, wait, run; rank 6's
	// failure on node1's row and on a row of its own.
	if bars < 4*4 || markers != 2 || recoveries != 1 {
		t.Errorf("%d bars, %d markers, %d recovery rows", bars, markers, recoveries)
	}
	// --svg - writes the picture to standard output instead of the text.
	code, out, _ := run(t, inspectCommand, "--svg", "-", j.ReplicaDir())
	if code != 0 || !strings.HasPrefix(out, "<?xml") || strings.Contains(out, "Phases") {
		t.Errorf("--svg -: exit %d, %.80q", code, out)
	}
}

func attr(se xml.StartElement, name string) string {
	for _, a := range se.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// TestInspectPaths: a job directory, a replica directory, its raft.db, a
// job id, a state directory (its latest job) and nothing (the default
// state directory's latest job) all name the same job.
func TestInspectPaths(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", dir)
	def, err := journal.DefaultStateDir()
	if err != nil {
		t.Fatal(err)
	}
	j := recordJob(t, def, "ft-paths")
	for _, args := range [][]string{
		{j.Dir()}, {j.ReplicaDir()}, {filepath.Join(j.ReplicaDir(), raftstore.DBFile)}, {"ft-paths"}, {def}, {},
	} {
		code, out, errs := run(t, inspectCommand, append(args, "--json")...)
		if code != 0 || !strings.Contains(out, `"id": "ft-paths"`) {
			t.Errorf("inspect %q: exit %d: %s", args, code, errs)
		}
	}
	if code, _, errs := run(t, inspectCommand, "ft-none"); code != 1 || !strings.Contains(errs, "no job ft-none in "+def) {
		t.Errorf("unknown job: exit %d: %s", code, errs)
	}
	if code, _, errs := run(t, inspectCommand, "--state-dir", t.TempDir()); code != 1 || !strings.Contains(errs, "no job has been started") {
		t.Errorf("empty state dir: exit %d: %s", code, errs)
	}
	if code, _, _ := run(t, inspectCommand, "a", "b"); code != 2 {
		t.Errorf("two arguments: exit %d", code)
	}
}

// TestInspectBadFiles: truncated, damaged, foreign and empty files get a
// clear error and exit code 1, never a panic.
func TestInspectBadFiles(t *testing.T) {
	dir := t.TempDir()
	j := recordJob(t, dir, "ft-bad")
	db := filepath.Join(j.ReplicaDir(), raftstore.DBFile)
	orig, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(scratch, name, raftstore.DBFile)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	damaged := append([]byte(nil), orig...)
	for i := 4096 * 2; i < len(damaged); i++ {
		damaged[i] = 0xa5
	}
	other := filepath.Join(scratch, "other", raftstore.DBFile)
	if err := os.MkdirAll(filepath.Dir(other), 0o700); err != nil {
		t.Fatal(err)
	}
	bdb, err := bbolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("accounts")); return err }); err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	for _, c := range []struct {
		path, want string
	}{
		{write("truncated", orig[:3*4096]), "truncated or corrupt"},
		{write("damaged", damaged), "truncated or corrupt"},
		{write("empty", nil), "truncated or corrupt"},
		{write("text", []byte("hello, this is not a database\n")), "truncated or corrupt"},
		{other, "not an ftlaunch replica database"},
	} {
		code, _, errs := run(t, inspectCommand, c.path)
		if code != 1 || !strings.Contains(errs, c.want) || !strings.HasPrefix(errs, "ftlaunch inspect: ") {
			t.Errorf("%s: exit %d, %q; want %q", c.path, code, errs, c.want)
		}
		if code, _, errs := run(t, statusCommand, filepath.Dir(c.path)); code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("status %s: exit %d, %q", c.path, code, errs)
		}
	}
}

// TestInspectRunning: a running job's files are locked; inspect says so
// at once and points to status, which reports the job as running.
func TestInspectRunning(t *testing.T) {
	dir := t.TempDir()
	j, err := journal.Open(context.Background(), journal.Config{StateDir: dir, Node: "fe", Job: journal.Job{ID: "ft-live", N: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close(context.Background(), 0, "")
	if err := j.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, _, errs := run(t, inspectCommand, "--state-dir", dir)
	if code != 1 || !strings.Contains(errs, "held by a running ftlaunch") || !strings.Contains(errs, "ftlaunch status") {
		t.Errorf("exit %d: %s", code, errs)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("inspect took %v on a locked job", d)
	}
	code, out, errs := run(t, statusCommand, "--state-dir", dir, "--json")
	var st jobstate.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.State != "running" || st.Job != "ft-live" {
		t.Errorf("status: exit %d %s %s", code, out, errs)
	}
}

func TestStatus(t *testing.T) {
	dir := t.TempDir()
	recordJob(t, dir, "ft-status")
	code, out, errs := run(t, statusCommand, "ft-status", "--state-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"job ft-status: finished, exit code 3", "16 rank(s) on 4 node(s): ./app --size 16", "ranks: 16 exited", "failure: rank 6"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = run(t, statusCommand, "--json", "--state-dir", dir)
	var st jobstate.Status
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.State != "finished" || st.ExitCode == nil || *st.ExitCode != 3 || st.Ranks["exited"] != 16 {
		t.Errorf("exit %d %v: %+v", code, err, st)
	}
}

// TestStatusUnfinished: a job whose front-end stopped without recording
// the end (here: a replica shut down after the job was set).
func TestStatusUnfinished(t *testing.T) {
	dir := t.TempDir()
	jobDir := journal.JobDir(dir, "ft-crash")
	addr, tr := raft.NewInmemTransport("")
	defer tr.Close()
	r, err := raftstore.Open(raftstore.Config{StateDir: jobDir, Name: "fe", Transport: tr, Peers: []raft.Server{{Suffrage: raft.Voter, ID: "fe", Address: addr}}})
	if err != nil {
		t.Fatal(err)
	}
	for l := range r.Leadership() {
		if l.IsLeader {
			break
		}
	}
	if _, err := r.Apply(context.Background(), &raftstore.SetJob{Job: raftstore.JobSpec{ID: "ft-crash", Size: 4}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Shutdown(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, statusCommand, jobDir)
	if code != 0 || !strings.Contains(out, "job ft-crash: unfinished") || !strings.Contains(out, "ranks: 4 unknown") {
		t.Errorf("exit %d: %s %s", code, out, errs)
	}
	if code, out, _ := run(t, inspectCommand, jobDir); code != 0 || !strings.Contains(out, "never recorded") {
		t.Errorf("inspect: exit %d:\n%s", code, out)
	}
}

// recordRecoveredJob writes a job of 4 nodes x 4 ranks whose rank 14 is
// killed and recovered under --restart rank, as the root writes it: the
// failure, each phase committed (suspend, respawn, the restarted rank's
// start, patch, resume, resumed), then the end.
func recordRecoveredJob(t *testing.T, stateDir, id string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(context.Background(), journal.Config{StateDir: stateDir, Node: "fe",
		Job: journal.Job{ID: id, Argv: []string{"./ring"}, N: 16, Nodes: testNodes}})
	if err != nil {
		t.Fatal(err)
	}
	j.Plan(journal.FlatPlan(testNodes))
	t0 := time.Now()
	for i, n := range testNodes {
		j.AgentUp(journal.AgentUp{Node: n, Launched: t0, Connected: t0.Add(time.Duration(1+i) * time.Millisecond)})
	}
	names, its := make([]string, 16), make([][]byte, 16)
	for i, n := range testNodes {
		var ranks, pids []int
		for r := 4 * i; r < 4*i+4; r++ {
			ranks, pids = append(ranks, r), append(pids, 2000+r)
			names[r], its[r] = n, fmt.Appendf(nil, "10.0.0.%d:%d", i+1, 30000+r)
		}
		j.RanksStarted(n, ranks, pids)
	}
	j.NodeTable(names, its)
	sync := func() {
		if err := j.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // phases apart
	}
	sync()
	j.RankExited(journal.RankExit{Rank: 14, Signal: 9})
	j.Failure(journal.Failure{Node: "node3", Rank: 14, Message: "rank 14 on node node3 was killed by signal 9; restarting it as incarnation 2 (restart 1 of 3)"})
	sync()
	phase := func(stage string, p journal.RecoveryPhase) {
		p.Epoch, p.Stage = 1, stage
		done := make(chan error, 1)
		j.Commit(p, done)
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		time.Sleep(10 * time.Millisecond) // phases apart: their durations are shown
	}
	phase("suspend", journal.RecoveryPhase{Rank: 14, Detail: "rank(s) 14"})
	phase("respawn", journal.RecoveryPhase{Rank: 14, Detail: "rank(s) 14"})
	j.RanksRestarted("node3", []int{14}, []int{3014}, []uint64{2})
	sync()
	phase("patch", journal.RecoveryPhase{Rank: 14, Detail: "node table version 2: rank(s) 14",
		Rows: []journal.PatchRow{{Rank: 14, Incarnation: 2, ITuple: []byte("10.0.0.4:31014")}}})
	phase("resume", journal.RecoveryPhase{Rank: -1, Recovered: []journal.PatchRow{{Rank: 14, Incarnation: 2}}})
	phase("resumed", journal.RecoveryPhase{Rank: -1, Detail: "every rank goes on"})
	for r := range 16 {
		j.RankExited(journal.RankExit{Rank: r})
	}
	if err := j.Close(context.Background(), 0, "success"); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestInspectRecoveries: a failure is shown with the phases of its
// recovery and their durations, the rank's two incarnations apart, the
// launch phases and the plan without the respawn; the JSON and the SVG
// carry the same.
func TestInspectRecoveries(t *testing.T) {
	dir := t.TempDir()
	j := recordRecoveredJob(t, dir, "ft-rec")
	code, out, errs := run(t, inspectCommand, j.Dir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"Recoveries (1 failure(s): 1 resumed)",
		"rank 14 on node3, incarnation 1: rank 14 on node node3 was killed by signal 9",
		"    PHASE    EPOCH  AT", "    suspend  1 ", "    respawn  1 ", "    patch    1 ", "    resume   1 ", "    resumed  1 ",
		"every rank went on; rank 14 runs as incarnation 2, started again at +",
		"Node table (version", "recovery epoch 1)",
		"  rank 14 (now incarnation 2 on node3, exited, exit code 0)",
		"    incarnation 1 on node3: started +", "killed by signal 9 (exit code 137)",
		"    incarnation 2 on node3: started +",
		"recovered  resume: rank 14 runs as incarnation 2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"incarnation 0", "on -", "every rank ran once"} {
		if strings.Contains(out, bad) {
			t.Errorf("output has %q:\n%s", bad, out)
		}
	}
	// The plan's RANKS STARTED is node3's launch, the respawn beside it.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "  node3  1") && !strings.Contains(line, "(again: +") {
			t.Errorf("node3's plan row: %q", line)
		}
	}

	_, out, _ = run(t, inspectCommand, j.Dir(), "--json")
	var got struct {
		Phases []struct {
			Name     string
			End      time.Time
			Duration float64 `json:"duration_ms"`
		}
		Recoveries []journal.Recovery
		Ranks      []journal.ReportRank
		Agents     []journal.AgentTimeline
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got.Recoveries) != 1 {
		t.Fatalf("recoveries %+v", got.Recoveries)
	}
	rec := got.Recoveries[0]
	var stages []string
	total := 0.0
	for _, p := range rec.Phases {
		stages = append(stages, p.Stage)
		total += p.DurationMS
		if p.Stage != "resumed" && p.DurationMS < 5 {
			t.Errorf("phase %s lasted %.1f ms", p.Stage, p.DurationMS)
		}
	}
	if strings.Join(stages, ",") != "suspend,respawn,patch,resume,resumed" || rec.Outcome != "resumed" || rec.Rank != 14 || rec.Node != "node3" ||
		rec.Incarnation != 1 || rec.NewIncarnation != 2 || rec.TotalMS < total || rec.Restarted.IsZero() {
		t.Errorf("recovery %+v", rec)
	}
	incs := got.Ranks[14].Incarnations
	if len(incs) != 2 || incs[0].Incarnation != 1 || incs[1].Incarnation != 2 || incs[0].End == "" || !incs[1].Started.Equal(rec.Restarted) {
		t.Errorf("rank 14's incarnations %+v", incs)
	}
	// The launch's phases end before the failure: the respawn's start
	// is not the launch's.
	for _, p := range got.Phases {
		if p.Name != "run" && p.End.After(rec.Failure.Time) {
			t.Errorf("phase %s ends at %v, after the failure at %v", p.Name, p.End, rec.Failure.Time)
		}
		if p.Name == "exchange node table" && p.Duration < 0 {
			t.Errorf("phase %+v", p)
		}
	}
	if a := got.Agents[3]; a.RanksUp.After(rec.Failure.Time) || len(a.RanksRestarted) != 1 {
		t.Errorf("node3: %+v", a)
	}

	svg := filepath.Join(t.TempDir(), "rec.svg")
	if code, _, errs := run(t, inspectCommand, j.Dir(), "--svg", svg); code != 0 {
		t.Fatalf("--svg: exit %d: %s", code, errs)
	}
	b, _ := os.ReadFile(svg)
	if n := strings.Count(string(b), `class="phase"`); n != 4 || !strings.Contains(string(b), `class="recovery" data-rank="14" data-outcome="resumed"`) ||
		!strings.Contains(string(b), `class="restart"`) {
		t.Errorf("%d phases in the SVG:\n%s", n, b)
	}
}

func TestStatusRecoveries(t *testing.T) {
	dir := t.TempDir()
	j := recordRecoveredJob(t, dir, "ft-rec")
	code, out, errs := run(t, statusCommand, j.Dir())
	if code != 0 || !strings.Contains(out, "finished, exit code 0") || !strings.Contains(out, "  recoveries: 1, the longest ") ||
		!strings.Contains(out, "failure: rank 14 on node node3") {
		t.Errorf("exit %d:\n%s%s", code, out, errs)
	}
}

// TestStatusRecovering: a job whose log ends during a recovery (its
// front-end stopped at the respawn phase) says where it stood.
func TestStatusRecovering(t *testing.T) {
	dir := t.TempDir()
	jobDir := journal.JobDir(dir, "ft-recovering")
	start := time.Now().Add(-time.Minute)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	r := openReplica(t, jobDir, &raftstore.SetJob{Job: raftstore.JobSpec{ID: "ft-recovering", Size: 4, Spec: jobSpec(t, "ft-recovering", 4, start)}})
	apply(t, r,
		&raftstore.AppendEvents{Events: []raftstore.Event{
			{Time: at(2000), Kind: raftstore.EventFailure, Node: "n1", Rank: 2, Incarnation: 1, Detail: "rank 2 on node n1 was killed by signal 9"},
			{Time: at(2001), Kind: raftstore.EventRecovery, Rank: 2, Detail: "suspend: epoch 1; rank(s) 2"},
			{Time: at(2030), Kind: raftstore.EventRecovery, Rank: 2, Detail: "respawn: epoch 1; rank(s) 2"},
		}})
	if err := r.Shutdown(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, statusCommand, jobDir)
	if code != 0 || !strings.Contains(out, "recovering rank 2: at its respawn phase since +2.030s (epoch 1)") {
		t.Errorf("exit %d:\n%s%s", code, out, errs)
	}
	_, out, _ = run(t, statusCommand, jobDir, "--json")
	var st jobstate.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Recovering) != 1 || st.Recoveries != 0 {
		t.Errorf("--json: %v %+v", err, st)
	}
	_, out, _ = run(t, inspectCommand, jobDir)
	if !strings.Contains(out, "in progress: the log ends at its respawn phase since +2.030s") || !strings.Contains(out, "(the log ends here)") {
		t.Errorf("inspect:\n%s", out)
	}
}

// TestStatusAfterFailover: after a takeover, status gives the job's start
// (the front-end's), not the time the successor took over.
func TestStatusAfterFailover(t *testing.T) {
	dir := t.TempDir()
	jobDir := journal.JobDir(dir, "ft-failover")
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	r := openReplica(t, jobDir, &raftstore.SetJob{Job: raftstore.JobSpec{ID: "ft-failover", Size: 2, Spec: jobSpec(t, "ft-failover", 2, start)},
		Events: []raftstore.Event{{Time: start, Kind: raftstore.EventLaunch, Rank: raftstore.NoRank, Detail: "job: 2 ranks: ./app"}}})
	apply(t, r,
		&raftstore.BumpEpoch{Time: start.Add(30 * time.Minute), Leader: "node0", Reason: "the front-end was lost"},
		&raftstore.Finish{Time: start.Add(40 * time.Minute), Status: raftstore.Status{ExitCode: 0, Message: "success"}})
	if err := r.Shutdown(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, statusCommand, jobDir)
	want := "started " + start.Local().Format("2006-01-02 15:04:05 MST") + ", ran 2400.000 s"
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("exit %d, want %q:\n%s%s", code, want, out, errs)
	}
	_, out, _ = run(t, inspectCommand, jobDir)
	if !strings.Contains(out, "took over") && !strings.Contains(out, "leader") {
		t.Errorf("inspect shows no takeover:\n%s", out)
	}
}

// openReplica starts a job's single replica and applies cmd once it leads.
func openReplica(t *testing.T, jobDir string, cmd raftstore.Command) *raftstore.Replica {
	t.Helper()
	addr, tr := raft.NewInmemTransport("")
	t.Cleanup(func() { tr.Close() })
	r, err := raftstore.Open(raftstore.Config{StateDir: jobDir, Name: "fe", Transport: tr, Peers: []raft.Server{{Suffrage: raft.Voter, ID: "fe", Address: addr}}})
	if err != nil {
		t.Fatal(err)
	}
	for l := range r.Leadership() {
		if l.IsLeader {
			break
		}
	}
	apply(t, r, cmd)
	return r
}

func apply(t *testing.T, r *raftstore.Replica, cmds ...raftstore.Command) {
	t.Helper()
	for _, c := range cmds {
		if _, err := r.Apply(context.Background(), c); err != nil {
			t.Fatalf("%T: %v", c, err)
		}
	}
}

func jobSpec(t *testing.T, id string, n int, start time.Time) []byte {
	t.Helper()
	b, err := json.Marshal(journal.Job{ID: id, N: n, Start: start, Argv: []string{"./app"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplicasOut: a plan's replica outside the group's last configuration
// was lost after it joined (the front-end's, once a replica agent took the
// root over; a lost agent's) or never joined.
func TestReplicasOut(t *testing.T) {
	// As the journal writes it: the root is RootName, the front-end's
	// replica is named for its host (vm), the agents' for their nodes.
	plan := journal.ReportPlan{Root: journal.RootName, Replicas: []string{"vm", "node0", "node1"},
		Nodes: []journal.ReportNode{{Name: journal.RootName}, {Name: "node0", Level: 1}, {Name: "node1", Level: 1}, {Name: "node2", Level: 1}}}
	for _, c := range []struct {
		name        string
		leader      string
		lostAgent   string
		members     []string
		lost, never []string
	}{
		{name: "all joined", members: []string{"vm", "node0", "node1"}},
		{name: "ended before the group formed", members: []string{"vm"}, never: []string{"node0", "node1"}},
		{name: "front-end lost, group refilled", leader: "node0", members: []string{"node0", "node1", "node2"}, lost: []string{"vm"}},
		{name: "front-end lost, one replica never joined", leader: "node0", members: []string{"node0"}, lost: []string{"vm"}, never: []string{"node1"}},
		{name: "replica agent lost", lostAgent: "node1", members: []string{"vm", "node0", "node2"}, lost: []string{"node1"}},
	} {
		rep := journal.Report{Plan: plan, Leader: c.leader}
		if c.lostAgent != "" {
			rep.Agents = []journal.AgentTimeline{{Node: c.lostAgent, Lost: true}}
		}
		lost, never := replicasOut(rep, c.members)
		if !slices.Equal(lost, c.lost) || !slices.Equal(never, c.never) {
			t.Errorf("%s: lost %v, never %v; want %v, %v", c.name, lost, never, c.lost, c.never)
		}
	}
}
