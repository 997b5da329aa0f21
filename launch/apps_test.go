package launch

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
	s := &nodeSpec{JobID: "j", Argv: apps[0].Argv, Env: apps[0].Env, Wdir: "/a", Size: 4, Ranks: []int{0, 2}, Apps: apps, Bind: "core", BindShare: true}
	got, err := decodeNodeSpec(s.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Apps, apps) || got.Bind != "core" || !got.BindShare {
		t.Fatalf("decoded %+v", got)
	}
	for rank, want := range []int{0, 1, 1, 1} {
		app, n := got.app(rank)
		if n != want || got.appNum(rank) != want || !reflect.DeepEqual(app, apps[want]) {
			t.Errorf("rank %d: app %+v, appnum %d", rank, app, n)
		}
	}
	// One program: the spec's own, appnum 0.
	one := &nodeSpec{Argv: []string{"p"}, Env: []string{"E=1"}, Wdir: "/w", Size: 2}
	if app, n := one.app(1); n != 0 || app.Argv[0] != "p" || app.Wdir != "/w" || app.Env[0] != "E=1" {
		t.Errorf("single program: %+v, %d", app, n)
	}
	// Apps that do not cover the job are refused.
	bad := *s
	bad.Apps = apps[:1]
	if _, err := decodeNodeSpec(bad.encode()); err == nil || !strings.Contains(err.Error(), "apps of 1 ranks in a job of 4") {
		t.Errorf("short apps: %v", err)
	}

	st := started{Ranks: []int{0, 2}, Pids: []int{10, 12}, CPUs: []string{"0", "1"}}
	if got, err := decodeStarted(st.encode()); err != nil || !reflect.DeepEqual(got, st) {
		t.Errorf("started: %+v, %v", got, err)
	}
	unbound := started{Ranks: []int{1}, Pids: []int{11}}
	if got, err := decodeStarted(unbound.encode()); err != nil || !reflect.DeepEqual(got, unbound) {
		t.Errorf("unbound started: %+v, %v", got, err)
	}
}
