package jobctl

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/jobstate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/hashicorp/raft"
)

// madeJob is a job written into a state directory by the journal, as a
// front-end writes it.
type madeJob struct {
	id    string
	start time.Time
	// fail: a rank's failure (code != 0) or the user's signal (user);
	// code: the final status's exit code; open: leave it running.
	fail, user bool
	code       int
	open       bool
}

func writeJob(t *testing.T, stateDir string, m madeJob) *journal.Journal {
	t.Helper()
	cfg := journal.Config{StateDir: stateDir, Node: "fe", Solo: true,
		Job: journal.Job{ID: m.id, Argv: []string{"./app", m.id}, N: 4, Start: m.start, Restart: "rank", MaxRestarts: 3}}
	j, err := journal.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodes := []string{"node1", "node2"}
	j.Plan(journal.FlatPlan(nodes))
	for i, n := range nodes {
		j.AgentUp(journal.AgentUp{Node: n, Addr: "127.0.0.1:700" + string(rune('0'+i)), Connected: m.start})
		j.RanksStarted(n, []int{2 * i, 2*i + 1}, []int{100 + 2*i, 101 + 2*i})
	}
	msg := ""
	switch {
	case m.user:
		msg = "SIGINT: ending the job"
		j.Failure(journal.Failure{Rank: raftstore.NoRank, Message: msg})
	case m.fail:
		msg = "rank 1 on node node1 exited with code 3"
		j.RankExited(journal.RankExit{Rank: 1, Code: 3})
		j.Failure(journal.Failure{Node: "node1", Rank: 1, Message: msg})
	}
	if m.open {
		if err := j.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		return j
	}
	if err := j.Close(context.Background(), m.code, msg); err != nil {
		t.Fatal(err)
	}
	return nil
}

// copyDir copies a job's directory, files only (a replica's files copied
// while its log is synced and idle: what a crash leaves).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestList: every state word, newest first, a running job read from its
// live report while its files are locked.
func TestList(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Hour)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	writeJob(t, dir, madeJob{id: "ft-ok", start: at(1)})
	writeJob(t, dir, madeJob{id: "ft-failed", start: at(2), fail: true, code: 3})
	writeJob(t, dir, madeJob{id: "ft-cancelled", start: at(3), user: true, code: 130})
	// An unfinished job: a log whose end was never written, no longer
	// held (its front-end died).
	open := writeJob(t, dir, madeJob{id: "ft-crashed", start: at(4), open: true})
	copyDir(t, filepath.Join(dir, "ft-crashed"), filepath.Join(dir, "ft-unfinished"))
	if err := open.Close(context.Background(), 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "ft-crashed")); err != nil {
		t.Fatal(err)
	}
	running := writeJob(t, dir, madeJob{id: "ft-running", start: at(5), open: true})
	t.Cleanup(func() { running.Close(context.Background(), 0, "") })
	live := journal.Live{Job: "ft-running", Root: "node1", Phase: "running", Updated: time.Now(), Start: at(5),
		Argv: []string{"./app"}, Agents: 2, AgentsUp: 2, N: 4, Running: 4, Recoveries: 2}
	b, _ := json.Marshal(live)
	if err := os.WriteFile(filepath.Join(dir, "ft-running", journal.LiveFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// Not a job's directory: skipped.
	if err := os.Mkdir(filepath.Join(dir, "other"), 0o700); err != nil {
		t.Fatal(err)
	}

	jobs, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id, state string
		code      int // -1: none
		restarts  int
	}{
		{"ft-running", "running", -1, 2},
		{"ft-unfinished", "unfinished", -1, 0},
		{"ft-cancelled", "cancelled", 130, 0},
		{"ft-failed", "failed", 3, 0},
		{"ft-ok", "finished", 0, 0},
	}
	if len(jobs) != len(want) {
		t.Fatalf("List: %d jobs, want %d: %+v", len(jobs), len(want), jobs)
	}
	for i, w := range want {
		j := jobs[i]
		code := -1
		if j.ExitCode != nil {
			code = *j.ExitCode
		}
		if j.ID != w.id || j.State != w.state || code != w.code || j.Restarts != w.restarts || j.Error != "" {
			t.Errorf("job %d: %+v (exit %d), want %+v", i, j, code, w)
		}
		if j.Ranks != 4 || j.Nodes != 2 {
			t.Errorf("job %s: %d ranks on %d nodes, want 4 on 2", j.ID, j.Ranks, j.Nodes)
		}
	}
	if jobs[0].Root != "node1" {
		t.Errorf("running job's root: %q", jobs[0].Root)
	}
}

