package launcher

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// guardScript is the orphan guard's program: it collects process groups,
// one per line, until "end" (exit) or the end of its input (the front-end
// died): then SIGTERM to every group and to every process whose
// environment names the job ($1: FTLAUNCH_JOBID, as a fence finds them,
// launch/fence), SIGKILL a second later. The second set closes the window
// between a rank's fork and the guard hearing of its group: a front-end
// killed then leaves the rank's children unnamed, not unfound.
const guardScript = `g=; while read -r p; do [ "$p" = end ] && exit 0; g="$g -$p"; done; ` +
	`j=; [ -n "$1" ] && j=$(grep -lzx "FTLAUNCH_JOBID=$1" /proc/[0-9]*/environ 2>/dev/null | sed 's#^/proc/##; s#/environ$##'); ` +
	`[ -n "$g$j" ] || exit 0; kill -s TERM -- $g $j 2>/dev/null; sleep 1; kill -s KILL -- $g $j 2>/dev/null; exit 0`

// guardShell runs the guard's script.
const guardShell = "/bin/sh"

// RankGuard is what an in-process agent tells of its ranks (OrphanGuard).
type RankGuard interface {
	// Ready returns once a rank may be forked: the guard runs, or it
	// cannot (the error says why, and no rank may start).
	Ready() error
	// Add tells the guard of a rank's process group.
	Add(pgid int)
}

// OrphanGuard is the in-process agent's guard: a /bin/sh process in a
// session of its own (a terminal's signals do not reach it) that outlives
// the front-end. Its methods may be called from any goroutine.
//
// It starts in the background: its fork and exec (1-5 ms of a short job on
// the 2-core development machine, where each process start is dear) overlap
// the agent's start instead of preceding it. Ready waits for it; the agent
// asks before it forks its first rank, by which time it has long run.
type OrphanGuard struct {
	cmd     *exec.Cmd
	started chan struct{} // closed once cmd.Start returned
	err     error         // why it did not start; set before started is closed

	mu sync.Mutex
	w  *os.File // its input (nil once released)
}

// StartGuard starts the guard of job jobID ("": groups only): it fails
// at once if there is no /bin/sh to run; the process itself starts in the
// background (Ready).
func StartGuard(jobID string) (*OrphanGuard, error) {
	if err := unix.Access(guardShell, unix.X_OK); err != nil {
		return nil, fmt.Errorf("orphan guard: %s: %w", guardShell, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("orphan guard: %w", err)
	}
	cmd := exec.Command(guardShell, "-c", guardScript, "ftlaunch-guard", jobID)
	cmd.Stdin, cmd.Env = r, []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	g := &OrphanGuard{cmd: cmd, started: make(chan struct{}), w: w}
	go func() { // joined by Ready and Release
		defer close(g.started)
		defer r.Close()
		if err := cmd.Start(); err != nil {
			g.err = fmt.Errorf("orphan guard: %w", err)
		}
	}()
	return g, nil
}

// Ready waits until the guard's start returned, and says whether it runs.
// A rank forked before it runs would have nobody to signal its process
// group if the front-end died meanwhile.
func (g *OrphanGuard) Ready() error {
	<-g.started
	return g.err
}

// InheritedSignalsClean reports whether ranks forked by this process
// would start with no signal ignored (but those the Go runtime sets
// itself) and none blocked: the condition for running the local agent in
// process. It changes nothing.
func InheritedSignalsClean() bool {
	const sigIgn = 1
	for sig := 1; sig <= 64; sig++ {
		if sig == int(syscall.SIGKILL) || sig == int(syscall.SIGSTOP) {
			continue
		}
		var old KernelSigaction
		if _, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e == 0 && old.Handler == sigIgn {
			return false
		}
	}
	// The mask of a thread running Go code is the process's initial one
	// (what a rank forked from it starts with), bar what the runtime
	// unblocked for itself.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var mask, none unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, nil, &mask); err != nil {
		return false
	}
	return mask == none
}

// KernelSigaction is the kernel's struct sigaction on linux/amd64:
// handler, flags, restorer, mask. Only the handler is read, and SIG_DFL
// is set with every other field zero, which reads the same whatever the
// layout of the rest.
type KernelSigaction struct {
	Handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// Add tells the guard of a rank's process group.
func (g *OrphanGuard) Add(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w != nil {
		_, _ = fmt.Fprintf(g.w, "%d\n", pgid)
	}
}

// Release ends the guard without signalling anything, and reaps it.
func (g *OrphanGuard) Release() {
	g.mu.Lock()
	w := g.w
	g.w = nil
	g.mu.Unlock()
	if w == nil {
		return
	}
	<-g.started
	_, _ = w.WriteString("end\n")
	w.Close()
	if g.err == nil {
		_ = g.cmd.Wait()
	}
}
