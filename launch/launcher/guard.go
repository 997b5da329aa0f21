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
// died): then SIGTERM to every group, SIGKILL a second later.
const guardScript = `g=; while read -r p; do [ "$p" = end ] && exit 0; g="$g -$p"; done; ` +
	`[ -n "$g" ] || exit 0; kill -s TERM -- $g 2>/dev/null; sleep 1; kill -s KILL -- $g 2>/dev/null; exit 0`

// OrphanGuard is the in-process agent's guard: a /bin/sh process in a
// session of its own (a terminal's signals do not reach it) that outlives
// the front-end. Its methods may be called from any goroutine.
type OrphanGuard struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	w   *os.File // its input (nil once released)
}

// StartGuard starts the guard.
func StartGuard() (*OrphanGuard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("orphan guard: %w", err)
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", guardScript)
	cmd.Stdin, cmd.Env = r, []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("orphan guard: %w", err)
	}
	return &OrphanGuard{cmd: cmd, w: w}, nil
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
	_, _ = w.WriteString("end\n")
	w.Close()
	_ = g.cmd.Wait()
}
