package agent

import (
	"io"
	"testing"
	"time"
)

// TestStdinWatchJoined: the goroutine watching an agent's stdin is joined
// when the agent ends: a pipe read through Go's poller (as pollableStdin
// makes the session's) by a deadline, a test's io.Pipe by its close, both
// at once; and EOF still says the session ended.
func TestStdinWatchJoined(t *testing.T) {
	for name, src := range silentStdins(t) {
		sw := watchStdin(src)
		began := time.Now()
		sw.stop()
		select {
		case <-sw.done:
		default:
			t.Errorf("%s: the watch was not joined (stop returned after %v)", name, time.Since(began))
		}
		if took := time.Since(began); took >= stdinStopWait {
			t.Errorf("%s: stop took %v: the read was not interrupted", name, took)
		}
	}
	er, ew := io.Pipe()
	sw := watchStdin(er)
	ew.Close() // the session ended
	select {
	case <-sw.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("EOF did not say the session ended")
	}
	sw.stop()
}
