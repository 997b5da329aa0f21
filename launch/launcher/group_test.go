package launcher

import (
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/spawn"
)

// stepSession records how a shared step's session was ended.
type stepSession struct {
	mu             sync.Mutex
	closed, killed int
}

func (s *stepSession) Stdout() io.Reader      { return strings.NewReader("") }
func (s *stepSession) Stderr() io.Reader      { return strings.NewReader("") }
func (s *stepSession) Wait() error            { return nil }
func (s *stepSession) Timings() spawn.Timings { return spawn.Timings{} }
func (s *stepSession) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed++
	return nil
}
func (s *stepSession) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killed++
	return nil
}

func (s *stepSession) ends() (closed, killed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed, s.killed
}

// A group start's step ends only once every agent released its share,
// as the strongest release asked: a lost agent's kill ends nothing else
// and makes the step's end a kill (a task on a dead node would keep srun
// waiting for Slurm); agents that all finished leave the step to end by
// itself (srun's SIGTERM would cancel a step that is completing).
func TestGroupShareEndsStepWithLastShare(t *testing.T) {
	for _, tc := range []struct {
		name         string
		first        func(spawn.Session)
		closed, kill int
	}{
		{"every agent finished", Finished, 0, 0},
		{"one agent's session closed", func(s spawn.Session) { _ = s.Close() }, 1, 0},
		{"one agent lost", KillSession, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step := &stepSession{}
			g := newGroupShare(step, 3)
			a, b, c := g.member(), g.member(), g.member()
			tc.first(a)
			_ = a.Close() // twice: one share
			Finished(b)
			if cl, k := step.ends(); cl+k != 0 {
				t.Fatalf("the step ended (closed %d, killed %d) with a share still held", cl, k)
			}
			Finished(c)
			if cl, k := step.ends(); cl != tc.closed || k != tc.kill {
				t.Fatalf("step closed %d, killed %d times; want %d, %d", cl, k, tc.closed, tc.kill)
			}
		})
	}
}
