package pmix

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// openMPIProgram compiles ../../cmd/ftlaunch/testdata/NAME.c with Open
// MPI's compiler, or skips the test when Open MPI or libpmix is absent.
func openMPIProgram(t *testing.T, name string) string {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("%v (make deps installs it)", err)
	}
	mpicc, err := exec.LookPath("mpicc.openmpi")
	if err != nil {
		t.Skip("mpicc.openmpi not installed (make deps installs openmpi-bin and libopenmpi-dev)")
	}
	out := filepath.Join(t.TempDir(), name)
	src := filepath.Join("..", "..", "cmd", "ftlaunch", "testdata", name+".c")
	if b, err := exec.Command(mpicc, "-O1", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("mpicc.openmpi %s: %v\n%s", name, err, b)
	}
	return out
}

// oneNode is a Backend for a job on one node: a fence's result is the
// node's own data.
type oneNode struct {
	mu        sync.Mutex
	fences    int
	aborts    []int
	finalized map[int]bool
	refused   []string
}

func (b *oneNode) Fence(ctx context.Context, data []byte) ([]byte, error) {
	b.mu.Lock()
	b.fences++
	b.mu.Unlock()
	return data, nil
}

func (b *oneNode) Connected(rank int) {}

func (b *oneNode) Abort(rank, code int, msg string) {
	b.mu.Lock()
	b.aborts = append(b.aborts, code)
	b.mu.Unlock()
}

func (b *oneNode) Finalized(rank int) {
	b.mu.Lock()
	if b.finalized == nil {
		b.finalized = map[int]bool{}
	}
	b.finalized[rank] = true
	b.mu.Unlock()
}

func (b *oneNode) Refused(rank int, what string) {
	b.mu.Lock()
	b.refused = append(b.refused, what)
	b.mu.Unlock()
}

// runRanks starts n ranks of prog with the namespace's fork environment
// and returns rank 0's output once all exited.
func runRanks(t *testing.T, ns *Namespace, n int, prog string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	var cmds []*exec.Cmd
	for r := range n {
		env, err := ns.ForkEnv(r)
		if err != nil {
			t.Fatal(err)
		}
		c := exec.Command(prog, args...)
		c.Env = append(append(append(ns.server.OpenMPIEnv(), os.Environ()...), env...), "OMPI_MCA_pml=ob1", "OMPI_MCA_btl=self,vader")
		if r == 0 {
			c.Stdout = &out
		}
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	t.Cleanup(func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	})
	for r, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return out.String()
}

func TestOpenMPIHelloOneNode(t *testing.T) {
	hello := openMPIProgram(t, "mpi_hello")
	s, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("rendezvous directory %s left behind (%v)", s.Dir(), err)
		}
	}()
	if _, err := Start(Config{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("second server in one process: %v, want ErrBusy", err)
	}
	b := &oneNode{}
	const n = 3
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := s.Register(ctx, Job{Nspace: "ftlaunch.test.1", NodeOf: make([]int, n), NodeNames: []string{"node0"},
		UID: os.Getuid(), GID: os.Getgid()}, b)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	got := runRanks(t, ns, n, hello)
	want := "hello from 3 ranks, allreduce sum 3 (want 3), bcast 42\n"
	if got != want {
		t.Fatalf("rank 0 printed %q, want %q", got, want)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// One node: libpmix completes the fences among its own clients and
	// asks the host for none.
	if len(b.finalized) != n || len(b.aborts) != 0 {
		t.Errorf("%d ranks finalized, aborts %v; want %d and none", len(b.finalized), b.aborts, n)
	}
}

func TestUnavailable(t *testing.T) {
	t.Setenv(LibraryEnv, filepath.Join(t.TempDir(), "libpmix.so.2"))
	err := Available()
	var ue *UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "libpmix2") {
		t.Fatalf("Available without the library: %v, want an UnavailableError naming libpmix2", err)
	}
}
