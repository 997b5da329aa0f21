package srunspawn

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/cluster"
	"github.com/ftlaunch/ftlaunch/chaos/slurm"
	"github.com/ftlaunch/ftlaunch/launch/alloc"
)

// testAlloc is a salloc allocation held open for a test.
type testAlloc struct {
	job   string
	list  string   // SLURM_JOB_NODELIST
	nodes []string // expanded
	srun  string   // wrapper that runs srun in the cluster's login node
	env   []string // what a program inside the allocation would see
}

// allocate makes a `salloc -N nodes -n tasks --no-kill` allocation whose
// command waits for its stdin to close, and releases it when the test ends.
// The spawner under test runs in this process, not under salloc: it gets
// the allocation through Options.Env and srun through a wrapper that
// enters the login node (see chaos/slurm's docs: Slurm clients must run
// there for slurmctld to reach them).
func allocate(tb testing.TB, c *slurm.Cluster, nodes, tasks int) *testAlloc {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd, err := c.AllocCommand(ctx, nodes, tasks, true, "sh", "-c", `echo "$SLURM_JOB_ID $SLURM_JOB_NODELIST"; exec cat >/dev/null`)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		in.Close() // the command ends; salloc releases the allocation
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("salloc: %v: %s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			cancel()
			<-done
			tb.Errorf("salloc did not end 30 s after its command's stdin closed: %s", stderr.String())
		}
		cancel()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		tb.Fatalf("salloc: no job line: %v", err)
	}
	job, list, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		tb.Fatalf("salloc: job line %q", line)
	}
	expanded, err := alloc.ExpandHostlist(list)
	if err != nil {
		tb.Fatal(err)
	}
	ctl, err := c.Emulated().Node(c.Controller())
	if err != nil {
		tb.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	wrapper := filepath.Join(c.Dir(), "srun-"+job)
	script := fmt.Sprintf("#!/bin/sh\nexec nsenter -t %d -n -u -m -- env -C %q /usr/bin/srun \"$@\"\n", ctl.HolderPID, wd)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		tb.Fatal(err)
	}
	return &testAlloc{
		job:   job,
		list:  list,
		nodes: expanded,
		srun:  wrapper,
		env:   append(c.Env(), "SLURM_JOB_ID="+job, "SLURM_JOB_NODELIST="+list),
	}
}

// spawner makes a Spawner for the allocation.
func (a *testAlloc) spawner(tb testing.TB, opts Options) *Spawner {
	tb.Helper()
	opts.Srun = a.srun
	opts.Env = append(append([]string(nil), a.env...), opts.Env...)
	if opts.Logf == nil {
		opts.Logf = tb.Logf
	}
	s, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// stepProcs lists the processes in node's network namespace other than
// its slurmd and the emulated node's own (holder and sshd): those of job
// steps.
func stepProcs(tb testing.TB, c *slurm.Cluster, node string) []string {
	tb.Helper()
	nd, err := c.Emulated().Node(node)
	if err != nil {
		tb.Fatal(err)
	}
	ds, err := c.Daemons()
	if err != nil {
		tb.Fatal(err)
	}
	daemon := map[int]bool{nd.HolderPID: true, nd.SSHDPID: true}
	for _, d := range ds {
		daemon[d.PID] = true
	}
	pids, err := cluster.PidsInNetns([]string{nd.Netns})
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, pid := range pids[nd.Netns] {
		if daemon[pid] {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue // gone meanwhile
		}
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			continue // exited, awaiting its parent
		}
		out = append(out, fmt.Sprintf("%d:%s", pid, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")))
	}
	return out
}

// waitFor polls cond until it returns nil or timeout passes.
func waitFor(tb testing.TB, timeout time.Duration, what string, cond func() error) {
	tb.Helper()
	err := cluster.Poll(context.Background(), timeout, what, func() (bool, error) { return cond() == nil, nil })
	if err != nil {
		tb.Fatalf("%v: %v", err, cond())
	}
}

// output collects a session's stdout and stderr.
type output struct {
	mu       sync.Mutex
	out, err bytes.Buffer
	done     sync.WaitGroup
}

func collect(stdout, stderr io.Reader) *output {
	o := &output{}
	o.done.Add(2)
	copyTo := func(dst *bytes.Buffer, r io.Reader) {
		defer o.done.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			o.mu.Lock()
			dst.Write(buf[:n])
			o.mu.Unlock()
			if err != nil {
				return
			}
		}
	}
	go copyTo(&o.out, stdout)
	go copyTo(&o.err, stderr)
	return o
}

func (o *output) stdout() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Clone(o.out.Bytes())
}

func (o *output) stderr() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err.String()
}
