package launcher

import (
	"io"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/spawn"
)

// pipeSession is a session whose output and end the test controls.
type pipeSession struct {
	out, errOut *io.PipeReader
	ow, ew      *io.PipeWriter
	ended       chan struct{}
}

func newPipeSession() *pipeSession {
	s := &pipeSession{ended: make(chan struct{})}
	s.out, s.ow = io.Pipe()
	s.errOut, s.ew = io.Pipe()
	return s
}

func (s *pipeSession) Stdout() io.Reader      { return s.out }
func (s *pipeSession) Stderr() io.Reader      { return s.errOut }
func (s *pipeSession) Wait() error            { <-s.ended; return nil }
func (s *pipeSession) Close() error           { return nil }
func (s *pipeSession) Timings() spawn.Timings { return spawn.Timings{} }

// end ends the session as a process's exit does: its output closes, then
// its wait returns.
func (s *pipeSession) end() {
	s.ow.Close()
	s.ew.Close()
	close(s.ended)
}

// TestLauncherWaitJoinsSessions: the goroutines watching a launcher's
// sessions (their output, their end) are joined by Wait once the sessions
// ended; a session that does not end holds Wait no longer than its bound.
func TestLauncherWaitJoinsSessions(t *testing.T) {
	l := NewLauncher(nil, nil, 0, nil, 0, nil)
	l.Logf = func(string, ...any) {}
	a, b := newPipeSession(), newPipeSession()
	l.watch(a)
	l.watch(b)
	a.end()
	began := time.Now()
	if l.Wait(100 * time.Millisecond) {
		t.Fatal("Wait joined a session that did not end")
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("Wait took %v past its bound", took)
	}
	b.end()
	if !l.Wait(5 * time.Second) {
		t.Fatal("the watchers of sessions that ended were not joined")
	}
}
