package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/root"
)

// A rank that leaves a process outside its group holding its output
// pipes (a daemon it started) does not leave the agent's pumps of those
// pipes behind: the agent's end interrupts their reads and joins them.
func TestInProcessPumpsJoined(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid:", err)
	}
	pidFile := filepath.Join(t.TempDir(), "daemon.pid")
	t.Cleanup(func() { // the daemon is the test's to end
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	// The rank ends once its daemon, a session of its own, runs.
	script := `setsid sh -c 'echo $$ > "$1.new"; mv "$1.new" "$1"; exec sleep 60' daemon "$0" </dev/null &
while [ ! -e "$0" ]; do sleep 0.01; done`
	j := runInProcess(t, root.Options{N: 1, Argv: []string{"/bin/sh", "-c", script, pidFile}}, nil)
	if j.err != nil || j.res.ExitCode != 0 {
		t.Fatalf("exit %d, %v; stderr %s", j.res.ExitCode, j.err, j.stderr.String())
	}
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatalf("the rank's daemon did not start: %v", err)
	}
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "(*rankProc).pump(") {
			t.Errorf("a pump of the rank's output still runs after the agent returned:\n%s", g)
		}
	}
}
