package alloc

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

func TestParseHostList(t *testing.T) {
	tests := []struct {
		in      string
		want    []Host
		wantErr string
	}{
		{in: "a", want: []Host{{"a", 0}}},
		{in: "host1,host2:4", want: []Host{{"host1", 0}, {"host2", 4}}},
		{in: " a:2 , b ", want: []Host{{"a", 2}, {"b", 0}}},
		{in: "n-1.example.org:16", want: []Host{{"n-1.example.org", 16}}},
		{in: "", wantErr: "empty host list"},
		{in: "a,,b", wantErr: `entry 2 "": empty host name`},
		{in: "a,b,a", want: []Host{{"a", 2}, {"b", 0}}},
		{in: "a:3,A,b:2,a:2", want: []Host{{"a", 6}, {"b", 2}}},
		{in: "localhost,127.0.0.1", want: []Host{{"localhost", 0}, {"127.0.0.1", 0}}},
		{in: "a:1000000,a:100000", wantErr: "more than"},
		{in: "a:0", wantErr: "slot count 0"},
		{in: "a:-1", wantErr: `bad slot count "-1"`},
		{in: "a:x", wantErr: `bad slot count "x"`},
		{in: "a:", wantErr: `bad slot count ""`},
		{in: "a:99999999999", wantErr: "bad slot count"},
		{in: "a:2000000", wantErr: "exceeds the limit"},
		{in: "a b", wantErr: "bad character"},
		{in: "a:1:2", wantErr: "bad slot count"},
	}
	for _, tc := range tests {
		got, err := ParseHostList(tc.in)
		checkResult(t, "ParseHostList("+tc.in+")", got, err, tc.want, tc.wantErr)
	}
}

func TestParseHostfile(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Host
		wantErr  string
	}{
		{name: "plain", in: "a\nb\n", want: []Host{{"a", 0}, {"b", 0}}},
		{name: "forms", in: "# cluster\n\na:4\nb slots=2   # two\n  c  slots=3 max_slots=8\nd\n",
			want: []Host{{"a", 4}, {"b", 2}, {"c", 3}, {"d", 0}}},
		{name: "no final newline", in: "a:2", want: []Host{{"a", 2}}},
		{name: "crlf", in: "a:2\r\nb\r\n", want: []Host{{"a", 2}, {"b", 0}}},
		{name: "bad count", in: "a\nb\nc:x\n", wantErr: `hosts:3: bad slot count "x"`},
		{name: "bad slots=", in: "a slots=x\n", wantErr: `hosts:1: bad slot count "x"`},
		{name: "zero", in: "a slots=0\n", wantErr: "hosts:1: slot count 0"},
		{name: "twice", in: "a:2 slots=2\n", wantErr: "hosts:1: slot count given twice"},
		{name: "repeated", in: "a\n# x\nb\na:3\n", want: []Host{{"a", 4}, {"b", 0}}},
		{name: "pbs style", in: "nodeA\nnodeA\nnodeA\nnodeA\n", want: []Host{{"nodeA", 4}}},
		{name: "hydra and open mpi", in: "a:2\nb slots=3 max_slots=4\na slots=1\n", want: []Host{{"a", 3}, {"b", 3}}},
		{name: "unknown field", in: "a foo=1\n", wantErr: `hosts:1: unknown field "foo"`},
		{name: "stray word", in: "a b\n", wantErr: `hosts:1: unexpected field "b"`},
		{name: "empty", in: "# nothing\n\n", wantErr: "hosts: no hosts"},
		{name: "long line", in: strings.Repeat("x", maxLineLen+10) + "\n", wantErr: "hosts:1: line longer"},
	}
	for _, tc := range tests {
		got, err := ParseHostfile("hosts", strings.NewReader(tc.in))
		checkResult(t, "ParseHostfile "+tc.name, got, err, tc.want, tc.wantErr)
	}
}

