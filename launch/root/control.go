package root

import (
	"net"
	"os"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// Job control: `ftlaunch cancel` and `ftlaunch kill` reach the root over
// the job's mutual TLS, on its agents' listener, found in the job's state
// directory (proto.PublishControl).

// evControl: a controller's request, read off the event loop.
type evControl struct {
	req   proto.Control
	reply chan<- proto.ControlAck // buffered: the loop never waits on it
}

func (evControl) isRootEvent() {}

// publishControl writes where the root listens (addrs; none: a job
// without a launch tree, reached by its PID) and the controller's
// credentials. Errors are only warned of: the job still runs.
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
// goes to the loop (controlRequest), its answer back.
func (fe *frontend) control(conn net.Conn) {
	fe.goFunc(func() {
		proto.ServeControl(fe.ctx, conn, func(req proto.Control, reply chan<- proto.ControlAck) bool {
			return fe.put(evControl{req: req, reply: reply})
		})
	})
}

// controlRequest carries out a controller's request: the planner decides
// what the user's signal does.
func (fe *frontend) controlRequest(ev evControl) {
	ack := proto.ControlAck{Root: fe.rootNode}
	if sig, err := ev.req.Check(); err != nil {
		ack.Err = err.Error()
	} else {
		fe.step(recovery.Signaled{Signal: sig, From: ev.req.From, Cancel: ev.req.Op == proto.OpCancel})
	}
	ev.reply <- ack
}
