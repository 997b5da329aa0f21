package launcher

import (
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/ftlaunch/ftlaunch/launch/spawn"
)

// SocketPair returns a connected pair of Unix stream sockets: ours as a
// net.Conn, the other end as a file for a child process.
func SocketPair() (net.Conn, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "socketpair")
	theirs := os.NewFile(uintptr(fds[1]), "socketpair-child")
	conn, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		theirs.Close()
		return nil, nil, err
	}
	return conn, theirs, nil
}

// KillSession ends a session at once where the mechanism allows (srun:
// SIGKILL to srun), else closes it. An SSH session is closed: its Kill asks
// the server, which on a dead connection waits for TCP's timeout.
func KillSession(s spawn.Session) {
	if k, ok := s.(interface{ Kill() error }); ok && !isSSH(s) {
		_ = k.Kill()
		return
	}
	_ = s.Close()
}

// isSSH reports an SSH session: its Kill asks the server, which on a dead
// connection waits for TCP's timeout.
func isSSH(s spawn.Session) bool {
	_, ok := s.(sshSession)
	return ok
}