func TestParsePBSNodefile(t *testing.T) {
	got, err := ParsePBSNodefile("nodefile", strings.NewReader("n1\nn1\nn2\n\nn1\nn3\n"))
	checkResult(t, "pbs", got, err, []Host{{"n1", 3}, {"n2", 1}, {"n3", 1}}, "")
	_, err = ParsePBSNodefile("nodefile", strings.NewReader("n1\nbad name\n"))
	checkResult(t, "pbs bad", []Host(nil), err, nil, "nodefile:2: bad character")
	_, err = ParsePBSNodefile("nodefile", strings.NewReader("\n"))
	checkResult(t, "pbs empty", []Host(nil), err, nil, "nodefile: no hosts")
}

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "node1", want: []string{"node1"}},
		{in: "node[001-004,010]", want: []string{"node001", "node002", "node003", "node004", "node010"}},
		{in: "node[001-004,010],gpu[1-2]", want: []string{"node001", "node002", "node003", "node004", "node010", "gpu1", "gpu2"}},
		{in: "a,b[8-11],c", want: []string{"a", "b8", "b9", "b10", "b11", "c"}},
		{in: "n[08-10]", want: []string{"n08", "n09", "n10"}},
		{in: "r[1-2]n[01-02]", want: []string{"r1n01", "r1n02", "r2n01", "r2n02"}},
		{in: "node[1-2]-ib", want: []string{"node1-ib", "node2-ib"}},
		{in: "node[001,003,005-006]", want: []string{"node001", "node003", "node005", "node006"}},
		{in: "[1-2]", want: []string{"1", "2"}},
		{in: "", wantErr: "empty hostlist"},
		{in: "a,", wantErr: "empty entry 2"},
		{in: "n[1-2", wantErr: "unclosed '['"},
		{in: "n1-2]", wantErr: "unbalanced ']'"},
		{in: "n[[1]]", wantErr: "nested '['"},
		{in: "n[]", wantErr: "empty brackets"},
		{in: "n[3-1]", wantErr: "descending range"},
		{in: "n[1-]", wantErr: "empty number"},
		{in: "n[a-b]", wantErr: "bad number"},
		{in: "n[1,,2]", wantErr: "empty number"},
		{in: "n[0-99999999999]", wantErr: "more than"},
		{in: "a[0-2000]b[0-2000]", wantErr: "more than"},
		{in: "n[1234567890123456789]", wantErr: "too long"},
		{in: "bad name[1-2]", wantErr: "bad character"},
	}
	for _, tc := range tests {
		got, err := ExpandHostlist(tc.in)
		checkResult(t, "ExpandHostlist("+tc.in+")", got, err, tc.want, tc.wantErr)
	}
}

func TestParseTasksPerNode(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr string
	}{
		{in: "1", want: []int{1}},
		{in: "2(x3),1", want: []int{2, 2, 2, 1}},
		{in: "1(x4)", want: []int{1, 1, 1, 1}},
		{in: "4,2(x2),3", want: []int{4, 2, 2, 3}},
		{in: "", wantErr: "empty"},
		{in: "2(3)", wantErr: "want N or N(xM)"},
		{in: "2(x3", wantErr: "want N or N(xM)"},
		{in: "2(x0)", wantErr: "bad repeat"},
		{in: "0", wantErr: "slot count 0"},
		{in: "x", wantErr: "bad slot count"},
		{in: "1(x1000000),1(x1000000)", wantErr: "longer than"},
	}
	for _, tc := range tests {
		got, err := ParseTasksPerNode(tc.in)
		checkResult(t, "ParseTasksPerNode("+tc.in+")", got, err, tc.want, tc.wantErr)
	}
}

