package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/internal/testbuf"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
)

// An agent still connecting back to its parent is found by a fence of its
// node: it registers from its bootstrap's job and node before it connects
// (docs/chaos.md: one left running after its parent's host crashed, until
// its connect timeout, past the job's end).
func TestFenceFindsConnectingAgent(t *testing.T) {
	// The fence's records and marks, for both processes: a mark left by
	// an earlier run would fence this agent before it connects.
	t.Setenv("TMPDIR", t.TempDir())
	const job, node = "ft-fe0ce0ce0ce0", "node5"
	ca, err := secure.NewJobCA(job)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := ca.Issue(node)
	if err != nil {
		t.Fatal(err)
	}
	// A parent that accepts and never answers: the agent stays in its
	// TLS handshake, connecting back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		for len(accepted) > 0 {
			(<-accepted).Close()
		}
	}()
	boot := &proto.Bootstrap{Creds: creds.Marshal(), Port: ln.Addr().(*net.TCPAddr).Port, Hosts: []string{"127.0.0.1"}, Idx: 5, Inc: 1, Job: job, Node: node}
	agent := exec.Command(ftlaunchBin(t), "agent", "--connect")
	var stderr testbuf.Buffer
	agent.Stderr = &stderr
	stdin, err := agent.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- agent.Wait() }()
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		stdin.Close()
	})
	if _, err := stdin.Write(boot.Encode()); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-accepted: // it is connecting back now
		accepted <- c
	case err := <-exited:
		t.Fatalf("the agent ended (%v) before it connected back: %s", err, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("the agent did not connect back within 10 s: %s", stderr.String())
	}
	out, err := exec.Command(ftlaunchBin(t), "agent", "--fence", job, node, "1").CombinedOutput()
	if err != nil {
		t.Fatalf("fence: %v\n%s", err, out)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the agent ended with %v, want killed by the fence (fence said: %s)", err, out)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the agent connecting back still runs after the fence of its node: %s", out)
	}
}

// An agent whose parent's host crashes before it wrote the bootstrap (the
// SSH session stays open and silent) is found by the fence of its node:
// its command line names its job, node and incarnation, and it registers
// before it reads stdin. One started after that fence ran finds the
// fence's mark and ends at once (docs/chaos.md, chaos-mpi seed
// 6739412098373791412: such an agent outlived the job).
func TestFenceFindsAgentBeforeBootstrap(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // the fence records and marks, for both processes
	const job, node = "ft-be0ce0ce0ce0", "node6"
	start := func() (*exec.Cmd, chan error) {
		agent := exec.Command(ftlaunchBin(t), "agent", node, "--job", job, "--inc", "1", "--connect")
		stdin, err := agent.StdinPipe() // open and silent: the parent is gone
		if err != nil {
			t.Fatal(err)
		}
		if err := agent.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- agent.Wait() }()
		t.Cleanup(func() {
			_ = agent.Process.Kill()
			stdin.Close()
			<-exited
			exited <- nil
		})
		return agent, exited
	}
	agent, exited := start()
	// Wait until it registered (its record names its pid).
	rec := filepath.Join(os.TempDir(), fmt.Sprintf("ftlaunch-%d", os.Getuid()), "fence", job, node+".1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(rec)
		if err == nil && strings.HasPrefix(string(b), strconv.Itoa(agent.Process.Pid)+" ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not register before its bootstrap: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	out, err := exec.Command(ftlaunchBin(t), "agent", "--fence", job, node, "1").CombinedOutput()
	if err != nil {
		t.Fatalf("fence: %v\n%s", err, out)
	}
	select {
	case err := <-exited:
		exited <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the agent ended with %v, want killed by the fence (fence said: %s)", err, out)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the agent waiting for its bootstrap still runs after the fence of its node: %s", out)
	}
	// Started after the fence: it ends by itself, exit 2.
	_, exited = start()
	select {
	case err := <-exited:
		exited <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("an agent started after its fence ended with %v, want exit 2", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an agent started after the fence of its incarnation still runs")
	}
}
