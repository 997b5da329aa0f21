package root

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/raftstore"
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

// control takes a control connection: it reads the request off the event
// loop and hands it to the loop, then sends the loop's answer back. Only
// the controller's certificate may ask (an agent's may not).
func (fe *frontend) control(conn net.Conn) {
	fe.goFunc(func() {
		defer conn.Close()
		req, err := proto.ReadControl(conn)
		if err != nil {
			return
		}
		reply := make(chan proto.ControlAck, 1)
		select {
		case fe.events <- evControl{req: req, reply: reply}:
		case <-fe.ctx.Done():
			return
		}
		select {
		case ack := <-reply:
			_ = proto.AnswerControl(conn, ack)
		case <-fe.ctx.Done():
		}
	})
}

// controlRequest carries out a controller's request, in the event loop:
// the planner decides what the user's signal does (recovery/signals.go).
func (fe *frontend) controlRequest(ev evControl) {
	ack := proto.ControlAck{Root: fe.rootNode}
	switch ev.req.Op {
	case proto.OpCancel:
		fe.step(recovery.Signaled{Signal: int(syscall.SIGTERM), From: ev.req.From, Cancel: true})
	case proto.OpSignal:
		if s := ev.req.Signal; s <= 0 || s >= 65 {
			ack.Err = fmt.Sprintf("no signal %d", ev.req.Signal)
			break
		}
		fe.step(recovery.Signaled{Signal: ev.req.Signal, From: ev.req.From})
	default:
		ack.Err = fmt.Sprintf("unknown control request %q", ev.req.Op)
	}
	ev.reply <- ack
}

// controlAddrs are where the front-end takes control connections: its
// agents' listener (none for a job without a launch tree).
func (fe *frontend) controlAddrs() []string {
	if fe.ln == nil {
		return nil
	}
	return proto.ListenAddrs(fe.ln)
}

// successorAddrs are where a successor takes control connections: its
// own agent's listener, as the replicated state records it.
func successorAddrs(st *raftstore.State, node string) []string {
	if ag, ok := st.Agents[node]; ok && ag.Addr != "" {
		return []string{ag.Addr}
	}
	return nil
}
