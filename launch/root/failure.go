package root

// Failures: the root feeds the recovery planner what it learns and carries
// out the planner's decisions; the user's signals.

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// rankEnded records a rank's end; the planner decides what a failure
// does to the job.
func (fe *frontend) rankEnded(st proto.RankStatus) {
	fe.rankEndedByUser(st)
	rs := &fe.ranks[st.Rank]
	rs.status = st
	fe.journal.RankExited(journal.RankExit{Rank: st.Rank, Code: st.Code, Signal: st.Signal, Reason: st.Reason})
	// A rank killed by the termination ftlaunch started is not a failure
	// of its own; one that exits with an error code meanwhile is.
	rs.byFrontend = fe.status().Ending() && (st.Signal == int(syscall.SIGTERM) || st.Signal == int(syscall.SIGKILL) ||
		fe.endSignal != 0 && st.Signal == int(fe.endSignal)) || st.Skipped
	ev := exitEvent(st, fe.nodeOf(st.Rank))
	if !ev.Clean() && fe.status().Phase == recovery.Running {
		fe.failedAt = time.Now()
	}
	// The planner counts the end in its ledger (recovery/ledger.go), and
	// counts the rank as running again if it starts it again.
	fe.step(ev)
	if ev.Clean() {
		fe.checkStranded()
	}
}

// exitEvent is a rank's end as the planner takes it.
func exitEvent(st proto.RankStatus, node string) recovery.RankExited {
	return recovery.RankExited{Rank: st.Rank, Incarnation: st.Incarnation, Node: node, Code: st.Code, Signal: st.Signal, Reason: st.Reason}
}

func describe(st proto.RankStatus) string { return exitEvent(st, "").Describe() }

// checkStranded tells the planner which collectives the root waits in:
// a node whose ranks have all ended and which never gave its part to one
// strands it, and the job fails (recovery.Waiting). (A node with ranks
// left reports its own stranded collectives: see Agent.contribute.)
func (fe *frontend) checkStranded() {
	if len(fe.colls) == 0 {
		return
	}
	var w recovery.Waiting
	for seq, rc := range fe.colls {
		w.Open = append(w.Open, recovery.OpenCollective{Seq: seq, Op: rc.op.String(), Joined: rc.from})
	}
	fe.step(w)
}

// step gives the failure planner an event and carries out what it
// decides, in order.
func (fe *frontend) step(ev recovery.Event) { fe.carryOut(fe.decide(ev)) }

// carryOut carries out the planner's actions, in order.
func (fe *frontend) carryOut(acts []recovery.Action) {
	for _, act := range acts {
		switch act := act.(type) {
		case recovery.Record:
			fe.releaseJournal()
			rank := act.Rank
			if rank == recovery.NoRank {
				rank = raftstore.NoRank
			}
			fe.journal.Failure(journal.Failure{Node: act.Node, Rank: rank, Message: act.Why.Words()})
			if w := act.Why; w.Kind == recovery.ReasonStranded {
				fe.journal.Stranded(journal.Stranded{Node: w.Node, Rank: raftstore.NoRank, Seq: w.Seq & (1<<32 - 1), Epoch: w.Seq >> 32, Op: w.Op})
			}
		case recovery.Report:
			fe.showProgress() // clears the launch line
			fe.warnf("%s", act.Why.Words())
		case recovery.Terminate:
			fe.terminate()
		default:
			if !fe.recoveryAction(act) && !fe.nodeLossAction(act) && !fe.gossipAction(act) {
				panic(fmt.Sprintf("launch: recovery action %T not carried out", act))
			}
		}
	}
	if len(acts) > 0 {
		fe.writeLive()
	}
}

func (fe *frontend) terminate() {
	if fe.terminating {
		return
	}
	fe.terminating = true
	fe.verbosef("terminating the job: SIGTERM to every rank, SIGKILL after %v", fe.opts.KillAfter)
	if fe.cancelLaunch != nil {
		fe.cancelLaunch()
	}
	if fe.hooks.breakAt == "no-terminate" {
		fe.warnf("test hook: the terminate is not sent (%s)", breakEnv)
	} else {
		fe.bcast(proto.MTerminate, proto.EncodeInt(int64(fe.opts.KillAfter)))
	}
	fe.after(fe.opts.KillAfter+killResend, evTerminateOverdue{})
}

