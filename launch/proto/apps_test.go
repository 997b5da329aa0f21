package proto

import (
	"reflect"
	"strings"
	"testing"
)

// An MPMD job's apps, binding and bound CPUs travel in the job spec and
// the started report; each rank finds its program and appnum.
func TestAppsInSpec(t *testing.T) {
	apps := []App{
		{N: 1, Argv: []string{"./a", "x"}, Env: []string{"A=1"}, Wdir: "/a"},
		{N: 3, Argv: []string{"./b"}, Env: []string{"B=2"}, Wdir: "/b"},
	}
	s := &NodeSpec{JobID: "j", Argv: apps[0].Argv, Env: apps[0].Env, Wdir: "/a", Size: 4, Ranks: []int{0, 2}, Apps: apps, Bind: "core", BindShare: true}
	got, err := DecodeNodeSpec(s.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Apps, apps) || got.Bind != "core" || !got.BindShare {
		t.Fatalf("decoded %+v", got)
	}
	for rank, want := range []int{0, 1, 1, 1} {
		app, n := got.App(rank)
		if n != want || got.AppNum(rank) != want || !reflect.DeepEqual(app, apps[want]) {
			t.Errorf("rank %d: app %+v, appnum %d", rank, app, n)
		}
	}
	// One program: the spec's own, appnum 0.
	one := &NodeSpec{Argv: []string{"p"}, Env: []string{"E=1"}, Wdir: "/w", Size: 2}
	if app, n := one.App(1); n != 0 || app.Argv[0] != "p" || app.Wdir != "/w" || app.Env[0] != "E=1" {
		t.Errorf("single program: %+v, %d", app, n)
	}
	// Apps that do not cover the job are refused.
	bad := *s
	bad.Apps = apps[:1]
	if _, err := DecodeNodeSpec(bad.Encode()); err == nil || !strings.Contains(err.Error(), "apps of 1 ranks in a job of 4") {
		t.Errorf("short apps: %v", err)
	}

	st := Started{Ranks: []int{0, 2}, Pids: []int{10, 12}, CPUs: []string{"0", "1"}}
	if got, err := DecodeStarted(st.Encode()); err != nil || !reflect.DeepEqual(got, st) {
		t.Errorf("started: %+v, %v", got, err)
	}
	unbound := Started{Ranks: []int{1}, Pids: []int{11}}
	if got, err := DecodeStarted(unbound.Encode()); err != nil || !reflect.DeepEqual(got, unbound) {
		t.Errorf("unbound started: %+v, %v", got, err)
	}
}
