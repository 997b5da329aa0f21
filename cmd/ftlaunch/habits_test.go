package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/chaostest"
	"github.com/ftlaunch/ftlaunch/chaos/cluster"
)

// What users of mpiexec (Hydra), Open MPI's mpirun and srun type works the
// way they expect (issue 16): end-to-end, with real processes.

// sortedLines returns the lines of s, sorted.
func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(lines)
	return lines
}

// TestMPMDBlocks runs two programs in one job: ranks numbered in order
// across the blocks, each block with its own -n, working directory and
// environment, and the appnum of its block.
func TestMPMDBlocks(t *testing.T) {
	dir := t.TempDir()
	r := ftlaunch(t, "", "run", "-genv", "G", "all", "-n", "2", "sh", "-c", `echo "a $FTLAUNCH_RANK/$FTLAUNCH_SIZE app=$FTLAUNCH_APPNUM G=$G B=${B:-} $(pwd)"`,
		":", "-n", "3", "--wdir", dir, "--env", "B=b", "sh", "-c", `echo "b $FTLAUNCH_RANK/$FTLAUNCH_SIZE app=$FTLAUNCH_APPNUM G=$G B=$B $(pwd)"`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	cwd := regexp.MustCompile(`^/\S+$`)
	var got []string
	for _, l := range sortedLines(r.stdout) {
		f := strings.Fields(l)
		if len(f) != 6 || !cwd.MatchString(f[5]) {
			t.Fatalf("line %q in:\n%s", l, r.stdout)
		}
		if f[0] == "b" && f[5] != dir {
			t.Errorf("block 2 ran in %s, want its --wdir %s", f[5], dir)
		}
		got = append(got, strings.Join(f[:5], " "))
	}
	want := []string{"a 0/5 app=0 G=all B=", "a 1/5 app=0 G=all B=", "b 2/5 app=1 G=all B=b", "b 3/5 app=1 G=all B=b", "b 4/5 app=1 G=all B=b"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}

	// A colon is never passed to a program, and a bad block is an error.
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-n", "2", "echo", "a", ":"}, "nothing after the last ':'"},
		{[]string{":", "-n", "2", "echo"}, "':' in block 1 before its program"},
		{[]string{"-n", "1", "echo", ":", "echo"}, "block 2 (echo) has no -n"},
		{[]string{"-n", "1", "echo", ":", "-n", "1", ":", "echo"}, "':' in block 2 before its program"},
	} {
		r := ftlaunch(t, "", append([]string{"run"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.msg) || r.stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 with %q", tc.args, r.code, r.stdout, r.stderr, tc.msg)
		}
	}
}

// TestMPICHAppNum: under MPICH, -n 1 ./a : -n 3 ./b is one world of 4
// ranks whose MPI_APPNUM is 0 for a and 1 for b, on one node and over two
// test nodes (where the last also checks the PMI-1 TCP mode).
func TestMPICHAppNum(t *testing.T) {
	prog := mpiProgram(t, "mpi_appnum")
	for name, args := range map[string][]string{
		"one node":          {"run", "-n", "1", prog, "a", ":", "-n", "3", prog, "b"},
		"test nodes, tcp":   {"run", "--test-nodes", "2", "-n", "1", prog, "a", ":", "-n", "3", "env", "-u", "PMI_FD", prog, "b"},
		"round robin nodes": {"run", "--test-nodes", "2", "--map-by", "node", "-n", "1", prog, "a", ":", "-n", "3", prog, "b"},
	} {
		t.Run(name, func(t *testing.T) {
			r := ftlaunch(t, "", args...)
			if r.code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			lines := sortedLines(r.stdout)
			if len(lines) != 4 {
				t.Fatalf("%d lines, want 4:\n%s", len(lines), r.stdout)
			}
			for i, l := range lines {
				prog, app := "b", 1
				if i == 0 {
					prog, app = "a", 0
				}
				if want := fmt.Sprintf("%s rank=%d size=4 appnum=%d ", prog, i, app); !strings.HasPrefix(l, want) {
					t.Errorf("line %q, want it to start with %q", l, want)
				}
			}
		})
	}
}

// TestMPICHLocalRankVariables checks the variables wrapper scripts read
// (Hydra's MPI_LOCALRANKID and MPI_LOCALNRANKS, Open MPI's
// OMPI_COMM_WORLD_*) against what MPICH itself finds for each rank: its
// place among the ranks sharing its node.
func TestMPICHLocalRankVariables(t *testing.T) {
	prog := mpiProgram(t, "mpi_appnum")
	r := ftlaunch(t, "", "run", "-n", "5", "--test-nodes", "2", prog)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	re := regexp.MustCompile(`^prog rank=(\d+) size=5 appnum=0 local=(\d+)/(\d+) MPI_LOCALRANKID=(\d+) MPI_LOCALNRANKS=(\d+) OMPI=(\d+)/5:(\d+)/(\d+)$`)
	lines := sortedLines(r.stdout)
	if len(lines) != 5 {
		t.Fatalf("want 5 lines:\n%s", r.stdout)
	}
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q", l)
		}
		rank, local, localSize := m[1], m[2], m[3]
		if m[4] != local || m[5] != localSize || m[6] != rank || m[7] != local || m[8] != localSize {
			t.Errorf("variables disagree with MPICH's node communicator: %q", l)
		}
	}
}

