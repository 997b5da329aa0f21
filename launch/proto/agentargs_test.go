package proto

import (
	"slices"
	"testing"
)

// TestAgentArgs: what the launcher puts on an agent's command line reads
// back the same, the launcher's own argv is not changed, and a bad command
// line is refused with what is wrong.
func TestAgentArgs(t *testing.T) {
	base := []string{"/bin/ftlaunch", "agent", "--connect"}
	for _, a := range []AgentArgs{
		{Node: "node3", Job: "ft-0123", Inc: 2, Connect: true},
		{Node: "node3", Connect: true},
		{Job: "ft-0123", Inc: 1, Connect: true},
		{Connect: true},
	} {
		argv := a.Argv(base)
		got, err := ParseAgentArgs(argv[2:])
		if err != nil || got != a {
			t.Errorf("%+v: argv %q reads back as %+v, %v", a, argv, got, err)
		}
	}
	if got := (AgentArgs{Node: "node3", Job: "ft-1", Inc: 1}).Argv(base); !slices.Equal(got, []string{"/bin/ftlaunch", "agent", "node3", "--job", "ft-1", "--inc", "1", "--connect"}) {
		t.Errorf("Argv = %q", got)
	}
	if !slices.Equal(base, []string{"/bin/ftlaunch", "agent", "--connect"}) {
		t.Errorf("argv changed: %q", base)
	}
	for _, a := range []AgentArgs{{Node: "-x"}, {Job: "-j", Inc: 1}} {
		if got := a.Argv(base); !slices.Equal(got, base) {
			t.Errorf("%+v: Argv = %q, want it unchanged", a, got)
		}
	}
	if got := (AgentArgs{}).Argv(base); !slices.Equal(got, base) {
		t.Errorf("empty: Argv = %q", got)
	}
	for _, bad := range [][]string{
		{"node3", "extra", "--connect"},
		{"--job", "ft-1", "--connect"},
		{"--inc", "1", "--connect"},
		{"--job", "ft-1", "--inc", "0", "--connect"},
		{"--job", "ft-1", "--inc", "x", "--connect"},
		{"--job"},
		{"--job", "ft-1", "--inc", "1"},
		{"--bogus"},
	} {
		if a, err := ParseAgentArgs(bad); err == nil {
			t.Errorf("%q: no error (%+v)", bad, a)
		}
	}
}
