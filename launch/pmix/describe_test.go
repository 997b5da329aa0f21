package pmix

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestDescribe(t *testing.T) {
	// Ranks 0, 1, 4 on node 0 and 2, 3 on node 1; app 0 is ranks 0-1,
	// app 1 ranks 2-4.
	job := Job{Nspace: "ns", NodeID: 1, NodeOf: []int{0, 0, 1, 1, 0}, NodeNames: []string{"a", "b"}, AppOf: []int{0, 0, 1, 1, 1}}
	top, procs, local, err := describe(job, "/d")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]keyValue{}
	for _, kv := range top {
		got[kv.key] = kv
	}
	for key, want := range map[string]keyValue{
		keyJobSize:     {kind: kindU32, n: 5},
		keyNumNodes:    {kind: kindU32, n: 2},
		keyNumApps:     {kind: kindU32, n: 2},
		keyNodeMap:     {kind: kindString, s: "a,b"},
		keyProcMap:     {kind: kindString, s: "0,1,4;2,3"},
		keyLocalPeers:  {kind: kindString, s: "2,3"},
		keyLocalSize:   {kind: kindU32, n: 2},
		keyLocalLeader: {kind: kindRank, n: 2},
	} {
		want.key = key
		if got[key] != want {
			t.Errorf("%s: %+v, want %+v", key, got[key], want)
		}
	}
	if len(local) != 2 || local[0] != 2 || local[1] != 3 {
		t.Errorf("local ranks %v, want [2 3]", local)
	}
	// Rank 4: app 1's third rank (app rank 2, its leader rank 2), node 0's
	// third (local rank 2).
	want := map[string]int{keyRank: 4, keyAppNum: 1, keyAppLeader: 2, keyAppRank: 2, keyLocalRank: 2, keyNodeRank: 2, keyNodeID: 0}
	for _, kv := range procs[4] {
		if w, ok := want[kv.key]; ok && kv.n != w {
			t.Errorf("rank 4 %s = %d, want %d", kv.key, kv.n, w)
		}
		if kv.key == keyHostname && kv.s != "a" {
			t.Errorf("rank 4 host %q, want a", kv.s)
		}
	}
	if procs[4][0].key != keyRank {
		t.Errorf("a process's data must start with its rank, starts with %s", procs[4][0].key)
	}
	for _, bad := range []Job{
		{Nspace: "ns", NodeID: 2, NodeOf: []int{0}, NodeNames: []string{"a"}},
		{Nspace: "ns", NodeID: 0, NodeOf: []int{1}, NodeNames: []string{"a"}},
		{Nspace: "ns", NodeID: 1, NodeOf: []int{0}, NodeNames: []string{"a", "b"}},
		{Nspace: "ns", NodeID: 0, NodeOf: []int{0}, NodeNames: []string{"a"}, AppOf: []int{0, 1}},
	} {
		if _, _, _, err := describe(bad, "/d"); err == nil {
			t.Errorf("describe(%+v) accepted", bad)
		}
	}
}

func TestUses(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{script: true, truePath: false}
	if p, err := exec.LookPath("NPopenmpi"); err == nil {
		cases[p] = true // linked with Open MPI's libmpi.so.40
	}
	if p, err := exec.LookPath("NPmpich"); err == nil {
		cases[p] = false
	}
	for path, want := range cases {
		if got := Uses(path); got != want {
			t.Errorf("Uses(%s) = %v, want %v", path, got, want)
		}
	}
}
