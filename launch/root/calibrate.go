package root

import (
	"cmp"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/calibrate"
)

// calibrate measures this launch from every launcher's starts and keeps
// the result; failures to keep it are reported, not fatal. REM is the
// fastest start of all; SEQ the mean of each launcher's, weighted by its
// gaps.
func (fe *frontend) calibrate() {
	groups := map[int][]*agentHandle{}
	for _, a := range fe.agents {
		p := fe.topo.Parent(a.idx)
		groups[p] = append(groups[p], a)
	}
	var total calibrate.Calibration
	gaps := 0
	for _, g := range groups {
		var up, queued []time.Duration
		for _, a := range g {
			up = append(up, a.info.Up)
			queued = append(queued, a.info.Queued)
		}
		c, ok := calibrate.Measure(up, queued)
		if !ok {
			continue
		}
		if total.Agents == 0 || c.Rem < total.Rem {
			total.Rem = c.Rem
		}
		total.Seq += c.Seq * float64(len(g)-1)
		gaps += len(g) - 1
		total.Agents += len(g)
		total.Measured = c.Measured
	}
	if total.Agents == 0 {
		return
	}
	if gaps > 0 {
		total.Seq /= float64(gaps)
	}
	p, err := calibrate.SaveCalibration(fe.opts.Launcher, total)
	if err != nil {
		fe.warnf("%v", err)
		return
	}
	fe.verbosef("calibration: REM %.3f s, SEQ %.3f s from %d agents (kept in %s; ftlaunch plan --calibrated --launcher %s shows it)", total.Rem, total.Seq, total.Agents, p, cmp.Or(fe.opts.Launcher, "ssh"))
}
