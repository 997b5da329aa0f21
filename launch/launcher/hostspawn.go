package launcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
)

// HostSpawner returns a spawner for a host list that names this machine
// among others (-H localhost,n1,n2): the agents of the hosts for which
// local is true start as processes here, as Hydra starts this machine's
// proxy without SSH, and the others through remote. The front-end is the
// only one that uses it; agents of the tree start their children over SSH.
func HostSpawner(remote spawn.Spawner, local func(host string) bool) spawn.Spawner {
	return hostSpawner{remote: remote, local: local}
}

type hostSpawner struct {
	remote spawn.Spawner
	local  func(string) bool
}

// Start starts argv on host: here when host is this machine. A local agent
// connects back as one started over SSH does: to the address in
// SSH_CONNECTION, set to this machine's own address (not loopback: the
// other nodes learn it as the agent's, for their standby links).
func (h hostSpawner) Start(ctx context.Context, host string, argv []string, stdin []byte) (spawn.Session, error) {
	if !h.local(host) {
		return h.remote.Start(ctx, host, argv, stdin)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	begin := time.Now()
	self := "127.0.0.1"
	if addrs := proto.OwnAddrs(); len(addrs) > 0 {
		self = addrs[0]
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "SSH_CONNECTION="+self+" 0 "+self+" 0")
	// Its own process group, as an agent started by sshd has its own
	// session: a terminal's signals reach only the front-end.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, out, errOut, err := spawn.StartPiped(cmd)
	if err != nil {
		return nil, fmt.Errorf("start the agent for %s (this machine): %w", host, err)
	}
	s := &localSession{cmd: cmd, stdin: in, stdout: out, stderr: errOut}
	if _, err := in.Write(stdin); err != nil {
		s.Close()
		_ = s.Wait()
		return nil, fmt.Errorf("bootstrap of the agent for %s (this machine): %w", host, err)
	}
	s.t = spawn.Timings{Total: time.Since(begin), Attempts: 1}
	return s, nil
}
