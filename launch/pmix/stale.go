package pmix

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Directories a server leaves when its process is killed (SIGKILL: a
// fault, a fence) have no Close to remove them. Each is named after its
// process (dirPrefix, the pid, "-", MkdirTemp's suffix), so the next
// server started on the host removes those of processes that no longer
// exist: the agent that replaces a fenced one sweeps what its predecessor
// left. A directory whose process lives is kept (a reused pid keeps a dead
// one's directory until that process ends too: never a live one removed);
// other users' directories and names of another shape are left alone.

// dirPrefix starts the name of every directory a server makes.
const dirPrefix = "ftlaunch-pmix-"

// ownPrefix is the prefix of this process's directories.
func ownPrefix() string { return dirPrefix + strconv.Itoa(os.Getpid()) + "-" }

// stalePID returns the pid a directory named name was made by, if name has
// the shape ownPrefix gives.
func stalePID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, dirPrefix)
	if !ok {
		return 0, false
	}
	pid, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// alive reports whether process pid exists (EPERM: it does, another
// user's).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// sweepStale removes parent's server directories of this user whose
// process no longer exists, and returns how many it removed.
func sweepStale(parent string) (int, error) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return 0, fmt.Errorf("pmix: sweep %s: %w", parent, err)
	}
	uid, n := os.Getuid(), 0
	for _, e := range ents {
		pid, ok := stalePID(e.Name())
		if !ok || !e.IsDir() || alive(pid) {
			continue
		}
		p := filepath.Join(parent, e.Name())
		if st, err := os.Lstat(p); err != nil || !owned(st, uid) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return n, fmt.Errorf("pmix: remove %s, left by process %d: %w", p, pid, err)
		}
		n++
	}
	return n, nil
}

// owned reports whether st is uid's.
func owned(st fs.FileInfo, uid int) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(s.Uid) == uid
}
