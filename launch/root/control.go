package root

import (
	"net"
	"os"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// Job control: `ftlaunch cancel` and `ftlaunch kill` (launch/jobctl) reach
// the root over the job's own mutual TLS, on the listener its agents
// connect to (the front-end's; a successor's agent's). The root publishes
// where it listens, and the controller's credentials, in the job's state
// directory (proto.ControlFile, proto.ControlKey).

// evControl: a controller's request, read off the event loop.
type evControl struct {
	req   proto.Control
	reply chan<- proto.ControlAck // buffered: the loop never waits on it
}

func (evControl) isRootEvent() {}

// publishControl writes where the root listens (addrs; none: a job
// without a launch tree, reached by the front-end's PID) and, once per
// job, the controller's credentials (proto.PublishControl). Errors are
// only warned of: a job that cannot be controlled still runs.
func (fe *frontend) publishControl(name string, addrs []string) {
	if fe.journal == nil || fe.journal.Dir() == "" {
		return
	}
	host, _ := os.Hostname()
	ci := proto.ControlInfo{Job: fe.jobID, Root: fe.rootNode, Name: name, Addrs: addrs, Host: host, PID: os.Getpid(), Updated: time.Now()}
	if err := proto.PublishControl(fe.journal.Dir(), fe.ca, ci); err != nil {
		fe.warnf("job control: %v (ftlaunch cancel will not reach this job)", err)
	}
}

// control serves a control connection (proto.ServeControl): the request
// goes to the loop (controlRequest), its answer back. Only the
// controller's certificate may ask (an agent's may not).
func (fe *frontend) control(conn net.Conn) {
	fe.goFunc(func() {
		proto.ServeControl(fe.ctx, conn, func(req proto.Control, reply chan<- proto.ControlAck) bool {
			return fe.put(evControl{req: req, reply: reply})
		})
	})
}

// controlRequest carries out a controller's request, in the event loop:
// the planner decides what the user's signal does (recovery/signals.go).
func (fe *frontend) controlRequest(ev evControl) {
	ack := proto.ControlAck{Root: fe.rootNode}
	if sig, err := ev.req.Check(); err != nil {
		ack.Err = err.Error()
	} else {
		fe.step(recovery.Signaled{Signal: sig, From: ev.req.From, Cancel: ev.req.Op == proto.OpCancel})
	}
	ev.reply <- ack
}
