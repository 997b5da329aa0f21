//go:build linux

package pmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/alloc"
)

// The MPICH integration test runs real MPI programs, built with Debian's
// mpicc, against Serve and KVS. It is skipped when mpicc is missing
// (apt-get install mpich libmpich-dev) and with -short.

// mpiProgram exercises everything MPI_Init and MPI_Finalize need from PMI and
// then the communication paths set up from the exchanged addresses.
const mpiProgram = `#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    int rank, size, local, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1 && strcmp(argv[1], "abort") == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == size - 1)
            MPI_Abort(MPI_COMM_WORLD, 7);
        MPI_Barrier(MPI_COMM_WORLD); /* never completes */
        return 0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    long one = rank + 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    int token = rank == 0 ? 4242 : 0;
    MPI_Bcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int step = 1; step < size; step++) {
        int to = (rank + step) % size, from = (rank - step + size) % size;
        int out = rank * 1000 + to, in = -1;
        MPI_Sendrecv(&out, 1, MPI_INT, to, step, &in, 1, MPI_INT, from, step,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (in != from * 1000 + rank)
            bad++;
    }
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    printf("rank %d size %d sum %ld token %d bad %d local %d\n", rank, size, sum, token, bad, local);
    MPI_Finalize();
    return bad ? 3 : 0;
}
`

// buildMPIProgram compiles mpiProgram into dir, skipping the test when
// mpicc is missing.
func buildMPIProgram(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("MPICH integration test skipped with -short")
	}
	mpicc, err := exec.LookPath("mpicc.mpich")
	if err != nil {
		t.Skip("mpicc.mpich not found; install Debian's mpich and libmpich-dev to run the MPICH integration test")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "pmitest.c")
	if err := os.WriteFile(src, []byte(mpiProgram), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "pmitest")
	out, err := exec.Command(mpicc, "-O1", "-o", bin, src).CombinedOutput()
	if err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	return bin
}

// rankProc is one started rank.
type rankProc struct {
	cmd    *exec.Cmd
	conn   net.Conn // the launcher's end of the PMI socketpair
	stdout bytes.Buffer
	stderr bytes.Buffer
	err    error // from Wait
	stats  Stats
	serve  error // from Serve
}

// mpiJob is a job run by the test: its ranks and the KVS they share.
type mpiJob struct {
	ranks   []*rankProc
	kvs     *KVS
	mapping string

	mu     sync.Mutex
	aborts []string // "rank/code" per onAbort call
}

