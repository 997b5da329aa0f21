package jobstate

// The launch timeline of a job as SVG (ftlaunch inspect --svg).

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// The timeline's geometry, in SVG user units (pixels).
const (
	svgLabelW = 180
	svgChartW = 820
	svgRowH   = 22
	svgTop    = 56
	svgBarH   = 12
)

// svgSegment is one bar of a row.
type svgSegment struct {
	name, color string
}

// svgSegments returns the bars of a row, in order; the colours are
// ColorBrewer's Set2.
func svgSegments() [5]svgSegment {
	return [5]svgSegment{
		{"agent start (ssh, srun, process)", "#8da0cb"},
		{"connect-back", "#66c2a5"},
		{"rank start", "#fc8d62"},
		{"wait for node table", "#e5c494"},
		{"run", "#d9d9d9"},
	}
}

// WriteSVGFile draws the job's launch timeline (its agents' phases,
// failures and recoveries) as SVG into path ("-": w).
func WriteSVGFile(path string, w io.Writer, rep *journal.Report) error {
	var buf bytes.Buffer
	writeSVG(&buf, rep)
	if path == "-" {
		_, err := w.Write(buf.Bytes())
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write the timeline: %w", err)
	}
	return nil
}

// writeSVG draws one row per agent, ordered by tree level: bars for its
// SSH session, its connection back, its ranks' start, the wait for the
// node table and the run; markers for failures (red), recovery steps
// (orange) and leader changes (purple). Marks that concern no agent are
// vertical lines across every row. Below the agents, a row per failure
// shows the phases of its recovery (svgRecovery).
func writeSVG(w *bytes.Buffer, rep *journal.Report) {
	start := rep.Job.Start
	at := func(t time.Time) float64 {
		if t.IsZero() || start.IsZero() {
			return math.NaN()
		}
		return float64(t.Sub(start).Microseconds()) / 1000
	}
	var tableMS = math.NaN()
	end := rep.Status.EndMS
	for _, ev := range rep.Events {
		if ev.Step == journal.StepTable {
			tableMS = ev.AtMS
		}
		end = math.Max(end, ev.AtMS)
	}
	if end <= 0 {
		end = 1
	}
	x := func(ms float64) float64 { return svgLabelW + math.Max(0, ms)/end*svgChartW }
	// A row per failure of a rank or node, below the agents' rows.
	var recs []*journal.Recovery
	for i := range rep.Recoveries {
		if r := &rep.Recoveries[i]; r.Rank >= 0 || r.Node != "" {
			recs = append(recs, r)
		}
	}
	rows := len(rep.Agents) + len(recs)
	segs := svgSegments()
	height := svgTop + rows*svgRowH + 56
	if len(recs) > 0 {
		height += 18 // the phases' legend
	}
	width := svgLabelW + svgChartW + 20
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	title := fmt.Sprintf("job %s: %d rank(s) on %d node(s)", rep.Job.ID, rep.Job.N, len(rep.Agents))
	if len(rep.Recoveries) > 0 {
		title += fmt.Sprintf(", %d failure(s)", len(rep.Recoveries))
	}
	if rep.Status.Done {
		title += fmt.Sprintf(", exit code %d after %.3f s", rep.Status.ExitCode, rep.Status.EndMS/1000)
	}
	fmt.Fprintf(w, `<text x="8" y="18" font-size="13" font-weight="bold">%s</text>`+"\n", esc(title))

	// Time axis.
	step := niceStep(end / 8)
	fmt.Fprintf(w, `<g class="axis" stroke="#bbb">`+"\n")
	for t := 0.0; t <= end+step/1000; t += step {
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`+"\n", x(t), svgTop-6, x(t), svgTop+rows*svgRowH)
	}
	fmt.Fprintf(w, "</g>\n")
	for t := 0.0; t <= end+step/1000; t += step {
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", x(t), svgTop-10, fmtMS(t))
	}

	for i, a := range rep.Agents {
		y := svgTop + i*svgRowH
		fmt.Fprintf(w, `<g class="row" data-node="%s" data-level="%d">`+"\n", esc(a.Node), a.Level)
		if i%2 == 1 {
			fmt.Fprintf(w, `<rect x="0" y="%d" width="%d" height="%d" fill="#f6f6f6"/>`+"\n", y, width, svgRowH)
		}
		fmt.Fprintf(w, `<text x="%d" y="%d">%s</text>`+"\n", 8+10*min(a.Level-1, 6), y+15, esc(fmt.Sprintf("%s (L%d, %d ranks)", a.Node, a.Level, a.Ranks)))
		launch, sshUp, up, ranksUp, last := at(a.Launch), at(a.SSHUp), at(a.Up), at(a.RanksUp), at(a.LastExit)
		connectFrom := sshUp
		if math.IsNaN(connectFrom) {
			connectFrom = launch
		}
		runEnd := rep.Status.EndMS
		if !math.IsNaN(last) {
			runEnd = last
		}
		runFrom := tableMS
		if math.IsNaN(runFrom) {
			runFrom = ranksUp
		}
		bars := [len(segs)][2]float64{
			{launch, sshUp}, {connectFrom, up}, {up, ranksUp}, {ranksUp, tableMS}, {runFrom, runEnd},
		}
		for k, b := range bars {
			if math.IsNaN(b[0]) || math.IsNaN(b[1]) || b[1] < b[0] {
				continue
			}
			width := math.Max(x(b[1])-x(b[0]), 1)
			fmt.Fprintf(w, `<rect class="bar" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
				x(b[0]), y+(svgRowH-svgBarH)/2, width, svgBarH, segs[k].color,
				esc(fmt.Sprintf("%s %s: %s to %s (%.1f ms)", a.Node, segs[k].name, fmtMS(b[0]), fmtMS(b[1]), b[1]-b[0])))
		}
		for _, t := range a.Relaunched {
			// A later agent incarnation's launch: a tick on the row.
			fmt.Fprintf(w, `<line class="relaunch" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"><title>%s</title></line>`+"\n",
				x(at(t)), y+2, x(at(t)), y+svgRowH-2, stageColor("relaunch"), esc(fmt.Sprintf("%s: agent launched again at %s", a.Node, fmtMS(at(t)))))
		}
		for _, t := range a.RanksRestarted {
			// Ranks started again by a recovery: a tick on the run.
			fmt.Fprintf(w, `<line class="restart" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"><title>%s</title></line>`+"\n",
				x(at(t)), y+2, x(at(t)), y+svgRowH-2, stageColor("respawn"), esc(fmt.Sprintf("%s: rank(s) started again at %s", a.Node, fmtMS(at(t)))))
		}
		for _, m := range a.Marks {
			svgMarker(w, x(m.AtMS), float64(y+svgRowH/2), m)
		}
		fmt.Fprintf(w, "</g>\n")
	}
	for i, r := range recs {
		svgRecovery(w, rep, r, svgTop+(len(rep.Agents)+i)*svgRowH, width, len(rep.Agents)+i, x, end)
	}
	for _, m := range rep.Marks {
		if m.Kind == "recovery" && len(recs) > 0 {
			continue // on the failures' rows
		}
		fmt.Fprintf(w, `<g class="mark"><line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-dasharray="4 3"/><title>%s</title></g>`+"\n",
			x(m.AtMS), svgTop-4, x(m.AtMS), svgTop+rows*svgRowH, markColor(m.Kind), esc(fmt.Sprintf("%s at %s: %s", m.Kind, fmtMS(m.AtMS), m.Detail)))
	}

	// Legend.
	ly := svgTop + rows*svgRowH + 24
	lx := 8
	for _, s := range segs {
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="14" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly, s.color, lx+18, ly+9, esc(s.name))
		lx += 30 + 7*len(s.name)
	}
	for _, k := range []string{"failure", "recovery", "leader"} {
		fmt.Fprintf(w, `<circle cx="%d" cy="%d" r="5" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx+5, ly+5, markColor(k), lx+14, ly+9, k)
		lx += 30 + 7*len(k)
	}
	if len(recs) > 0 {
		ly += 18
		lx = 8
		for _, st := range []string{"suspend", "respawn", "patch", "resume", "restart-job", "resumed"} {
			fmt.Fprintf(w, `<rect x="%d" y="%d" width="14" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly, stageColor(st), lx+18, ly+9, esc(st))
			lx += 30 + 7*len(st)
		}
	}
	fmt.Fprintf(w, "</svg>\n")
}