// TestRankVariablesNoSlurm checks the rank variables with a plain program,
// and that outside a Slurm allocation no SLURM_ variable appears.
func TestRankVariablesNoSlurm(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SLURM_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	r := ftlaunch(t, "", "run", "-n", "3", "--test-nodes", "2", "sh", "-c",
		`echo "$OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_SIZE $OMPI_COMM_WORLD_LOCAL_RANK $OMPI_COMM_WORLD_LOCAL_SIZE $MPI_LOCALRANKID $MPI_LOCALNRANKS slurm:$(env | grep -c ^SLURM_)"`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := []string{"0 3 0 2 0 2 slurm:0", "1 3 1 2 1 2 slurm:0", "2 3 0 1 0 1 slurm:0"}
	if got := sortedLines(r.stdout); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestLabels: off by default, on with -l, --label and --tag-output, and
// --label false is --label=false (never the program false).
func TestLabels(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{nil, "hi\nhi\n"},
		{[]string{"-l"}, "[0] hi\n[1] hi\n"},
		{[]string{"--label"}, "[0] hi\n[1] hi\n"},
		{[]string{"--tag-output"}, "[0] hi\n[1] hi\n"},
		{[]string{"--label", "true"}, "[0] hi\n[1] hi\n"},
		{[]string{"-l", "--label", "false"}, "hi\nhi\n"},
		{[]string{"-l", "--label=false"}, "hi\nhi\n"},
	} {
		args := append(append([]string{"run", "-n", "2"}, tc.flags...), "echo", "hi")
		r := ftlaunch(t, "", args...)
		if r.code != 0 || strings.Join(sortedLines(r.stdout), "\n")+"\n" != tc.want {
			t.Errorf("%q: exit %d, stdout %q, want %q; stderr %s", tc.flags, r.code, r.stdout, tc.want, r.stderr)
		}
	}
}

// TestSpellings: the other launchers' spellings of flags and values.
func TestSpellings(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FTL_EXPORTED", "yes")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--chdir", dir, "pwd"}, dir},
		{[]string{"-wd", dir, "pwd"}, dir},
		{[]string{"-D", dir, "pwd"}, dir},
		{[]string{"-genv", "V", "two words", "sh", "-c", "echo $V"}, "two words"},
		{[]string{"-genv", "V=x", "sh", "-c", "echo $V"}, "x"},
		{[]string{"--env", "V", "y", "sh", "-c", "echo $V"}, "y"},
		{[]string{"--export", "FTL_EXPORTED,W=z", "sh", "-c", "echo $FTL_EXPORTED $W"}, "yes z"},
		{[]string{"--export=ALL,W=z", "sh", "-c", "echo $W"}, "z"},
		{[]string{"--ntasks", "2", "sh", "-c", "echo $FTLAUNCH_SIZE"}, "2\n2"},
		{[]string{"-np=2", "sh", "-c", "echo $FTLAUNCH_SIZE"}, "2\n2"},
		{[]string{"-genvall", "-K", "-bootstrap", "fork", "-prepend-rank", "echo", "x"}, "[0] x"},
	} {
		r := ftlaunch(t, "", append([]string{"run"}, tc.args...)...)
		if r.code != 0 || strings.TrimSpace(r.stdout) != tc.want {
			t.Errorf("%q: exit %d, stdout %q, want %q; stderr %s", tc.args, r.code, r.stdout, tc.want, r.stderr)
		}
	}

	// --timeout in plain seconds (as MPIEXEC_TIMEOUT), and -v.
	m := marker(t)
	r := ftlaunch(t, "", "run", "-v", "--timeout", "1", "--kill-after", "1", "sleep", m)
	if r.code != 124 || r.elapsed > 20*time.Second || !strings.Contains(r.stderr, "--timeout 1s") || !strings.Contains(r.stderr, "rank(s) running") {
		t.Errorf("--timeout 1: exit %d after %v; stderr:\n%s", r.code, r.elapsed, r.stderr)
	}
	waitGone(t, "sleep "+m, 10*time.Second)

	// Errors spell the flag as typed.
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--nodes-please", "2", "true"}, "unknown flag --nodes-please"},
		{[]string{"-frobnicate", "true"}, "unknown flag -frobnicate"},
		{[]string{"--ntasks", "x", "true"}, `--ntasks "x": want a whole number`},
		{[]string{"-np", "0", "true"}, "-np must be at least 1"},
		{[]string{"--timeout", "soon", "true"}, `--timeout "soon": want seconds (60) or a duration`},
		{[]string{"-N", "2", "true"}, "-N is not supported: srun reads it as a node count"},
		{[]string{"--label=maybe", "true"}, "--label=maybe: want true or false"},
		{[]string{"--bind-to", "hwthread", "true"}, `--bind-to "hwthread": want none, core or socket`},
		{[]string{"--export", "NONE", "true"}, "--export NONE: not supported"},
		{[]string{"-genv", "V"}, "-genv V needs a value"},
		{[]string{"--time=5", "true"}, "--time is not supported: srun's time limit is in minutes"},
		{[]string{"--mca", "btl", "self", "true"}, "--mca is not supported"},
		{[]string{"--multi-prog", "f"}, "--multi-prog is not supported: write the blocks on the command line"},
	} {
		r := ftlaunch(t, "", append([]string{"run"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.msg) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, r.code, r.stderr, tc.msg)
		}
	}

	// ftlaunch help run is run's help.
	help := ftlaunch(t, "", "help", "run")
	if own := ftlaunch(t, "", "run", "--help"); help.code != 0 || help.stdout != own.stdout || !strings.Contains(help.stdout, "Usage: ftlaunch run") {
		t.Errorf("help run: exit %d, stdout %q", help.code, help.stdout)
	}
}