// TestListEmpty: a state directory never used lists nothing.
func TestListEmpty(t *testing.T) {
	jobs, err := List(filepath.Join(t.TempDir(), "none"))
	if err != nil || len(jobs) != 0 {
		t.Errorf("List = %v, %v", jobs, err)
	}
}

// TestControlEnded: cancel and kill of a job that is not running say so
// (*ErrEnded), and of an unknown job fail, without waiting.
func TestControlEnded(t *testing.T) {
	dir := t.TempDir()
	writeJob(t, dir, madeJob{id: "ft-ok", start: time.Now()})
	_, err := Cancel(context.Background(), dir, "ft-ok", Options{})
	if e, ok := err.(*ErrEnded); !ok || e.Status.Word() != "finished" {
		t.Errorf("Cancel of a finished job: %v", err)
	}
	if _, _, err := Kill(context.Background(), dir, "ft-ok", syscall.SIGUSR1, Options{}); err == nil {
		t.Error("Kill of a finished job succeeded")
	}
	if _, err := Cancel(context.Background(), dir, "ft-none", Options{}); err == nil {
		t.Error("Cancel of an unknown job succeeded")
	}
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"KILL": syscall.SIGKILL, "sigusr1": syscall.SIGUSR1, "SIGTERM": syscall.SIGTERM, "2": syscall.SIGINT} {
		if got, err := ParseSignal(in); err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"NOPE", "0", "99", ""} {
		if _, err := ParseSignal(bad); err == nil {
			t.Errorf("ParseSignal(%q) succeeded", bad)
		}
	}
}

