package agent

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// An agent whose parent connects but never sends the job gives up.
func TestAgentWithoutJobSpecGivesUp(t *testing.T) {
	a, theirs, err := launcher.SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := net.FileConn(theirs)
	theirs.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), b, io.Discard) }()
	a.Write(wire.AppendFrame(nil, proto.MStdin, []byte("not a spec")))
	if err := <-done; err == nil || !strings.Contains(err.Error(), "want a job spec") {
		t.Fatalf("Run: %v", err)
	}
}
