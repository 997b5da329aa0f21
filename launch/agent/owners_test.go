package agent

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
)

// TestEndWithSessionJoined: the watch of the agent's session is the
// agent's (its WaitGroup waits for it): the session's end ends the agent
// before the watch is joined; an agent that outlives the front-end is not
// ended by it, and its watch ends with the agent.
func TestEndWithSessionJoined(t *testing.T) {
	for _, survive := range []bool{false, true} {
		a := &Agent{spec: &proto.NodeSpec{Survive: survive}}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		gone := make(chan struct{})
		a.endWithSession(ctx, &wg, gone, cancel)
		close(gone)
		if survive {
			cancel() // the agent ends by its link's end
		}
		wg.Wait()
		if ctx.Err() == nil {
			t.Errorf("survive %v: the watch was joined before the session's end ended the agent", survive)
		}
		cancel()
	}
}

// closingSession is a session that ends once it is closed (never, if
// hung), and tells when a Wait of it returned.
type closingSession struct {
	end, waited chan struct{}
	hung        bool
	once        sync.Once
}

func (s *closingSession) Stdout() io.Reader      { return nil }
func (s *closingSession) Stderr() io.Reader      { return nil }
func (s *closingSession) Timings() spawn.Timings { return spawn.Timings{} }
func (s *closingSession) Wait() error {
	<-s.end
	close(s.waited)
	return nil
}

func (s *closingSession) Close() error {
	if !s.hung {
		s.once.Do(func() { close(s.end) })
	}
	return nil
}

// TestCloseFinishedJoinsItsWait: a finished child's session still running
// when the agent ends is closed, and the wait closeFinished began for it
// has returned when closeFinished does; one that outlives its close does
// not hold it past its bound.
func TestCloseFinishedJoinsItsWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the agent ends
	s := &closingSession{end: make(chan struct{}), waited: make(chan struct{})}
	closeFinished(ctx, s, time.Minute)
	select {
	case <-s.waited:
	default:
		t.Fatal("closeFinished returned while its wait for the session still ran")
	}
	hung := &closingSession{end: make(chan struct{}), waited: make(chan struct{}), hung: true}
	defer close(hung.end)
	returned := make(chan struct{})
	go func() {
		closeFinished(ctx, hung, 10*time.Millisecond)
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("a session that outlives its close held closeFinished past its bound")
	}
}