// killResend is how long past --kill-after a terminating job's ranks may
// run before the root tells their agents again to kill them, and then the
// period of its telling.
const killResend = 5 * time.Second

// terminateOverdue: the job was told to terminate --kill-after and
// killResend ago and some ranks have not ended. Every agent kills its
// ranks --kill-after after a terminate, so the terminate did not reach
// theirs: a broadcast relayed down the tree can be lost on its way (to an
// agent moving to its backup parent, say, docs/design.md). Each agent
// whose ranks have not all ended is sent a kill of its own, routed to it,
// and again every killResend until the job ends: a lost message costs the
// job seconds, not its end. An agent that cannot be reached is the
// failure detectors' (its link's heartbeat, gossip), as at any time.
func (fe *frontend) terminateOverdue() {
	if !fe.shutdownAt.IsZero() || fe.ledger().EndedCount() >= fe.opts.N {
		return
	}
	var late []string
	n := 0
	for _, a := range fe.agents {
		ended := fe.endedOn(a)
		if a.closed || a.done || ended >= len(a.ranks) {
			continue
		}
		n += len(a.ranks) - ended
		late = append(late, a.name)
		if err := a.send(proto.MKill, nil); err != nil {
			fe.verbosef("kill to node %s: %v", a.name, err)
		}
	}
	if len(late) > 0 && !fe.killResent {
		fe.killResent = true
		fe.warnf("%d rank(s) on node(s) %s still running %v after the job was terminated (--kill-after %v): killing them",
			n, strings.Join(late, ", "), fe.opts.KillAfter+killResend, fe.opts.KillAfter)
	}
	fe.after(killResend, evTerminateOverdue{})
}

// onSignal forwards a signal to every rank. SIGINT, SIGTERM and SIGHUP end
// the job, as mpiexec's do: the signal goes to every rank, then SIGTERM,
// then SIGKILL after --kill-after, and the job's exit status is 128 plus
// the signal's number; the same signal again, or another of the three,
// kills every rank at once. Other signals (SIGUSR1, SIGUSR2, SIGCONT) are
// only forwarded.
func (fe *frontend) onSignal(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	ends := s == syscall.SIGINT || s == syscall.SIGTERM || s == syscall.SIGHUP
	switch {
	case ends && !fe.shutdownAt.IsZero():
		return // every rank ended already: the job's end stands
	case s == syscall.SIGHUP && fe.opts.Replicas > 1 && fe.opts.Detach != nil && !fe.terminating:
		if fe.groupReady() {
			fe.opts.Detach(fe.jobID) // does not return
			return
		}
		fe.warnf("SIGHUP before the root replicas are up: the job cannot go on without the front-end")
	case ends && fe.terminating:
		fe.warnf("%s again: killing every rank", unix.SignalName(s))
		fe.bcast(proto.MKill, nil)
		return
	}
	fe.verbosef("forwarding signal %d (%v) to every rank", int(s), s)
	fe.bcast(proto.MSignal, proto.EncodeInt(int64(s)))
	if ends {
		fe.endSignal = s
		fe.step(recovery.Signaled{Signal: int(s), Msg: fmt.Sprintf("%s: ending the job (%s; %s again kills at once)",
			unix.SignalName(s), endingSteps(s, fe.opts.KillAfter), unix.SignalName(s))})
	}
}

// groupReady reports whether a replicated root's group has every replica
// and the root's children know where the replicas are: the job survives
// the front-end.
func (fe *frontend) groupReady() bool {
	_, servers, ok := fe.journal.Members()
	return ok && fe.replicaPeers != nil && servers >= fe.opts.Replicas
}

func (fe *frontend) protocolError(a *agentHandle, err error) {
	fe.step(recovery.ProtocolError{Node: a.name, Err: err.Error()})
}
