// Package fence kills, on one machine, what an agent incarnation of a job
// left running there: the agent process itself and every rank (and rank
// descendant) it started. The root runs it from outside, in a new session
// on the node (ftlaunch agent --fence), when it declared the agent lost: a
// stopped agent (SIGSTOP) or one cut off from its parent cannot kill its
// own ranks, which run in sessions of their own (docs/recovery.md,
// "Fencing").
//
// Two marks find them, neither of which can name another job's process:
//
//   - The agent registers itself once it knows its job: a file
//     <tmp>/ftlaunch-<uid>/fence/<job>/<node>.<incarnation> holding its
//     pid and the start time the kernel gives it (/proc/<pid>/stat field
//     22), so a reused pid is never killed.
//   - Every rank's environment carries FTLAUNCH_JOBID, FTLAUNCH_NODE and
//     FTLAUNCH_AGENT_INCARNATION, which its descendants inherit; the fence
//     reads /proc/<pid>/environ.
//
// Only incarnations up to the one declared lost are killed: a relaunched
// agent on the same node (a higher incarnation) and its ranks are left
// alone, whatever the order in which the fence and the relaunch run.
//
// A fence leaves a mark, <node>.fenced holding the highest incarnation it
// fenced, before it looks for records; an agent looks for the mark after
// it wrote its record. So an agent that registers while (or after) its
// incarnation is fenced is either found by the fence or finds the mark,
// and ends itself (ErrFenced): an agent started by a parent whose host
// crashed a moment later was otherwise missed by the fence of its node and
// left running past the job's end (docs/chaos.md). Marks go with the
// job's directory once they are older than markTTL.
package fence

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The variables of a rank's environment the fence matches.
const (
	EnvJob         = "FTLAUNCH_JOBID"
	EnvNode        = "FTLAUNCH_NODE"
	EnvIncarnation = "FTLAUNCH_AGENT_INCARNATION"
)

// Target names what a fence kills: the processes of job Job started by the
// agent of node Node in incarnations 1..UpTo.
type Target struct {
	Job  string
	Node string
	UpTo uint64
}

func (t Target) check() error {
	switch {
	case !validName(t.Job):
		return fmt.Errorf("fence: job %q: not a job ID", t.Job)
	case !validName(t.Node):
		return fmt.Errorf("fence: node %q: not a node name", t.Node)
	case t.UpTo == 0:
		return errors.New("fence: incarnation 0: incarnations start at 1")
	}
	return nil
}

// validName accepts what can be a file name component and an environment
// value: no separators, no dot-only names.
func validName(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) <= 255 && !strings.ContainsAny(s, "/\x00=")
}

// Result says what a fence did.
type Result struct {
	Agents []int // agent processes killed
	Ranks  int   // rank processes (and their descendants) killed
	// Left are the killed processes still not ended when Kill returned
	// (goneWait after its last scan): in the kernel's hands (an
	// uninterruptible wait, say), not the fence's.
	Left []int
}

func (r Result) String() string {
	s := fmt.Sprintf("killed %d agent process(es) and %d rank process(es)", len(r.Agents), r.Ranks)
	if len(r.Left) > 0 {
		s += fmt.Sprintf(", %d of them not ended yet (%v)", len(r.Left), r.Left)
	}
	return s
}

// goneWait bounds how long Kill waits for the processes it killed to end.
const goneWait = time.Second

// dir is where the agents of job register on this machine.
func dir(job string) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("ftlaunch-%d", os.Getuid()), "fence", job)
}

// ErrFenced is Register's answer to an agent whose incarnation was
// fenced already: it is to end at once.
var ErrFenced = errors.New("this agent incarnation was fenced before it registered")

// markTTL is how long a fence's mark is kept: far longer than an agent
// takes from its start to its registration.
const markTTL = 10 * time.Minute

// mkdirTries bounds how often a record or a mark is written again after
// another agent's pruning removed the job's empty directory under it.
const mkdirTries = 8

// markSuffix ends the name of a fence's mark (<node>.fenced), which no
// incarnation number parses as.
const markSuffix = ".fenced"

// Register records the calling process as the agent of node in
// incarnation inc of job; the returned function removes the record (at
// the agent's normal end). If a fence of that incarnation ran before the
// record was written, the record is removed again and the error is
// ErrFenced.
func Register(t Target) (func(), error) {
	return register(t, os.Getpid())
}

