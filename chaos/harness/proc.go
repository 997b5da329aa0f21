package harness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A trial's processes are found in /proc, from outside, as its faults are
// applied: the front-end runs in the trial's own working directory, which
// every agent (test nodes inherit it) and every rank (the default --wdir)
// shares, and its environment carries the trial's marker, which every
// rank inherits (agents start with an empty environment). Nothing inside
// launch/ needs to cooperate.

// chaosMarkerEnv is the variable whose value names a trial.
const chaosMarkerEnv = "FTLAUNCH_CHAOS_TRIAL"

// jobProc is a live (not zombie) process of a trial.
type jobProc struct {
	pid, ppid int
	state     byte
	cmdline   string
	rank      int    // FTLAUNCH_RANK, -1 when not a rank
	node      string // FTLAUNCH_NODE of a rank
	host      string // the emulated host it runs on ("": not known)
}

func (p jobProc) String() string {
	if p.host != "" {
		return fmt.Sprintf("%d (%s) on %s", p.pid, p.cmdline, p.host)
	}
	return fmt.Sprintf("%d (%s)", p.pid, p.cmdline)
}

// procScanner finds one trial's processes.
type procScanner struct {
	workDir string // the trial's working directory
	marker  string // chaosMarkerEnv=value
	self    int
}

// scan lists the trial's live processes. With thorough, a process in
// another directory is still the trial's when its environment carries the
// marker (a rank that changed directory); without, only the working
// directory is looked at (cheap enough to poll).
func (s procScanner) scan(thorough bool) []jobProc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []jobProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == s.self {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		cwd, _ := os.Readlink(filepath.Join(dir, "cwd"))
		inDir := cwd == s.workDir
		if !inDir && !thorough {
			continue
		}
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil && !inDir {
			continue
		}
		vars := parseEnviron(env)
		if !inDir && vars[chaosMarkerEnv] != s.marker {
			continue
		}
		p, ok := readStat(dir)
		if !ok || p.state == 'Z' || p.state == 'X' {
			continue
		}
		p.pid = pid
		p.rank = -1
		if r, ok := vars["FTLAUNCH_RANK"]; ok && vars[chaosMarkerEnv] == s.marker {
			if n, err := strconv.Atoi(r); err == nil {
				p.rank, p.node = n, vars["FTLAUNCH_NODE"]
			}
		}
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		p.cmdline = strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
		out = append(out, p)
	}
	return out
}

// parseEnviron reads /proc/PID/environ.
func parseEnviron(b []byte) map[string]string {
	vars := map[string]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			vars[k] = v
		}
	}
	return vars
}

// readStat reads the state and parent of /proc/PID.
func readStat(dir string) (jobProc, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return jobProc{}, false
	}
	// "pid (comm) S ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return jobProc{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return jobProc{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return jobProc{}, false
	}
	return jobProc{state: f[0][0], ppid: ppid}, true
}

// procID is a process as the kernel knows it: its pid and its start time
// (/proc/PID/stat field 22), so that a reused pid is never taken for it.
type procID struct {
	pid   int
	start string
	desc  string
}

// procIDOf reads the live process pid.
func procIDOf(pid int) (procID, bool) {
	p, ok := procAt(pid)
	if !ok {
		return procID{}, false
	}
	start, ok := startTime(pid)
	if !ok {
		return procID{}, false
	}
	return procID{pid: pid, start: start, desc: p.String()}, true
}

// startTime is field 22 of /proc/PID/stat.
func startTime(pid int) (string, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", false
	}
	// Fields after comm start at field 3: field 22 is the 20th of them.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", false
	}
	return f[19], true
}

// alive lists those of ids that still run (not zombies, same start time).
func alive(ids []procID) []string {
	var out []string
	for _, id := range ids {
		if _, ok := procAt(id.pid); !ok {
			continue
		}
		if start, ok := startTime(id.pid); ok && start == id.start {
			out = append(out, id.desc)
		}
	}
	return out
}

// Leftovers lists the live processes (but this one) whose working
// directory is workDir: what a trial kept in its directory left running.
func Leftovers(workDir string) []string {
	var out []string
	for _, p := range (procScanner{workDir: workDir, self: os.Getpid()}).scan(false) {
		out = append(out, p.String())
	}
	return out
}
