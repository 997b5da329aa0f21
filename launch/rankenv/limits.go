package rankenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Per-rank resources an agent needs besides the rank's own process: its
// sockets and pipes while the rank runs (rank protocol, PMI, stdout,
// stderr; rank 0's stdin too).
const fdsPerRank = 4

// limitSlack is what the agent keeps for itself beyond its ranks' needs:
// threads and descriptors it opens later (links to children, the replica
// group, a successor's).
const limitSlack = 16

// RankRoom tells how many of n ranks the node can start within the
// user's process limit (RLIMIT_NPROC, which counts every thread of the
// user's processes) and the agent's open-file limit (RLIMIT_NOFILE),
// given what is in use already. Starting ranks until fork fails would
// exhaust the limit for everyone, this agent and the front-end included,
// whose Go runtimes cannot then create a thread and crash. It returns n
// and nil when every rank fits (or a limit is not known); otherwise the
// number that fits and why the next one does not.
func RankRoom(n int) (int, error) {
	room, why := n, error(nil)
	var lim unix.Rlimit
	if os.Geteuid() != 0 && unix.Getrlimit(unix.RLIMIT_NPROC, &lim) == nil && lim.Cur != unix.RLIM_INFINITY {
		// (root bypasses the limit)
		if used, err := userTasks(os.Getuid()); err == nil {
			if fit := int(lim.Cur) - used - limitSlack; fit < room {
				room = max(fit, 0)
				why = fmt.Errorf("the user's process limit (RLIMIT_NPROC, ulimit -u) is %d and %d processes and threads of the user run already: room for %d of the node's %d ranks",
					lim.Cur, used, room, n)
			}
		}
	}
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && lim.Cur != unix.RLIM_INFINITY {
		if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
			if fit := (int(lim.Cur) - len(ents) - limitSlack) / fdsPerRank; fit < room {
				room = max(fit, 0)
				why = fmt.Errorf("the agent's open-file limit (RLIMIT_NOFILE, ulimit -n) is %d, %d of them open, and each rank takes %d: room for %d of the node's %d ranks",
					lim.Cur, len(ents), fdsPerRank, room, n)
			}
		}
	}
	return room, why
}

// userTasks counts the processes and threads whose real user is uid, as
// RLIMIT_NPROC counts them (among those this process can see).
func userTasks(uid int) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("count processes: %w", err)
	}
	want := strconv.Itoa(uid)
	n := 0
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue // ended meanwhile
		}
		var real bool
		threads := 0
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				f := strings.Fields(v)
				real = len(f) > 0 && f[0] == want
			} else if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				threads, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if real {
			n += max(threads, 1)
		}
	}
	return n, nil
}

// Shortage explains a rank's start that failed for want of a resource of
// the machine or the user (the limits of rankRoom, memory), after which no
// later rank of the node can start either; it returns "" for other
// failures.
func Shortage(err error) string {
	if err == nil {
		return ""
	}
	what := err // as the operation itself said it, without the rank's name
	if u := errors.Unwrap(err); u != nil {
		what = u
	}
	var lim unix.Rlimit
	switch {
	case errors.Is(err, syscall.EAGAIN):
		if unix.Getrlimit(unix.RLIMIT_NPROC, &lim) == nil && lim.Cur != unix.RLIM_INFINITY {
			return fmt.Sprintf("no more processes: the user's process limit (RLIMIT_NPROC, ulimit -u) of %d, or the system's (kernel.threads-max, kernel.pid_max), is reached (%v)", lim.Cur, what)
		}
		return fmt.Sprintf("no more processes: the system's limit (kernel.threads-max, kernel.pid_max) is reached (%v)", what)
	case errors.Is(err, syscall.ENOMEM):
		return fmt.Sprintf("out of memory (%v)", what)
	case errors.Is(err, syscall.EMFILE):
		if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
			return fmt.Sprintf("the agent's open-file limit (RLIMIT_NOFILE, ulimit -n) of %d is reached (%v)", lim.Cur, what)
		}
		return fmt.Sprintf("the agent's open-file limit (RLIMIT_NOFILE, ulimit -n) is reached (%v)", what)
	case errors.Is(err, syscall.ENFILE):
		return fmt.Sprintf("the system's open-file limit (fs.file-max) is reached (%v)", what)
	}
	return ""
}

// AwaitExit returns once the process pid (a child not yet reaped) has
// ended, without holding a thread meanwhile: its pidfd is polled by the
// runtime's poller. A blocking wait holds one thread per rank, and
// thousands of threads run into the user's process limit (which counts
// threads) long before the ranks do. Where pidfds are not supported it
// returns at once, and the caller's wait blocks as before.
func AwaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		// Readable once the process ended; false: wait for the poller.
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(p, 0)
		return err != nil || n > 0
	})
}