func TestDiscover(t *testing.T) {
	fsys := fstest.MapFS{
		"hosts":    {Data: []byte("a:2\nb\n")},
		"pbsnodes": {Data: []byte("p1\np1\np2\n")},
		"badhosts": {Data: []byte("a\na:x\n")},
	}
	open := func(name string) (io.ReadCloser, error) { return fsys.Open(name) }
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	slurm := map[string]string{"SLURM_JOB_NODELIST": "node[001,003,005-006]", "SLURM_TASKS_PER_NODE": "2(x3),1"}
	both := map[string]string{"SLURM_JOB_NODELIST": "s1", "PBS_NODEFILE": "pbsnodes"}
	tests := []struct {
		name    string
		src     Sources
		want    Allocation
		wantErr string
	}{
		{name: "none", src: Sources{}, want: Allocation{Source: SourceNone}},
		{name: "hostlist beats env", src: Sources{HostList: "x:3", Getenv: env(slurm)},
			want: Allocation{Source: SourceHostList, Hosts: []Host{{"x", 3}}}},
		{name: "hostfile beats env", src: Sources{Hostfile: "hosts", Getenv: env(slurm), Open: open},
			want: Allocation{Source: SourceHostfile, Hosts: []Host{{"a", 2}, {"b", 0}}}},
		{name: "slurm", src: Sources{Getenv: env(slurm)},
			want: Allocation{Source: SourceSlurm, Hosts: []Host{{"node001", 2}, {"node003", 2}, {"node005", 2}, {"node006", 1}}}},
		{name: "old slurm var, no tasks", src: Sources{Getenv: env(map[string]string{"SLURM_NODELIST": "n[1-2]"})},
			want: Allocation{Source: SourceSlurm, Hosts: []Host{{"n1", 0}, {"n2", 0}}}},
		{name: "slurm beats pbs", src: Sources{Getenv: env(both), Open: open},
			want: Allocation{Source: SourceSlurm, Hosts: []Host{{"s1", 0}}}},
		{name: "pbs", src: Sources{Getenv: env(map[string]string{"PBS_NODEFILE": "pbsnodes"}), Open: open},
			want: Allocation{Source: SourcePBS, Hosts: []Host{{"p1", 2}, {"p2", 1}}}},
		{name: "both explicit", src: Sources{HostList: "a", Hostfile: "hosts"}, wantErr: "both -H and --hostfile"},
		{name: "hostfile error", src: Sources{Hostfile: "badhosts", Open: open}, wantErr: `badhosts:2: bad slot count "x"`},
		{name: "missing hostfile", src: Sources{Hostfile: "nope", Open: open}, wantErr: "open host file"},
		{name: "slurm mismatch", src: Sources{Getenv: env(map[string]string{"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "1(x3)"})},
			wantErr: "gives 3 nodes, SLURM_JOB_NODELIST 2"},
		{name: "slurm duplicate", src: Sources{Getenv: env(map[string]string{"SLURM_JOB_NODELIST": "n[1-2],n1"})},
			wantErr: `node "n1" listed twice`},
		{name: "slurm bad list", src: Sources{Getenv: env(map[string]string{"SLURM_JOB_NODELIST": "n[1-"})},
			wantErr: "SLURM_JOB_NODELIST: unclosed"},
		{name: "pbs missing", src: Sources{Getenv: env(map[string]string{"PBS_NODEFILE": "nope"}), Open: open},
			wantErr: "PBS_NODEFILE: open host file"},
	}
	for _, tc := range tests {
		got, err := Discover(tc.src)
		checkResult(t, "Discover "+tc.name, got, err, tc.want, tc.wantErr)
	}
}

func TestDiscoverOpensRealFiles(t *testing.T) {
	// Without an Open function Discover reads the file system.
	path := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(path, []byte("h1 slots=2\nh2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Discover(Sources{Hostfile: path})
	checkResult(t, "Discover real file", got, err,
		Allocation{Source: SourceHostfile, Hosts: []Host{{"h1", 2}, {"h2", 0}}}, "")
	_, err = Discover(Sources{Hostfile: path + ".missing"})
	checkResult(t, "Discover missing file", Allocation{}, err, Allocation{}, "no such file")
}

// checkResult compares a (value, error) pair with the expectation: an error
// containing wantErr, or no error and a value deeply equal to want.
func checkResult[T any](t *testing.T, what string, got T, err error, want T, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: error %v, want one containing %q", what, err, wantErr)
		}
		return
	}
	if err != nil {
		t.Errorf("%s: unexpected error %v", what, err)
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}
