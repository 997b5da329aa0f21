package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/alloc"
)

func noEnv(string) string { return "" }

func TestParseRunFlagsBlocks(t *testing.T) {
	f, err := parseRunFlags(strings.Fields("-l -n 2 --wdir /a -x A ./a 1 -n : -np 3 -genv G g --env B=b ./b : --ntasks=1 c"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.apps) != 3 || f.n != 6 || !f.nSet || !f.label {
		t.Fatalf("apps %+v, n %d, nSet %v, label %v", f.apps, f.n, f.nSet, f.label)
	}
	a, b, c := f.apps[0], f.apps[1], f.apps[2]
	if a.n != 2 || a.wdir != "/a" || !slices.Equal(a.env, []string{"A"}) || !slices.Equal(a.argv, []string{"./a", "1", "-n"}) {
		t.Errorf("block 1: %+v", a)
	}
	if b.n != 3 || b.wdir != "" || !slices.Equal(b.env, []string{"B=b"}) || !slices.Equal(b.argv, []string{"./b"}) {
		t.Errorf("block 2: %+v", b)
	}
	if c.n != 1 || !slices.Equal(c.argv, []string{"c"}) {
		t.Errorf("block 3: %+v", c)
	}
	if !slices.Equal(f.genv, []string{"G=g"}) {
		t.Errorf("genv %q", f.genv)
	}
}

func TestParseRunFlagsValues(t *testing.T) {
	for _, tc := range []struct {
		args  string
		check func(*runFlags) bool
	}{
		{"--timeout 60 x", func(f *runFlags) bool { return f.timeout == time.Minute }},
		{"--timeout=1.5 x", func(f *runFlags) bool { return f.timeout == 1500*time.Millisecond }},
		{"--timeout 2m x", func(f *runFlags) bool { return f.timeout == 2*time.Minute }},
		{"--kill-after 3 x", func(f *runFlags) bool { return f.killAfter == 3*time.Second }},
		{"--label false x", func(f *runFlags) bool { return !f.label && f.apps[0].argv[0] == "x" }},
		{"--label x", func(f *runFlags) bool { return f.label && f.apps[0].argv[0] == "x" }},
		{"-v x", func(f *runFlags) bool { return f.verbose }},
		{"-H a,b -H c x", func(f *runFlags) bool {
			return slices.Equal(f.hosts, []string{"a,b", "c"}) && f.launcher == "ssh" && f.n == 0
		}},
		{"-f h -n 3 x", func(f *runFlags) bool { return f.hostfile == "h" && f.n == 3 }},
		{"--npernode 2 x", func(f *runFlags) bool { return f.ppn == 2 && f.n == 2 }},
		{"--ppn 2 --test-nodes 3 x", func(f *runFlags) bool { return f.ppn == 2 && f.n == 6 }},
		{"--map-by ppr:4:node --test-nodes 2 x", func(f *runFlags) bool { return f.ppn == 4 && f.n == 8 }},
		{"--ppn 2 --test-nodes 5 --spare-nodes 2 --restart job x", func(f *runFlags) bool {
			return f.testNodes == 3 && f.n == 6 && slices.Equal(f.spares, []string{"node3", "node4"})
		}},
		{"--spares s[1-2] -H c --restart rank x", func(f *runFlags) bool { return slices.Equal(f.spareHosts, []string{"s1", "s2"}) }},
		{"--bind-to core x", func(f *runFlags) bool { return f.bindTo == "core" }},
		{"x", func(f *runFlags) bool { return f.mpi == "" }},
		{"--mpi pmix x", func(f *runFlags) bool { return f.mpi == "pmix" }},
		{"--mpi=pmi1 x", func(f *runFlags) bool { return f.mpi == "pmi1" }},
		{"--mpi none x", func(f *runFlags) bool { return f.mpi == "none" }},
		{"--mpi pmi1+pmix x", func(f *runFlags) bool { return f.mpi == "" }},
		{"-launcher fork x", func(f *runFlags) bool { return f.launcher == "local" && f.launcherSet }},
		{"-- -n 2", func(f *runFlags) bool { return f.n == 1 && slices.Equal(f.apps[0].argv, []string{"-n", "2"}) }},
	} {
		f, err := parseRunFlags(strings.Fields(tc.args), noEnv)
		if err != nil || !tc.check(f) {
			t.Errorf("%q: %+v, %v", tc.args, f, err)
		}
	}
	f, err := parseRunFlags([]string{"x"}, func(k string) string { return map[string]string{"MPIEXEC_TIMEOUT": "7"}[k] })
	if err != nil || f.timeout != 7*time.Second {
		t.Errorf("MPIEXEC_TIMEOUT: %v, %v", f, err)
	}
}

func TestParseRunFlagsErrors(t *testing.T) {
	for _, tc := range []struct{ args, msg string }{
		{"", "no program given"},
		{"-n 2", "no program given"},
		{"--ntasks x y", `--ntasks "x": want a whole number`},
		{"--what y", "unknown flag --what"},
		{"---n 2 y", "bad flag ---n"},
		{"-N 2 y", "-N is not supported"},
		{"y :", "nothing after the last ':'"},
		{": y", "':' in block 1"},
		{"-n 1 y : z", "block 2 (z) has no -n"},
		{"--prestage -n 1 y : -n 1 z", "--prestage copies one program"},
		{"--replicas 3 -n 1 y : -n 1 z", "--replicas > 1 with several blocks"},
		{"--map-by ppr:2:socket y", "only ppr:N:node"},
		{"--ppn 3 --map-by ppr:2:node y", "disagree"},
		{"-H a --hostfile h y", "both -H and --hostfile"},
		{"-H a --test-nodes 2 y", "--test-nodes runs on this machine"},
		{"--launcher ssh y", "needs hosts"},
		{"--launcher mars y", `--launcher "mars"`},
		{"--mpi pmi2 y", `--mpi "pmi2": want pmi1, pmix or none`},
		{"--env", "--env needs a value"},
		{"--replicas 2 y", "--replicas must be 1, 3 or 5"},
		{"--spare-nodes 1 --restart rank y", "--spare-nodes needs --test-nodes or hosts"},
		{"--spare-nodes 2 --test-nodes 2 --restart rank y", "leaves no node for the job"},
		{"--spare-nodes 1 --test-nodes 3 y", "spare nodes need --restart rank or job"},
		{"--spares a --spare-nodes 1 -H c --restart rank y", "both --spare-nodes and --spares"},
		{"--spares a --test-nodes 3 --restart rank y", "with --test-nodes use --spare-nodes"},
		{"--spares a --restart rank y", "--spares needs hosts"},
		{"--spares a[ -H b --restart rank y", "--spares"},
	} {
		_, err := parseRunFlags(strings.Fields(tc.args), noEnv)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.msg)
		}
	}
}