// svgRecovery draws a failure's row: a line from the failure to the
// recovery's end (or the job's), the failure (a cross), a bar per phase of
// the restart protocol until the next, and the end ("resumed",
// "restarted": a circle).
func svgRecovery(w *bytes.Buffer, rep *journal.Report, r *journal.Recovery, y, width, i int, x func(float64) float64, end float64) {
	who := fmt.Sprintf("rank %d", r.Rank) // what failed, in every title
	switch {
	case r.Rank < 0 && r.Node == "":
		who = "the job"
	case r.Rank < 0:
		who = "node " + r.Node
	}
	label := who
	switch {
	case r.Rank < 0:
	case r.NewIncarnation > 0:
		label += fmt.Sprintf(" (inc %d→%d)", r.Incarnation, r.NewIncarnation)
	default:
		label += fmt.Sprintf(" (inc %d)", r.Incarnation)
	}
	fmt.Fprintf(w, `<g class="recovery" data-rank="%d" data-outcome="%s">`+"\n", r.Rank, esc(r.Outcome))
	if i%2 == 1 {
		fmt.Fprintf(w, `<rect x="0" y="%d" width="%d" height="%d" fill="#f6f6f6"/>`+"\n", y, width, svgRowH)
	}
	fmt.Fprintf(w, `<text x="8" y="%d" fill="%s">%s</text>`+"\n", y+15, markColor("failure"), esc(label))
	cy := float64(y + svgRowH/2)
	stop := end
	switch {
	case r.Over():
		stop = r.EndMS
	case rep.Status.Done:
		stop = rep.Status.EndMS
	}
	fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/>`+"\n", x(r.Failure.AtMS), cy, x(stop), cy)
	for k, p := range r.Phases {
		if p.Stage == "resumed" || p.Stage == "restarted" {
			continue
		}
		to := p.AtMS + p.DurationMS
		if k+1 < len(r.Phases) {
			to = r.Phases[k+1].AtMS
		} else if p.Open {
			to = stop
		}
		fmt.Fprintf(w, `<rect class="phase" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
			x(p.AtMS), y+(svgRowH-svgBarH)/2, math.Max(x(to)-x(p.AtMS), 1), svgBarH, stageColor(p.Stage),
			esc(fmt.Sprintf("%s: %s (epoch %d) at %s, +%.1f ms after the failure, for %.1f ms", who, p.Stage, p.Epoch, fmtMS(p.AtMS), p.OffsetMS, to-p.AtMS)))
	}
	svgMarker(w, x(r.Failure.AtMS), cy, journal.Mark{AtMS: r.Failure.AtMS, Kind: "failure", Rank: r.Rank, Detail: r.Failure.Detail})
	// What became of it, in words beside the row's end (a recovery is
	// short beside a job).
	note := r.Outcome
	if r.Over() {
		fmt.Fprintf(w, `<circle class="end" cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s</title></circle>`+"\n", x(r.EndMS), cy, stageColor("resumed"),
			esc(fmt.Sprintf("%s %s at %s, %.1f ms after the failure", who, r.Outcome, fmtMS(r.EndMS), r.TotalMS)))
		note = fmt.Sprintf("%s after %s", r.Outcome, fmtMS(r.TotalMS))
	} else if p := r.Stage(); p != nil {
		note += " (at " + p.Stage + ")"
	}
	nx, anchor := x(stop)+8, "start"
	if nx > float64(svgLabelW+svgChartW)-120 {
		nx, anchor = x(r.Failure.AtMS)-8, "end"
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="%s" fill="#555">%s</text>`+"\n", nx, y+15, anchor, esc(note))
	fmt.Fprintf(w, "</g>\n")
}

// stageColor colours a recovery phase.
func stageColor(stage string) string {
	switch stage {
	case "suspend":
		return "#fdb462"
	case "respawn":
		return "#fb8072"
	case "patch":
		return "#80b1d3"
	case "resume":
		return "#b3de69"
	case "restart-job":
		return "#bc80bd"
	case "resumed", "restarted":
		return "#2ca02c"
	}
	return "#cccccc"
}

func svgMarker(w *bytes.Buffer, cx, cy float64, m journal.Mark) {
	tip := esc(fmt.Sprintf("%s at %s: %s", m.Kind, fmtMS(m.AtMS), m.Detail))
	switch m.Kind {
	case "failure":
		fmt.Fprintf(w, `<path class="marker" d="M%.1f %.1fl10 10m0 -10l-10 10" stroke="%s" stroke-width="3"><title>%s</title></path>`+"\n", cx-5, cy-5, markColor(m.Kind), tip)
	default:
		fmt.Fprintf(w, `<circle class="marker" cx="%.1f" cy="%.1f" r="5" fill="%s"><title>%s</title></circle>`+"\n", cx, cy, markColor(m.Kind), tip)
	}
}

func markColor(kind string) string {
	switch kind {
	case "failure":
		return "#d62728"
	case "leader":
		return "#9467bd"
	}
	return "#ff7f0e" // recovery, recovered
}

// niceStep rounds d up to 1, 2 or 5 times a power of ten.
func niceStep(d float64) float64 {
	if d <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(d)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= d {
			return m * p
		}
	}
	return 10 * p
}

func fmtMS(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%.2f s", ms/1000)
	}
	return fmt.Sprintf("%.1f ms", ms)
}

// esc escapes s for XML text and attributes as encoding/xml's EscapeText
// does (that package's initialization alone cost every ftlaunch process's
// start 0.4 ms): markup characters and white space other than a space as
// character references, what XML cannot hold as U+FFFD.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString("&#34;")
		case r == '\'':
			b.WriteString("&#39;")
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '\t':
			b.WriteString("&#x9;")
		case r == '\n':
			b.WriteString("&#xA;")
		case r == '\r':
			b.WriteString("&#xD;")
		case r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF:
			b.WriteRune(r)
		default:
			b.WriteRune('\uFFFD')
		}
	}
	return b.String()
}
