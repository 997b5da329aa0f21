package root

// Failures: the root feeds the recovery planner what it learns and carries
// out the planner's decisions; the user's signals.

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// rankEnded records a rank's end; the planner decides what a failure
// does to the job.
func (fe *frontend) rankEnded(st proto.RankStatus) {
	fe.journal.RankExited(journal.RankExit{Rank: st.Rank, Code: st.Code, Signal: st.Signal, Reason: st.Reason})
	ev := recovery.RankExited{Rank: st.Rank, Incarnation: st.Incarnation, Node: fe.nodeOf(st.Rank), Code: st.Code, Signal: st.Signal, Reason: st.Reason, Skipped: st.Skipped}
	if !ev.Clean() && fe.status().Phase == recovery.Running {
		fe.failedAt = time.Now()
	}
	fe.step(ev) // the planner counts the end in its ledger (recovery/ledger.go)
	if ev.Clean() {
		fe.checkStranded()
	}
}

// checkStranded tells the planner which collectives the root waits in: a
// node whose ranks all ended without giving their part strands one
// (recovery.Waiting; a node with ranks left reports its own).
func (fe *frontend) checkStranded() {
	var w recovery.Waiting
	fe.colls.Waiting(func(seq uint64, op rankproto.Op, covered map[int]bool) {
		w.Open = append(w.Open, recovery.OpenCollective{Seq: seq, Op: op.String(), Joined: covered})
	})
	if len(w.Open) > 0 {
		fe.step(w)
	}
}

// step gives the planner an event and carries out what it decides.
func (fe *frontend) step(ev recovery.Event) { fe.carryOut(fe.decide(ev)) }

// carryOut carries out the planner's actions, in order.
func (fe *frontend) carryOut(acts []recovery.Action) {
	for _, act := range acts {
		fe.narrate(act)
		switch act := act.(type) {
		case recovery.Record:
			fe.journal.Start()
			f, stranded := act.Failure()
			fe.journal.Failure(f)
			if stranded != nil {
				fe.journal.Stranded(*stranded)
			}
		case recovery.Report:
			fe.showProgress() // clears the launch line
			fe.warnf("%s", act.Why.Words())
		case recovery.Terminate:
			fe.terminate()
		case recovery.Detach:
			fe.opts.Detach(fe.jobID) // does not return
		case recovery.SignalRanks:
			fe.bcast(proto.MSignal, proto.EncodeInt(int64(act.Signal)))
		case recovery.KillRanks:
			fe.bcast(proto.MKill, nil)
		case recovery.KillOverdue: // a terminate lost on its way: told again until the end
			for _, x := range act.Agents {
				if err := fe.agents[x].send(proto.MKill, nil); err != nil {
					fe.verbosef("kill to node %s: %v", fe.agents[x].name, err)
				}
			}
			fe.after(recovery.KillResend, evPlanner{recovery.TerminateOverdue{}})
		case recovery.StandbysUp: // no agent is lost with its parent any more
			fe.observe(StandbysUp{N: act.N})
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

// narrate tells what an action does, in the planner's words (tell).
func (fe *frontend) narrate(act recovery.Action) {
	fe.tell(recovery.Narrate(act, fe.nameOf, time.Since))
}

// tell tells the user w: with --verbose, or always for a warning.
func (fe *frontend) tell(w string, warn bool) {
	switch {
	case w == "":
	case warn:
		fe.warnf("%s", w)
	default:
		fe.verbosef("%s", w)
	}
}

// nameOf names agent i by its node, as its handle has it.
func (fe *frontend) nameOf(i int) string { return fe.agents[i].name }

// agentNames are the agents' nodes' names, by index.
func (fe *frontend) agentNames() []string {
	names := make([]string, len(fe.agents))
	for i, a := range fe.agents {
		names[i] = a.name
	}
	return names
}

// terminate ends every rank: SIGTERM, then SIGKILL after --kill-after; the
// planner hears if ranks still run after that (TerminateOverdue).
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
	fe.after(fe.opts.KillAfter+recovery.KillResend, evPlanner{recovery.TerminateOverdue{}})
}

// onSignal passes a signal to the front-end on to the planner (recovery/
// signals.go). On SIGHUP, a replicated front-end whose group is up may
// leave the job to its replicas.
func (fe *frontend) onSignal(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	detach := fe.opts.Replicas > 1 && fe.opts.Detach != nil
	up := detach && s == syscall.SIGHUP && fe.replicas.Peers != nil && fe.journal.Serves(fe.opts.Replicas)
	fe.step(recovery.Signaled{Signal: int(s), Detach: detach, GroupUp: up})
}

// protocolError tells the planner that agent a broke the protocol.
func (fe *frontend) protocolError(a *agentHandle, err error) {
	fe.step(recovery.ProtocolError{Node: a.name, Err: err.Error()})
}