// TestPlacementOnTestNodes: --ppn, --npernode and --map-by place ranks on
// test nodes as they do on hosts.
func TestPlacementOnTestNodes(t *testing.T) {
	show := `echo "$FTLAUNCH_RANK $FTLAUNCH_NODE $FTLAUNCH_LOCAL_RANK/$FTLAUNCH_LOCAL_SIZE"`
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{[]string{"--test-nodes", "2", "--ppn", "3"}, []string{"0 node0 0/3", "1 node0 1/3", "2 node0 2/3", "3 node1 0/3", "4 node1 1/3", "5 node1 2/3"}},
		{[]string{"--test-nodes", "3", "--npernode", "1", "-n", "2"}, []string{"0 node0 0/1", "1 node1 0/1"}},
		{[]string{"--test-nodes", "2", "--map-by", "ppr:2:node"}, []string{"0 node0 0/2", "1 node0 1/2", "2 node1 0/2", "3 node1 1/2"}},
		{[]string{"--test-nodes", "2", "--map-by", "node", "-n", "3"}, []string{"0 node0 0/2", "1 node1 0/1", "2 node0 1/2"}},
	} {
		r := ftlaunch(t, "", append(append([]string{"run"}, tc.flags...), "sh", "-c", show)...)
		if got := sortedLines(r.stdout); r.code != 0 || !slices.Equal(got, tc.want) {
			t.Errorf("%q: exit %d, got %q, want %q; stderr %s", tc.flags, r.code, got, tc.want, r.stderr)
		}
	}
	r := ftlaunch(t, "", "run", "--test-nodes", "2", "--ppn", "1", "-n", "3", "true")
	if r.code != 2 || !strings.Contains(r.stderr, "-n 3 does not fit --ppn 1 on 2 hosts") {
		t.Errorf("-n 3 --ppn 1 on 2 test nodes: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestBindToCore binds two local ranks to disjoint CPUs (reported by
// --verbose), refuses more ranks than cores, and lets them share with
// --oversubscribe.
func TestBindToCore(t *testing.T) {
	show := `grep Cpus_allowed_list /proc/self/status | awk -v r=$FTLAUNCH_RANK '{print r, $2}'`
	r := ftlaunch(t, "", "run", "-n", "2", "--bind-to", "core", "--verbose", "sh", "-c", show)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := sortedLines(r.stdout)
	if len(lines) != 2 {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	cpus := map[string]int{}
	for _, l := range lines {
		f := strings.Fields(l)
		for _, c := range expandCPUList(t, f[1]) {
			cpus[c]++
		}
		if !strings.Contains(r.stderr, "rank "+f[0]+" on ") || !strings.Contains(r.stderr, "bound to CPUs "+f[1]+" (--bind-to core)") {
			t.Errorf("--verbose does not report rank %s bound to %s:\n%s", f[0], f[1], r.stderr)
		}
	}
	for c, n := range cpus {
		if n != 1 {
			t.Errorf("CPU %s is in %d ranks' sets:\n%s", c, n, r.stdout)
		}
	}
	// Unbound by default: both see every CPU the test does.
	r = ftlaunch(t, "", "run", "-n", "2", "sh", "-c", show)
	own, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	mine := regexp.MustCompile(`Cpus_allowed_list:\s*(\S+)`).FindSubmatch(own)
	if got := sortedLines(r.stdout); r.code != 0 || len(got) != 2 || !strings.HasSuffix(got[0], " "+string(mine[1])) || !strings.HasSuffix(got[1], " "+string(mine[1])) {
		t.Errorf("unbound ranks: exit %d, %q, want all of %s", r.code, got, mine[1])
	}

	n := strconv.Itoa(len(cpus)*2 + 1) // more ranks than the cores
	r = ftlaunch(t, "", "run", "-n", n, "--bind-to", "core", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "--oversubscribe lets ranks share cores") {
		t.Errorf("-n %s --bind-to core: exit %d, stderr:\n%s", n, r.code, r.stderr)
	}
	r = ftlaunch(t, "", "run", "-n", n, "--bind-to", "core", "--oversubscribe", "echo") // not "true": --oversubscribe true is a value
	if r.code != 0 {
		t.Errorf("-n %s --bind-to core --oversubscribe: exit %d, stderr:\n%s", n, r.code, r.stderr)
	}
	r = ftlaunch(t, "", "run", "-n", "2", "--bind-to", "socket", "sh", "-c", show)
	if r.code != 0 || len(sortedLines(r.stdout)) != 2 {
		t.Errorf("--bind-to socket: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}

// expandCPUList expands a kernel CPU list ("0-2,5").
func expandCPUList(t *testing.T, s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		lo, hi, ok := strings.Cut(part, "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil {
			t.Fatalf("CPU list %q", s)
		}
		for c := a; c <= b; c++ {
			out = append(out, strconv.Itoa(c))
		}
	}
	return out
}

// TestLocalHostList: a host list or hostfile naming only this machine runs
// here, without SSH (an SSH configuration that refuses every connection
// proves it), with the slots it gives.
func TestLocalHostList(t *testing.T) {
	dir := t.TempDir()
	sshConfig := filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(sshConfig, []byte("Host *\n    Port 1\n    ConnectTimeout 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("localhost\nlocalhost\nlocalhost slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	show := `echo "$FTLAUNCH_RANK $FTLAUNCH_LOCAL_SIZE"`
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{[]string{"-f", hosts}, []string{"0 4", "1 4", "2 4", "3 4"}},
		{[]string{"-machinefile", hosts, "-n", "2"}, []string{"0 2", "1 2"}},
		{[]string{"--host", "localhost,localhost"}, []string{"0 2", "1 2"}},
		{[]string{"-H", self + ":2", "--hosts", self}, []string{"0 3", "1 3", "2 3"}},
		// Two names of this machine are two nodes, as the user wrote them
		// (names are never resolved to merge hosts).
		{[]string{"-host", "localhost,127.0.0.1"}, []string{"0 1", "1 1"}},
	} {
		args := append(append([]string{"run", "--ssh-config", sshConfig}, tc.flags...), "sh", "-c", show)
		r := ftlaunch(t, "", args...)
		if got := sortedLines(r.stdout); r.code != 0 || !slices.Equal(got, tc.want) {
			t.Errorf("%q: exit %d, got %q, want %q; stderr %s", tc.flags, r.code, got, tc.want, r.stderr)
		}
	}
	// --launcher ssh insists on SSH.
	r := ftlaunch(t, "", "run", "--ssh-config", sshConfig, "--launcher", "ssh", "-H", "localhost", "true")
	if r.code == 0 {
		t.Errorf("--launcher ssh to a refusing port succeeded; stderr %s", r.stderr)
	}
}

// TestClusterHostfileRepeats: a host on several lines of a hostfile adds
// its slots, as PBS, Hydra and Open MPI read it: nodeA on 4 lines runs 4
// ranks there (emulated cluster, SSH).
func TestClusterHostfileRepeats(t *testing.T) {
	c := chaostest.Cluster(t, 2, cluster.Config{})
	nodes, err := c.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	a, b := nodes[0].Name, nodes[1].Name
	hosts := filepath.Join(t.TempDir(), "hosts")
	content := fmt.Sprintf("%s\n%s\n# the same host again\n%s\n%s\n%s:2\n", a, a, a, a, b)
	if err := os.WriteFile(hosts, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	show := `echo "$FTLAUNCH_RANK $(hostname) $FTLAUNCH_LOCAL_RANK/$FTLAUNCH_LOCAL_SIZE"`
	r := ftlaunch(t, "", "run", "--ssh-config", c.SSHConfig(), "-machinefile", hosts, "sh", "-c", show)
	want := []string{
		"0 " + a + " 0/4", "1 " + a + " 1/4", "2 " + a + " 2/4", "3 " + a + " 3/4",
		"4 " + b + " 0/2", "5 " + b + " 1/2",
	}
	if got := sortedLines(r.stdout); r.code != 0 || !slices.Equal(got, want) {
		t.Fatalf("exit %d\ngot  %q\nwant %q\nstderr:\n%s", r.code, got, want, r.stderr)
	}
	// -H a,b,a: a host repeated in -H adds slots too; repeated -H flags add up.
	r = ftlaunch(t, "", "run", "--ssh-config", c.SSHConfig(), "-H", a+","+b, "--host", a, "sh", "-c", show)
	want = []string{"0 " + a + " 0/2", "1 " + a + " 1/2", "2 " + b + " 0/1"}
	if got := sortedLines(r.stdout); r.code != 0 || !slices.Equal(got, want) {
		t.Fatalf("-H: exit %d\ngot  %q\nwant %q\nstderr:\n%s", r.code, got, want, r.stderr)
	}

	// This machine among the hosts: its agent starts here (no sshd runs on
	// it for the cluster's configuration), the others over SSH; its node
	// takes the machine's host name.
	self, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tree, hosts string }{{"flat", "localhost:2," + a + ":1," + b + ":1"}, {"kary:1", "127.0.0.1:2," + a + ":1," + b + ":1"}} {
		r = ftlaunch(t, "", "run", "--ssh-config", c.SSHConfig(), "--tree", tc.tree, "-H", tc.hosts, "sh", "-c",
			`echo "$FTLAUNCH_RANK $(hostname) $FTLAUNCH_NODE $FTLAUNCH_LOCAL_RANK/$FTLAUNCH_LOCAL_SIZE"`)
		want = []string{"0 " + self + " " + self + " 0/2", "1 " + self + " " + self + " 1/2", "2 " + a + " " + a + " 0/1", "3 " + b + " " + b + " 0/1"}
		if got := sortedLines(r.stdout); r.code != 0 || !slices.Equal(got, want) {
			t.Fatalf("mixed, --tree %s: exit %d\ngot  %q\nwant %q\nstderr:\n%s", tc.tree, r.code, got, want, r.stderr)
		}
	}
}
