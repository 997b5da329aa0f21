package launcher

import (
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/spawn"
)

// endingSession is a session that ends once end is closed.
type endingSession struct{ end chan struct{} }

func (s endingSession) Stdout() io.Reader          { return nil }
func (s endingSession) Stderr() io.Reader          { return nil }
func (s endingSession) Wait() error                { <-s.end; return nil }
func (s endingSession) Close() error               { return nil }
func (s endingSession) Timings() (t spawn.Timings) { return t }

// TestReapAgentsBoundsALostAgentsSession: a finished agent's session is
// waited for; a lost one's that does not end is given up at the bound.
func TestReapAgentsBoundsALostAgentsSession(t *testing.T) {
	done, hung := endingSession{make(chan struct{})}, endingSession{make(chan struct{})}
	defer close(hung.end)
	close(done.end)
	reaped := make(chan struct{})
	go func() {
		ReapAgents([]AgentEnd{{Finished: true, Sess: done}, {Sess: hung}}, 10*time.Millisecond)
		close(reaped)
	}()
	select {
	case <-reaped:
	case <-time.After(10 * time.Second):
		t.Fatal("a lost agent's session that never ends held the reaping past its bound")
	}
}

// killedSession is a session that ends once it is killed.
type killedSession struct{ endingSession }

func (s killedSession) Kill() error { close(s.end); return nil }

// TestAgentEndKillThenWait: killing an agent started in a session kills
// the session, and waiting for it returns once it ended; an agent with
// neither a process nor a session is nothing to kill or wait for.
func TestAgentEndKillThenWait(t *testing.T) {
	s := killedSession{endingSession{make(chan struct{})}}
	a := AgentEnd{Sess: s}
	a.Kill()
	a.Wait()
	select {
	case <-s.end:
	default:
		t.Fatal("the session was not killed")
	}
	AgentEnd{}.Kill()
	AgentEnd{}.Wait()
}

// TestAgentEndKillWithRanks: a lost agent on this machine is killed with
// its ranks' process groups; the pids of an agent elsewhere are not this
// machine's to kill.
func TestAgentEndKillWithRanks(t *testing.T) {
	start := func() *exec.Cmd {
		c := exec.Command("sleep", "60")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c
	}
	rank, elsewhere := start(), start()
	killed := false
	AgentEnd{Local: &LocalAgent{Kill: func() { killed = true }}}.KillWithRanks([]int{rank.Process.Pid, 0})
	if err := rank.Wait(); !killed || err == nil {
		t.Errorf("agent killed %v; its rank's wait: %v", killed, err)
	}
	s := killedSession{endingSession{make(chan struct{})}}
	AgentEnd{Sess: s}.KillWithRanks([]int{elsewhere.Process.Pid})
	select {
	case <-s.end:
	default:
		t.Error("the remote agent's session was not killed")
	}
	if err := syscall.Kill(elsewhere.Process.Pid, 0); err != nil {
		t.Errorf("a remote agent's pid was killed here: %v", err)
	}
}

// waitedSession is a session that ends once it is killed, and tells when
// a Wait of it returned.
type waitedSession struct {
	killedSession
	waited chan struct{}
}

func (s waitedSession) Wait() error {
	err := s.killedSession.Wait()
	close(s.waited)
	return err
}

// TestReapAgentsJoinsALostAgentsWait: a lost agent's session that has not
// ended at the bound is killed, and the wait ReapAgents began for it has
// returned when ReapAgents does (it left it behind before).
func TestReapAgentsJoinsALostAgentsWait(t *testing.T) {
	s := waitedSession{killedSession{endingSession{make(chan struct{})}}, make(chan struct{})}
	ReapAgents([]AgentEnd{{Sess: s}}, 10*time.Millisecond)
	select {
	case <-s.end:
	default:
		t.Fatal("the lost agent's session was not killed at the bound")
	}
	select {
	case <-s.waited:
	default:
		t.Fatal("ReapAgents returned while its wait for the lost agent's session still ran")
	}
}