// killAll kills every rank's process group.
func (j *mpiJob) killAll() {
	for _, r := range j.ranks {
		if r.cmd.Process != nil {
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}

// runMPIJob starts n ranks of bin placed on the given hosts, serves their
// PMI connections and waits until all exited and all Serve calls returned.
func runMPIJob(t *testing.T, bin string, hosts string, req alloc.Request, args ...string) *mpiJob {
	t.Helper()
	return runMPIJobMode(t, bin, hosts, req, false, args...)
}

// runMPIJobMode is runMPIJob; with tcp the ranks connect to a TCP listener
// (PMI_PORT, PMI_ID) instead of inheriting a socket.
func runMPIJobMode(t *testing.T, bin string, hosts string, req alloc.Request, tcp bool, args ...string) *mpiJob {
	t.Helper()
	hl, err := alloc.ParseHostList(hosts)
	if err != nil {
		t.Fatal(err)
	}
	placement, err := alloc.Place(alloc.Allocation{Source: alloc.SourceHostList, Hosts: hl}, req)
	if err != nil {
		t.Fatal(err)
	}
	n := req.NP
	j := &mpiJob{mapping: alloc.ProcessMapping(placement)}
	j.kvs = NewKVS(n, func(rank, code int, msg string) {
		j.mu.Lock()
		j.aborts = append(j.aborts, fmt.Sprintf("%d/%d", rank, code))
		j.mu.Unlock()
		j.killAll() // MPI_Abort waits for an answer forever: kill the job
	})
	job := Job{Size: n, KVSName: "kvs_test_0", ProcessMapping: j.mapping}

	var tcpConns []net.Conn
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PMI_") || strings.HasPrefix(kv, "MPIR_") || strings.HasPrefix(kv, "HYDRA_")
	})
	var ln net.Listener
	if tcp {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
	}
	for r := range n {
		p := &rankProc{}
		p.cmd = exec.Command(bin, args...)
		p.cmd.Env = slices.Clone(env)
		if tcp {
			p.cmd.Env = append(p.cmd.Env, "PMI_PORT="+ln.Addr().String(), fmt.Sprintf("PMI_ID=%d", r))
		} else {
			fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatalf("socketpair: %v", err)
			}
			parent := os.NewFile(uintptr(fds[0]), "pmi-launcher")
			child := os.NewFile(uintptr(fds[1]), "pmi-rank")
			defer child.Close() // the rank has its own copy once started
			p.conn, err = net.FileConn(parent)
			parent.Close()
			if err != nil {
				t.Fatalf("FileConn: %v", err)
			}
			p.cmd.ExtraFiles = []*os.File{child} // fd 3 in the rank
			p.cmd.Env = append(p.cmd.Env, "PMI_FD=3", fmt.Sprintf("PMI_RANK=%d", r), fmt.Sprintf("PMI_SIZE=%d", n))
		}
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := p.cmd.Start(); err != nil {
			if p.conn != nil {
				p.conn.Close()
			}
			j.killAll()
			t.Fatalf("start rank %d: %v", r, err)
		}
		if len(p.cmd.ExtraFiles) > 0 {
			p.cmd.ExtraFiles[0].Close()
		}
		j.ranks = append(j.ranks, p)
	}
	// Guard: a job that does not end in time is killed and fails the test.
	guard := time.AfterFunc(2*time.Minute, func() {
		t.Errorf("MPI job of %d ranks did not finish in time; killing it", n)
		if ln != nil {
			ln.Close() // unblocks Accept
		}
		j.killAll()
	})
	defer guard.Stop()
	if tcp {
		// Accept one connection per rank; which rank it is, the client
		// says in cmd=initack, so Serve is given rank -1.
		for range n {
			c, err := ln.Accept()
			if err != nil {
				j.killAll()
				t.Fatalf("accept: %v", err)
			}
			tcpConns = append(tcpConns, c)
		}
	}
	t.Cleanup(func() {
		j.killAll()
		for _, r := range j.ranks {
			if r.conn != nil {
				r.conn.Close()
			}
		}
		for _, c := range tcpConns {
			c.Close()
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var claimMu sync.Mutex
	claimed := map[int]bool{}
	claim := func(id int) (int, error) {
		claimMu.Lock()
		defer claimMu.Unlock()
		if id < 0 || id >= n || claimed[id] {
			return 0, fmt.Errorf("pmiid %d unknown or taken", id)
		}
		claimed[id] = true
		return id, nil
	}
	tcpStats := make([]Stats, len(tcpConns))
	tcpErrs := make([]error, len(tcpConns))
	for i, c := range tcpConns {
		wg.Go(func() {
			tcpStats[i], tcpErrs[i] = Serve(ctx, c, Config{Job: job, Rank: -1, ClaimID: claim, Backend: j.kvs})
		})
	}
	for r, p := range j.ranks {
		if p.conn != nil {
			wg.Go(func() { p.stats, p.serve = Serve(ctx, p.conn, Config{Job: job, Rank: r, Backend: j.kvs}) })
		}
		wg.Go(func() { p.err = p.cmd.Wait() })
	}
	wg.Wait()
	for i := range tcpConns { // TCP connections are not tied to a rank; pool their results
		j.ranks[i%n].stats.add(tcpStats[i])
		if tcpErrs[i] != nil {
			j.ranks[i%n].serve = tcpErrs[i]
		}
	}
	return j
}

func TestMPICH(t *testing.T) {
	bin := buildMPIProgram(t)
	tests := []struct {
		name  string
		hosts string
		req   alloc.Request
		local int // ranks per emulated node, as MPI_COMM_TYPE_SHARED sees them
	}{
		{name: "n1", hosts: "localhost", req: alloc.Request{NP: 1}, local: 1},
		{name: "n2 two nodes", hosts: "a,b", req: alloc.Request{NP: 2, MapBy: alloc.MapByNode}, local: 1},
		{name: "n8 two nodes block", hosts: "a:4,b:4", req: alloc.Request{NP: 8}, local: 4},
		{name: "n8 one node", hosts: "a:8", req: alloc.Request{NP: 8}, local: 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := runMPIJob(t, bin, tc.hosts, tc.req)
			n := tc.req.NP
			var in, out, ops, gets int64
			for r, p := range j.ranks {
				if p.err != nil || p.serve != nil {
					t.Errorf("rank %d: exit %v, serve %v\nstdout: %s\nstderr: %s", r, p.err, p.serve, p.stdout.String(), p.stderr.String())
					continue
				}
				want := fmt.Sprintf("rank %d size %d sum %d token 4242 bad 0 local %d\n", r, n, n*(n+1)/2, tc.local)
				if got := p.stdout.String(); got != want {
					t.Errorf("rank %d printed %q, want %q (stderr %q)", r, got, want, p.stderr.String())
				}
				in += p.stats.BytesIn
				out += p.stats.BytesOut
				ops += p.stats.Requests
				gets += p.stats.Gets
			}
			t.Logf("n=%d mapping %s: %d PMI requests (%d gets), %d bytes in, %d bytes out, %d barriers",
				n, j.mapping, ops, gets, in, out, j.kvs.Barriers())
		})
	}
}

// TestMPICHTCP runs ranks in TCP mode: each connects to PMI_PORT and
// introduces itself with PMI_ID before cmd=init.
func TestMPICHTCP(t *testing.T) {
	bin := buildMPIProgram(t)
	const n = 4
	j := runMPIJobMode(t, bin, "a:2,b:2", alloc.Request{NP: n}, true)
	for r, p := range j.ranks {
		want := fmt.Sprintf("rank %d size %d sum %d token 4242 bad 0 local 2\n", r, n, n*(n+1)/2)
		if p.err != nil || p.serve != nil || p.stdout.String() != want {
			t.Errorf("rank %d: exit %v, serve %v, printed %q, want %q\nstderr: %s",
				r, p.err, p.serve, p.stdout.String(), want, p.stderr.String())
		}
	}
}

func TestMPICHAbort(t *testing.T) {
	bin := buildMPIProgram(t)
	const n = 4
	j := runMPIJob(t, bin, "a:2,b:2", alloc.Request{NP: n}, "abort")
	if want := []string{fmt.Sprintf("%d/7", n-1)}; !slices.Equal(j.aborts, want) {
		t.Fatalf("onAbort calls %v, want %v", j.aborts, want)
	}
	for r, p := range j.ranks {
		var ee *exec.ExitError
		if !errors.As(p.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("rank %d: %v, want killed by SIGKILL (stderr %q)", r, p.err, p.stderr.String())
		}
		var ae *AbortError
		switch {
		case r == n-1:
			if !errors.As(p.serve, &ae) || ae.Code != 7 || ae.Rank != r {
				t.Errorf("rank %d: Serve returned %v, want AbortError code 7", r, p.serve)
			}
		case !errors.Is(p.serve, ErrLost):
			// The killed ranks had initialized: their connections end
			// before finalize, the launcher's fastest failure signal.
			t.Errorf("rank %d: Serve returned %v, want ErrLost", r, p.serve)
		}
	}
}

// add accumulates o into s.
func (s *Stats) add(o Stats) {
	s.Requests += o.Requests
	s.Puts += o.Puts
	s.Gets += o.Gets
	s.Barriers += o.Barriers
	s.Garbage += o.Garbage
	s.BytesIn += o.BytesIn
	s.BytesOut += o.BytesOut
}
