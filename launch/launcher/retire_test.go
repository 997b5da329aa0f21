package launcher

import (
	"net"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// TestRetireKillsALostSession: a lost incarnation's session is killed when
// it is retired, and nothing is left to reap on a goroutine; a local
// agent's process is reaped on one.
func TestRetireKillsALostSession(t *testing.T) {
	s := killedSession{endingSession{make(chan struct{})}}
	goes := 0
	AgentEnd{Sess: s}.Retire(func(func()) { goes++ })
	select {
	case <-s.end:
	default:
		t.Fatal("the session was not killed")
	}
	if goes != 0 {
		t.Fatalf("%d goroutine(s) started for a session", goes)
	}
	AgentEnd{}.Retire(func(func()) { t.Fatal("a goroutine for nothing") })
	AgentEnd{Local: &LocalAgent{}}.Retire(func(func()) { goes++ })
	if goes != 1 {
		t.Fatalf("%d goroutine(s) started to reap a local agent, want 1", goes)
	}
}

// TestDiscardEndsLinkAndSession: a start nobody takes has its link closed
// (its peer reads the end) and its session killed.
func TestDiscardEndsLinkAndSession(t *testing.T) {
	ours, theirs := net.Pipe()
	defer theirs.Close()
	s := killedSession{endingSession{make(chan struct{})}}
	LaunchResult{Link: proto.NewLink(ours), Sess: s}.Discard()
	if _, err := theirs.Read(make([]byte, 1)); err == nil {
		t.Fatal("the link was not closed")
	}
	select {
	case <-s.end:
	default:
		t.Fatal("the session was not killed")
	}
	LaunchResult{}.Discard()
}
