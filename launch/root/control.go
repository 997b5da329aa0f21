package root

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

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

// controlRequest carries out a controller's request, in the event loop.
func (fe *frontend) controlRequest(ev evControl) {
	ack := proto.ControlAck{Root: fe.rootNode}
	switch ev.req.Op {
	case proto.OpCancel:
		fe.userEnd(syscall.SIGTERM, fmt.Sprintf("job cancelled by %s", ev.req.From))
	case proto.OpSignal:
		s := syscall.Signal(ev.req.Signal)
		if s <= 0 || s >= 65 {
			ack.Err = fmt.Sprintf("no signal %d", ev.req.Signal)
			break
		}
		fe.userSignal(s, ev.req.From)
	default:
		ack.Err = fmt.Sprintf("unknown control request %q", ev.req.Op)
	}
	ev.reply <- ack
}

// userEnd ends the job for the user, as a SIGINT or SIGTERM to the
// front-end does: s to every rank, then SIGTERM, SIGKILL after
// --kill-after; asked again, every rank is killed at once. The job's exit
// code is 128+s; its ranks' ends are not failures, and nothing restarts.
func (fe *frontend) userEnd(s syscall.Signal, why string) {
	switch {
	case !fe.shutdownAt.IsZero():
		return // every rank ended already: the job's end stands
	case fe.terminating:
		fe.warnf("%s again: killing every rank", why)
		fe.bcast(proto.MKill, nil)
		return
	}
	fe.bcast(proto.MSignal, proto.EncodeInt(int64(s)))
	fe.endedByUser(s, fmt.Sprintf("%s: ending the job (%s)", why, endingSteps(s, fe.opts.KillAfter)))
}

// endingSteps says how a job ends after the user's signal s: s to every
// rank, then SIGTERM (unless s was SIGTERM), SIGKILL after killAfter.
func endingSteps(s syscall.Signal, killAfter time.Duration) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL to every rank"
	case syscall.SIGTERM:
		return fmt.Sprintf("SIGTERM to every rank, SIGKILL after %v", killAfter)
	}
	return fmt.Sprintf("%s to every rank, then SIGTERM, SIGKILL after %v", unix.SignalName(s), killAfter)
}

// endedByUser has the planner end the job as the user's signal s.
func (fe *frontend) endedByUser(s syscall.Signal, msg string) {
	fe.endSignal = s
	fe.step(recovery.Signaled{Signal: int(s), Msg: msg})
}

// userSignal sends the user's signal s (ftlaunch kill) to every rank.
// SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGKILL end the job as the user's;
// another signal is only delivered, and a rank it kills was ended by the
// user (rankEndedByUser).
func (fe *frontend) userSignal(s syscall.Signal, from string) {
	switch s {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGKILL:
		fe.userEnd(s, fmt.Sprintf("%s from %s", unix.SignalName(s), from))
		return
	}
	if fe.userSignals == nil {
		fe.userSignals = map[int]bool{}
	}
	fe.userSignals[int(s)] = true
	fe.verbosef("%s from %s: forwarding it to every rank", unix.SignalName(s), from)
	fe.bcast(proto.MSignal, proto.EncodeInt(int64(s)))
}

// rankEndedByUser: a rank that died of a signal the user sent with
// ftlaunch kill was ended by the user: the job ends as the user's signal,
// before the rank's end reaches the planner (which then takes it as part
// of the end, not as a failure to recover).
func (fe *frontend) rankEndedByUser(st proto.RankStatus) {
	if st.Signal == 0 || !fe.userSignals[st.Signal] || fe.status().Ending() {
		return
	}
	s := syscall.Signal(st.Signal)
	fe.endedByUser(s, fmt.Sprintf("rank %d was ended by the user's %s: ending the job", st.Rank, unix.SignalName(s)))
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