// TestFrontEnd: a control file naming the front-end says it is alive while
// its process runs on this host, not once it is gone, nor once a
// successor's (another name) replaced it.
func TestFrontEnd(t *testing.T) {
	dir := t.TempDir()
	host, _ := os.Hostname()
	write := func(name string, pid int) {
		if err := proto.WriteControlInfo(dir, proto.ControlInfo{Job: "ft-x", Root: host, Name: name, Host: host, PID: pid}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, ok := FrontEnd(dir); ok {
		t.Error("FrontEnd without a control file")
	}
	write(proto.RootName, os.Getpid())
	if h, pid, ok := FrontEnd(dir); !ok || h != host || pid != os.Getpid() {
		t.Errorf("FrontEnd of a live front-end = %q, %d, %v", h, pid, ok)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	write(proto.RootName, cmd.Process.Pid) // reaped: no such process
	if _, _, ok := FrontEnd(dir); ok {
		t.Error("FrontEnd of a front-end that is gone")
	}
	write("node1", os.Getpid())
	if _, _, ok := FrontEnd(dir); ok {
		t.Error("FrontEnd after a successor took over")
	}
}

// unfinishedJob writes a job whose front-end died without a final status
// (no replicas): its log's files as the crash left them, held by nobody.
func unfinishedJob(t *testing.T, dir, id string) {
	t.Helper()
	open := writeJob(t, dir, madeJob{id: id + "-crashed", start: time.Now(), open: true})
	copyDir(t, filepath.Join(dir, id+"-crashed"), filepath.Join(dir, id))
	if err := open.Close(context.Background(), 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, id+"-crashed")); err != nil {
		t.Fatal(err)
	}
}

// TestCancelFencesRootless: cancel of a job none of whose roots answers
// fences every node of its recorded node table (with the way its agents
// were started) and records its end as the user's SIGTERM; kill does the
// same with an ending signal and refuses another.
func TestCancelFencesRootless(t *testing.T) {
	dir := t.TempDir()
	unfinishedJob(t, dir, "ft-orphan")
	var mu sync.Mutex
	var fenced []string
	o := Options{Fencing: Fencing{Fence: func(_ context.Context, job, node string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if !strings.HasPrefix(job, "ft-orphan") { // the ID its log records
			t.Errorf("fence of job %q", job)
		}
		fenced = append(fenced, node)
		if node == "node2" {
			return "", errors.New("no answer")
		}
		return "killed 1 agent process(es) and 2 rank process(es)", nil
	}}}
	if _, _, err := Kill(context.Background(), dir, "ft-orphan", syscall.SIGUSR1, o); err == nil {
		t.Error("kill --signal USR1 of a job without a root succeeded")
	}
	if len(fenced) != 0 {
		t.Errorf("kill --signal USR1 fenced %q", fenced)
	}
	e, err := Cancel(context.Background(), dir, "ft-orphan", o)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(fenced)
	if f := e.Fenced; f == nil || !slices.Equal(fenced, []string{"node1", "node2"}) || f.StartedBy != journal.StartProcess || !f.Recorded || f.Complete() {
		t.Fatalf("Cancel: fenced %q, %+v", fenced, e.Fenced)
	}
	want := []NodeFence{{Node: "node1", Killed: "killed 1 agent process(es) and 2 rank process(es)"}, {Node: "node2", Err: "no answer"}}
	if !slices.Equal(e.Fenced.Nodes, want) {
		t.Errorf("nodes: %+v, want %+v", e.Fenced.Nodes, want)
	}
	st := e.Status
	if st == nil || st.Word() != "cancelled" || *st.ExitCode != 128+int(syscall.SIGTERM) || st.UserSignal != "SIGTERM" || len(st.Failures) != 0 {
		t.Fatalf("status after cancel: %+v", st)
	}
	// Ended now: one more cancel says so, and fences nothing.
	fenced = nil
	if _, err := Cancel(context.Background(), dir, "ft-orphan", o); !errors.As(err, new(*ErrEnded)) || len(fenced) != 0 {
		t.Errorf("second cancel: %v, fenced %q", err, fenced)
	}

	unfinishedJob(t, dir, "ft-orphan2")
	_, e, err = Kill(context.Background(), dir, "ft-orphan2", syscall.SIGKILL, o)
	if err != nil || e == nil || e.Status == nil || e.Status.UserSignal != "SIGKILL" || *e.Status.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("kill --signal KILL of a job without a root: %+v, %v", e, err)
	}
}

// TestCancelReplicatedLogUnwritable: a job whose log is replicated over
// three root replicas, all gone, has its nodes fenced all the same, but
// its end cannot be recorded (no majority is left): cancel says so, and
// the job stays unfinished.
func TestCancelReplicatedLogUnwritable(t *testing.T) {
	dir := t.TempDir()
	jobDir := journal.JobDir(dir, "ft-group")
	names := []string{"fe", "node0", "node1"}
	var servers []raft.Server
	trans := make([]*raft.InmemTransport, len(names))
	for i, n := range names {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress("inmem-" + n))
		trans[i] = tr
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(n), Address: addr})
	}
	for i := range trans {
		for j := range trans {
			if i != j {
				trans[i].Connect(servers[j].Address, trans[j])
			}
		}
	}
	var reps []*raftstore.Replica
	for i, n := range names {
		r, err := raftstore.Open(raftstore.Config{StateDir: jobDir, Name: n, Transport: trans[i], Peers: servers})
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, r)
	}
	spec := journal.Job{ID: "ft-group", N: 2, Replicas: 3, Start: time.Now()}
	b, _ := json.Marshal(spec)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	applied := false
	for !applied && ctx.Err() == nil {
		for _, r := range reps {
			if r.IsLeader() {
				_, err := r.Apply(ctx, &raftstore.SetJob{Job: raftstore.JobSpec{ID: "ft-group", Size: 2, Spec: b}})
				applied = err == nil
			}
		}
		time.Sleep(10 * time.Millisecond) // polling a condition: a leader
	}
	for _, r := range reps {
		r.Shutdown()
	}
	if !applied {
		t.Fatal("no leader wrote the job")
	}
	var fenced []string
	o := Options{Fencing: Fencing{Fence: func(_ context.Context, _, node string) (string, error) {
		fenced = append(fenced, node)
		return "killed 0 agent process(es) and 0 rank process(es)", nil
	}}}
	e, err := Cancel(context.Background(), dir, "ft-group", o)
	if err != nil {
		t.Fatal(err)
	}
	if e.Fenced == nil || e.Fenced.Recorded || !strings.Contains(e.Fenced.RecordErr, "no majority") || e.Status != nil {
		t.Errorf("cancel of a job whose group is gone: %+v", e.Fenced)
	}
	if st, err := jobstate.ReadStatus(dir, "ft-group"); err != nil || st.State != "unfinished" {
		t.Errorf("status after cancel: %v, %+v", err, st)
	}
}
