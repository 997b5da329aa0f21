package jobstate

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// The SVG's escaping is encoding/xml's, without that package in the binary.
func TestEscMatchesXML(t *testing.T) {
	for _, s := range []string{"", "a<b>&\"'\t\n\r", "\x00\x01\x1f ok", "\xff\xfe bad", "é\uFFFD\U0001F600", "\uFFFE\uD7FF\uE000"} {
		var b bytes.Buffer
		if err := xml.EscapeText(&b, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if got := esc(s); got != b.String() {
			t.Errorf("%q: %q, want %q", s, got, b.String())
		}
	}
}

// TestSVGRelaunchedAgent: the row of an agent started again keeps its
// first launch's bars, and its relaunch is a tick of its own.
func TestSVGRelaunchedAgent(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	rep := &journal.Report{Job: journal.Job{ID: "ft-svg", Start: t0}, Status: journal.ReportStatus{Done: true, EndMS: 2000}}
	rep.Agents = []journal.AgentTimeline{{Node: "node2", Level: 1, Ranks: 2, Launch: ms(5), SSHUp: ms(8), Up: ms(12), RanksUp: ms(20),
		Relaunched: []time.Time{ms(1500)}, RanksRestarted: []time.Time{ms(1530)}, LastExit: ms(1990)}}
	var b bytes.Buffer
	writeSVG(&b, rep)
	svg := b.String()
	for _, want := range []string{
		"node2 agent start (ssh, srun, process): 5.0 ms to 8.0 ms",
		"node2 connect-back: 8.0 ms to 12.0 ms",
		`class="relaunch"`, "node2: agent launched again at 1.50 s",
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
}