// register is Register for process pid.
func register(t Target, pid int) (func(), error) {
	pruneDead(filepath.Dir(dir(t.Job)))
	p, err := record(t, pid)
	if err != nil {
		return nil, fmt.Errorf("fence: register: %w", err)
	}
	unregister := func() {
		_ = os.Remove(p)
		_ = os.Remove(filepath.Dir(p)) // the job's last agent on this machine: empty
	}
	// The record first, the mark second: a fence writes the mark first and
	// reads the records second, so one of the two sees the other.
	if upTo, ok := readMark(t); ok && upTo >= t.UpTo {
		unregister()
		return nil, fmt.Errorf("fence: register %s incarnation %d of job %s: %w", t.Node, t.UpTo, t.Job, ErrFenced)
	}
	return unregister, nil
}

// markPath is where the fences of t's node leave their mark.
func markPath(t Target) string {
	return filepath.Join(dir(t.Job), t.Node+markSuffix)
}

// readMark returns the highest incarnation of t's node fenced so far.
func readMark(t Target) (uint64, bool) {
	b, err := os.ReadFile(markPath(t))
	if err != nil {
		return 0, false
	}
	upTo, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return upTo, err == nil
}

// writeMark leaves the mark of a fence of t (never lowering an earlier
// one's incarnation). The mark is written in full before it is visible
// (a rename), so a reader never sees half of it.
func writeMark(t Target) error {
	upTo := t.UpTo
	if old, ok := readMark(t); ok && old > upTo {
		upTo = old
	}
	d := dir(t.Job)
	var tmp *os.File
	var err error
	// An agent's pruning may remove the job's directory while it is empty,
	// between the MkdirAll and the CreateTemp: once more, then.
	for range mkdirTries {
		if err = os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if tmp, err = os.CreateTemp(d, "mark-*.tmp"); !errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	_, werr := fmt.Fprintf(tmp, "%d\n", upTo)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), markPath(t))
}

// record writes the record of process pid as t's agent and returns its path.
func record(t Target, pid int) (string, error) {
	if err := t.check(); err != nil {
		return "", err
	}
	d := dir(t.Job)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	start, err := startTime(pid)
	if err != nil {
		return "", err
	}
	p := filepath.Join(d, fmt.Sprintf("%s.%d", t.Node, t.UpTo))
	data := []byte(fmt.Sprintf("%d %d\n", pid, start))
	err = os.WriteFile(p, data, 0o600)
	// Another agent's pruning removed the directory while it was empty
	// (test nodes: every agent of the job on one machine, registering at
	// once; twice in a row at load 30): again, a few times.
	for try := 0; errors.Is(err, os.ErrNotExist) && try < mkdirTries; try++ {
		if err = os.MkdirAll(d, 0o700); err == nil {
			err = os.WriteFile(p, data, 0o600)
		}
	}
	return p, err
}

// RankEnv is what a rank's environment gets for the fence to find it.
func RankEnv(t Target) []string {
	return []string{EnvIncarnation + "=" + strconv.FormatUint(t.UpTo, 10)}
}

// Kill kills the processes of t on this machine: the registered agents
// first (a stopped one too: SIGKILL needs no cooperation), then every
// process whose environment marks it as one of their ranks, scanning
// /proc again until a scan finds none (a rank may fork while it dies) or
// within bounds.
func Kill(t Target) (Result, error) {
	var res Result
	if err := t.check(); err != nil {
		return res, err
	}
	// The mark before the records (see Register).
	if err := writeMark(t); err != nil {
		return res, fmt.Errorf("fence: mark: %w", err)
	}
	d := dir(t.Job)
	entries, err := os.ReadDir(d)
	if err != nil {
		return res, fmt.Errorf("fence: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		dot := strings.LastIndexByte(name, '.')
		if dot <= 0 || name[:dot] != t.Node {
			continue
		}
		if inc, err := strconv.ParseUint(name[dot+1:], 10, 64); err != nil || inc > t.UpTo {
			continue
		}
		p := filepath.Join(d, name)
		if pid, ok := registered(p); ok {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				res.Agents = append(res.Agents, pid)
			}
		}
		_ = os.Remove(p)
	}
	deadline := time.Now().Add(2 * time.Second)
	killed := map[int]bool{} // a process dying is found again by the next scan
	times := map[int]killedRank{}
	for {
		n, err := killRanks(t, killed, times)
		res.Ranks += n
		if err != nil {
			return res, err
		}
		if n == 0 || time.Now().After(deadline) {
			break
		}
	}
	pids := append([]int(nil), res.Agents...)
	for pid := range killed {
		pids = append(pids, pid)
	}
	res.Left = awaitGone(pids, time.Now().Add(goneWait))
	recordEnds(t, times, res.Left)
	return res, nil
}

