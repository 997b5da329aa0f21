package launcher

import (
	"slices"
	"testing"
)

// TestNamedArgv: an agent's command line names its node after "agent",
// and the launcher's own argv is left as it was.
func TestNamedArgv(t *testing.T) {
	argv := []string{"/bin/ftlaunch", "agent", "--connect"}
	if got := namedArgv(argv, "node3"); !slices.Equal(got, []string{"/bin/ftlaunch", "agent", "node3", "--connect"}) {
		t.Errorf("namedArgv = %q", got)
	}
	if !slices.Equal(argv, []string{"/bin/ftlaunch", "agent", "--connect"}) {
		t.Errorf("argv changed: %q", argv)
	}
	for _, node := range []string{"", "-x"} {
		if got := namedArgv(argv, node); !slices.Equal(got, argv) {
			t.Errorf("namedArgv(%q) = %q", node, got)
		}
	}
}
