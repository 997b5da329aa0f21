package proto

import (
	"slices"
	"testing"
)

// TestNodeSpecForNode: a node's spec names it and its ranks, advertises
// the IP its parent saw (an IPv6 one without brackets), none when the
// address it came from has no port (a socket pair's), and leaves the
// template as it was.
func TestNodeSpecForNode(t *testing.T) {
	tmpl := NodeSpec{JobID: "j", Size: 4}
	for _, tc := range []struct{ up, want string }{
		{"10.0.0.7:41000", "10.0.0.7"},
		{"[fd00::7]:41000", "fd00::7"},
		{"", ""},
		{"10.0.0.7", ""},
	} {
		s := tmpl.ForNode("n2", 2, []int{2, 3}, tc.up)
		if s.Node != "n2" || s.NodeID != 2 || !slices.Equal(s.Ranks, []int{2, 3}) || s.JobID != "j" || s.Size != 4 {
			t.Fatalf("ForNode(%q) = %+v", tc.up, s)
		}
		if s.Addr != tc.want {
			t.Errorf("ForNode(%q).Addr = %q, want %q", tc.up, s.Addr, tc.want)
		}
	}
	if tmpl.Node != "" || tmpl.Addr != "" {
		t.Fatalf("the template changed: %+v", tmpl)
	}
}