// awaitGone waits until every process of pids has ended (a zombie has:
// it runs nothing), or until deadline, and returns those that had not. A
// process killed is not gone at once: a Go agent's threads and memory take
// milliseconds to tear down, and a job's end reported meanwhile found a
// fenced agent still up (make chaos, test nodes, a stopped agent fenced
// 4 ms before the front-end exited).
func awaitGone(pids []int, deadline time.Time) []int {
	var fds []unix.PollFd
	fdPid := map[int32]int{}
	defer func() {
		for _, f := range fds {
			unix.Close(int(f.Fd))
		}
	}()
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already (ESRCH)
		}
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		fdPid[int32(fd)] = pid
	}
	for len(fds) > 0 {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		_, err := unix.Poll(fds, int(wait.Milliseconds())+1)
		if err != nil && err != unix.EINTR {
			break
		}
		left := fds[:0]
		for _, f := range fds {
			if f.Revents != 0 { // readable: it ended
				unix.Close(int(f.Fd))
				continue
			}
			left = append(left, f)
		}
		fds = left
	}
	var out []int
	for _, f := range fds {
		out = append(out, fdPid[f.Fd])
	}
	return out
}

// registered reads an agent's record and returns its pid if that process
// is the one that registered (same start time).
func registered(p string) (int, bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 1 {
		return 0, false
	}
	now, err := startTime(pid)
	return pid, err == nil && now == start
}

// killRanks SIGKILLs every process of t's ranks found in one scan of
// /proc that is not in killed already, and returns how many.
func killRanks(t Target, killed map[int]bool, times map[int]killedRank) (int, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("fence: %w", err)
	}
	self := os.Getpid()
	n := 0
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == self || killed[pid] {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !marked(env, t) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed[pid] = true
			n++
			if dir, rank, inc, ok := rankOf(env); ok {
				times[pid] = killedRank{dir: dir, rank: rank, inc: inc}
			}
		}
	}
	return n, nil
}

// recordEnds appends the end of every rank the fence killed that ended
// (not in left) to its rank times (EnvRankTimes).
func recordEnds(t Target, times map[int]killedRank, left []int) {
	now := time.Now()
	for pid, k := range times {
		if !slices.Contains(left, pid) {
			_ = AppendRankTime(k.dir, RankTime{Node: t.Node, Rank: k.rank, Inc: k.inc, Time: now})
		}
	}
}

// killedRank is a rank process a fence killed, with where its times go.
type killedRank struct {
	dir  string
	rank int
	inc  uint64
}

// marked reports whether an environment (NUL-separated) marks a rank of t.
func marked(env []byte, t Target) bool {
	var job, node, inc bool
	eachVar(env, func(k, v string) {
		switch k {
		case EnvJob:
			job = v == t.Job
		case EnvNode:
			node = v == t.Node
		case EnvIncarnation:
			i, err := strconv.ParseUint(v, 10, 64)
			inc = err == nil && i >= 1 && i <= t.UpTo
		}
	})
	return job && node && inc
}

// eachVar calls fn with every variable of a process's environment as
// /proc/<pid>/environ gives it (NUL-separated KEY=VALUE).
func eachVar(env []byte, fn func(k, v string)) {
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if k, v, ok := bytes.Cut(kv, []byte{'='}); ok {
			fn(string(k), string(v))
		}
	}
}

// startTime is the process's start time in clock ticks since boot
// (/proc/<pid>/stat field 22).
func startTime(pid int) (uint64, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22 is the 20th after the name
}

// procStat returns the fields of /proc/<pid>/stat after the command name
// (field 3, the state, first).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// pruneDead removes the records of agents that are gone without removing
// their own (SIGKILL, a crash), and the job directories left empty. A
// record's process is gone when its pid is free or started at another
// time.
func pruneDead(base string) {
	jobs, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, j := range jobs {
		d := filepath.Join(base, j.Name())
		recs, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, r := range recs {
			if p := filepath.Join(d, r.Name()); !alive(p) {
				_ = os.Remove(p)
			}
		}
		_ = os.Remove(d) // only if empty
	}
}

// alive reports whether a record's process still runs; a record being
// written (empty) counts as alive, and a fence's mark (or one being
// written) as long as it is younger than markTTL.
func alive(p string) bool {
	if strings.HasSuffix(p, markSuffix) || strings.HasSuffix(p, ".tmp") {
		fi, err := os.Stat(p)
		return err == nil && time.Since(fi.ModTime()) < markTTL
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return false
	}
	if len(b) == 0 {
		return true
	}
	_, ok := registered(p)
	return ok
}