func TestLocalNames(t *testing.T) {
	local := localNames(func() (string, error) { return "vm1.example.org", nil })
	for name, want := range map[string]bool{
		"localhost": true, "LOCALHOST": true, "127.0.0.1": true, "127.0.1.1": true, "::1": true,
		"vm1.example.org": true, "vm1": true, "VM1": true, "vm2": false, "node001": false, "10.0.0.1": false,
	} {
		if local(name) != want {
			t.Errorf("local(%q) = %v", name, !want)
		}
	}
	p := &alloc.Placement{Nodes: []alloc.NodePlace{{Name: "n1"}, {Name: "localhost"}}}
	if err := nameThisMachine(p, local, func() (string, error) { return "vm1.example.org", nil }); err != nil || p.Nodes[1].Name != "vm1.example.org" || p.Nodes[0].Name != "n1" {
		t.Errorf("nameThisMachine: %v, %+v", err, p.Nodes)
	}
	p = &alloc.Placement{Nodes: []alloc.NodePlace{{Name: "vm1"}, {Name: "n1"}, {Name: "localhost"}}}
	if err := nameThisMachine(p, local, func() (string, error) { return "vm1.example.org", nil }); err == nil || !strings.Contains(err.Error(), "name it once") {
		t.Errorf("this machine twice: %v", err)
	}
}

// Spare hosts come out of the allocation: the last --spare-nodes hosts,
// or those --spares names.
func TestPlaceSpares(t *testing.T) {
	for _, tc := range []struct {
		args   string
		hosts  []string // the job's hosts
		spares []string
		err    string
	}{
		{args: "-H a,b,c,d --spare-nodes 1 --restart rank x", hosts: []string{"a", "b", "c"}, spares: []string{"d"}},
		{args: "-H a,b,c,d --spare-nodes 2 --restart rank -n 4 x", hosts: []string{"a", "b"}, spares: []string{"c", "d"}},
		{args: "-H a,b,c --spares b,e --restart job x", hosts: []string{"a", "c"}, spares: []string{"b", "e"}},
		{args: "-H a,b --spare-nodes 2 --restart rank x", err: "leaves no host for the job"},
		{args: "-H a,b --spares a,b --restart rank x", err: "none is left for the job"},
		{args: "-H a,b --spares c,c --restart rank x", err: "c named twice"},
	} {
		f, err := parseRunFlags(strings.Fields(tc.args), noEnv)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		p, err := place(f, noEnv)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		var hosts []string
		for _, n := range p.Nodes {
			hosts = append(hosts, n.Name)
		}
		if !slices.Equal(hosts, tc.hosts) || !slices.Equal(f.spares, tc.spares) {
			t.Errorf("%q: hosts %v spares %v, want %v and %v", tc.args, hosts, f.spares, tc.hosts, tc.spares)
		}
	}
}

// --slurm-start auto starts a flat or auto tree of up to groupStartMax
// agents with one srun step, other trees and larger allocations one step
// per agent; only under --launcher slurm (an SSH launch that took itself
// for a group start stopped calibrating its model).
func TestGroupStartChoice(t *testing.T) {
	nodes := func(k int) *alloc.Placement { return &alloc.Placement{Nodes: make([]alloc.NodePlace, k)} }
	for _, tc := range []struct {
		launcher, mode, tree string
		p                    *alloc.Placement
		want                 bool
	}{
		{"slurm", "auto", "auto", nodes(8), true},
		{"slurm", "auto", "flat", nodes(groupStartMax), true},
		{"slurm", "auto", "auto", nodes(groupStartMax + 1), false},
		{"slurm", "auto", "kary:2", nodes(8), false},
		{"slurm", "step", "auto", nodes(8), false},
		{"slurm", "group", "kary:2", nodes(300), true},
		{"ssh", "auto", "auto", nodes(8), false},
		{"local", "group", "auto", nil, false},
	} {
		f := &runFlags{launcher: tc.launcher, slurmMode: tc.mode, tree: tc.tree}
		if got := groupStart(f, tc.p); got != tc.want {
			n := 0
			if tc.p != nil {
				n = len(tc.p.Nodes)
			}
			t.Errorf("--launcher %s --slurm-start %s --tree %s on %d nodes: group start %v, want %v",
				tc.launcher, tc.mode, tc.tree, n, got, tc.want)
		}
	}
}
