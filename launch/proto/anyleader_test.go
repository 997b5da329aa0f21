package proto

import "testing"

// TestAnyLeader: only output and stdin's credit are handled by a deposed
// front-end; what changes the job's state waits for the lead.
func TestAnyLeader(t *testing.T) {
	for _, c := range []struct {
		typ  uint8
		want bool
	}{
		{MOutput, true}, {MOutputResync, true}, {MStdinAck, true},
		{MExit, false}, {MStarted, false}, {MContrib, false}, {MDone, false}, {MChildGone, false},
	} {
		if got := AnyLeader(c.typ); got != c.want {
			t.Errorf("AnyLeader(%d) = %v, want %v", c.typ, got, c.want)
		}
	}
}
