package agent

// The agent's side of the restart protocol (docs/recovery.md): it suspends
// its ranks (an event to ranks that read them, SIGSTOP to the others),
// starts a failed rank again as its next incarnation, gives its ranks the
// patched node table, lets them go on; under --restart job it ends its
// ranks and starts them all again. Every command carries the recovery's
// epoch: one older than the agent heard is ignored, and each is safe to
// receive twice (a new root leader sends the phase it found committed
// again).

import (
	"errors"
	"slices"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/pmi"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// suspendAckWait bounds how long a rank that reads recovery events has to
// acknowledge a suspension before it is stopped (SIGSTOP).
const suspendAckWait = 250 * time.Millisecond

// restartKillWait bounds how long a restart of the job waits for a rank
// killed for it to end before it starts the next incarnation anyway.
const restartKillWait = 5 * time.Second

// heldPublish is the sequence number under which a respawned rank's
// Publish is answered: at resume, with the patched table.
const heldPublish = ^uint64(0)

// errRecovering answers a collective called while a recovery suspends the
// job: the rank calls it again once resumed.
var errRecovering = errors.New("a recovery is in progress")

// agentRecovery is where the agent stands in the restart protocol. It is
// guarded by Agent.mu, except changed (made once, never replaced), which
// wakes the suspension's wait.
type agentRecovery struct {
	epoch uint64 // the newest epoch heard
	// coll is the epoch collectives are counted under: the last
	// suspension's (or restart's). A new root leader's commands carry a
	// newer epoch without a new suspension: a rank respawned under it
	// counts with the others.
	coll      uint64
	suspended bool         // between Suspend and Resume
	settled   bool         // every rank of the suspension acknowledged or was stopped
	acked     map[int]bool // ranks that acknowledged the suspension
	stopped   map[int]bool // ranks stopped (SIGSTOP) by it
	held      map[int]bool // respawned ranks whose Publish waits for the resume
	table     [][]byte     // the node table: the first Publish's, patched since
	version   uint64       // its version (1: as published)
	restarted uint64       // the epoch of the last restart of the job carried out
	changed   chan struct{}
}

// wake tells the suspension's wait that a rank acknowledged or ended.
func (r *agentRecovery) wake() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// recover carries out one command of the restart protocol. It runs on the
// link's reader goroutine and does not block: what waits runs on a
// goroutine of the agent's.
func (a *Agent) recover(typ uint8, m proto.RecMsg) {
	switch typ {
	case proto.MSuspend:
		a.suspend(m)
	case proto.MRespawn:
		a.respawn(m)
	case proto.MPatch:
		a.patch(m)
	case proto.MResume:
		a.resume(m)
	case proto.MRestartJob:
		a.restartJob(m)
	}
}

// stale reports (under mu) whether a command of epoch is older than the
// newest heard, and otherwise records its epoch.
func (a *Agent) stale(epoch uint64) bool {
	if epoch < a.sup.rec.epoch {
		return true
	}
	a.sup.rec.epoch = epoch
	return false
}

// live returns the ranks whose current process has not ended (under mu).
func (a *Agent) live() []*rankProc {
	var out []*rankProc
	for _, r := range a.sup.order {
		if rp := a.sup.ranks[r]; rp != nil && !a.sup.gone[r] {
			out = append(out, rp)
		}
	}
	return out
}

func (a *Agent) suspend(m proto.RecMsg) {
	a.mu.Lock()
	if a.stale(m.Epoch) {
		a.mu.Unlock()
		return
	}
	first := !a.sup.rec.suspended
	// Collectives in flight are abandoned: their ranks are told to call
	// again once resumed, and every rank counts its collectives afresh
	// under the recovery's epoch (the root drops what it had of them).
	colls := a.coll.colls
	a.coll.colls, a.coll.sentUp = map[uint64]*localColl{}, map[uint64][]byte{}
	a.coll.comb.abandon(m.Epoch)
	for _, r := range a.sup.order {
		a.coll.seq[r] = m.Epoch << 32
	}
	a.sup.rec.coll = m.Epoch
	a.coll.puts = map[string][]byte{}
	if first {
		a.sup.rec.suspended, a.sup.rec.settled = true, false
		clear(a.sup.rec.acked)
		clear(a.sup.rec.stopped)
		clear(a.sup.rec.held)
	}
	settled := a.sup.rec.settled
	live := a.live()
	a.mu.Unlock()
	for seq, c := range colls {
		for r := range c.values {
			if rp := a.rank(r); rp != nil {
				rp.deliver(&proto.CollResult{Seq: seq, Recovering: true})
			}
		}
	}
	if !first {
		if settled {
			a.send(proto.MSuspended, proto.RecMsg{Epoch: m.Epoch}.Encode())
		}
		return // the suspension under way acknowledges with the newest epoch
	}
	ev := rankproto.EncodeEvent(rankproto.Event{Type: rankproto.TSuspend, Epoch: m.Epoch})
	var stop []*rankProc
	for _, rp := range live {
		if !rp.inited.Load() || rp.event(rankproto.TSuspend, ev) != nil {
			stop = append(stop, rp)
		}
	}
	a.stopRanks(stop)
	a.goFunc(a.settle)
}

// stopRanks stops ranks that cannot be told (SIGSTOP to their group).
func (a *Agent) stopRanks(rps []*rankProc) {
	a.mu.Lock()
	for _, rp := range rps {
		a.sup.rec.stopped[rp.rank] = true
	}
	a.mu.Unlock()
	for _, rp := range rps {
		rp.signal(syscall.SIGSTOP)
	}
}

// settle waits until every live rank acknowledged the suspension or the
// bound passed, stops the rest, and acknowledges the suspension.
func (a *Agent) settle() {
	bound := time.NewTimer(suspendAckWait)
	defer bound.Stop()
	changed := a.sup.rec.changed
	for {
		a.mu.Lock()
		var missing []*rankProc
		for _, rp := range a.live() {
			if !a.sup.rec.acked[rp.rank] && !a.sup.rec.stopped[rp.rank] && !a.sup.rec.held[rp.rank] {
				missing = append(missing, rp)
			}
		}
		suspended := a.sup.rec.suspended
		a.mu.Unlock()
		if !suspended {
			return // resumed meanwhile (a newer epoch's resume)
		}
		if len(missing) == 0 {
			break
		}
		select {
		case <-changed:
			continue
		case <-bound.C:
			a.stopRanks(missing)
		case <-a.ctx.Done():
			return
		}
		break
	}
	a.mu.Lock()
	a.sup.rec.settled = true
	epoch := a.sup.rec.epoch
	a.mu.Unlock()
	a.send(proto.MSuspended, proto.RecMsg{Epoch: epoch}.Encode())
}

// suspendAck takes a rank's acknowledgement of a recovery event.
func (a *Agent) suspendAck(rank int, typ uint8, epoch uint64) {
	if typ != rankproto.TSuspend {
		return // a patch's: the rank holds the table; nothing waits for it
	}
	a.mu.Lock()
	if a.sup.rec.suspended && epoch <= a.sup.rec.epoch {
		a.sup.rec.acked[rank] = true
	}
	a.mu.Unlock()
	a.sup.rec.wake()
}

func (a *Agent) respawn(m proto.RecMsg) {
	a.mu.Lock()
	if a.stale(m.Epoch) {
		a.mu.Unlock()
		return
	}
	old := a.sup.ranks[m.Rank]
	if old == nil {
		a.mu.Unlock()
		a.logf("respawn of rank %d, which is not on this node", m.Rank)
		return
	}
	if old.info.Incarnation >= m.Incarnation {
		// Sent again (a new root leader): one process per incarnation.
		addr, gone := old.addr, a.sup.gone[m.Rank]
		var pid int
		if old.cmd.Process != nil {
			pid = old.cmd.Process.Pid
		}
		a.mu.Unlock()
		switch {
		case addr != nil:
			a.send(proto.MRespawned, proto.RecMsg{Rank: m.Rank, Incarnation: old.info.Incarnation, Addr: addr}.Encode())
		case !gone && pid > 0:
			// A rank started again alone (it never publishes): its
			// start is what the root waits for.
			a.send(proto.MStarted, proto.Started{Ranks: []int{m.Rank}, Pids: []int{pid}, Incs: []uint64{old.info.Incarnation}}.Encode())
		}
		return
	}
	info := old.info
	info.Incarnation = m.Incarnation
	// Not suspended: the planner starts it again alone (no rank opened
	// the rank protocol), the others go on.
	info.Alone = !a.sup.rec.suspended
	a.mu.Unlock()
	<-old.exited // its end was reported: it was reaped
	rp := a.startAgain(old, info)
	if rp == nil {
		return
	}
	a.mu.Lock()
	a.sup.ranks[m.Rank] = rp
	delete(a.sup.gone, m.Rank)
	delete(a.fo.exits, m.Rank)
	a.coll.seq[m.Rank] = a.sup.rec.coll << 32
	if a.sup.rec.suspended {
		a.sup.rec.held[m.Rank] = true
	}
	a.reviveLocked(1)
	a.mu.Unlock()
	a.send(proto.MStarted, proto.Started{Ranks: []int{m.Rank}, Pids: []int{rp.cmd.Process.Pid}, Incs: []uint64{m.Incarnation}}.Encode())
	a.runRank(a.ctx, rp)
}

// reviveLocked counts n ended ranks running again (under mu).
func (a *Agent) reviveLocked(n int) {
	if a.sup.ended == len(a.spec.Ranks) && n > 0 {
		a.sup.exited = make(chan struct{})
	}
	a.sup.ended -= n
}

// published takes a respawned rank's Publish: its I-tuple goes to the
// root, and the rank is answered at the resume, with the patched table.
func (a *Agent) published(rp *rankProc, addr []byte) {
	a.mu.Lock()
	rp.addr = addr
	a.sup.rec.held[rp.rank] = true
	a.mu.Unlock()
	a.send(proto.MRespawned, proto.RecMsg{Rank: rp.rank, Incarnation: rp.info.Incarnation, Addr: addr}.Encode())
}

func (a *Agent) patch(m proto.RecMsg) {
	a.mu.Lock()
	if a.stale(m.Epoch) {
		a.mu.Unlock()
		return
	}
	rows := make([]rankproto.Row, 0, len(m.Rows))
	for _, row := range m.Rows {
		if row.Rank < len(a.sup.rec.table) {
			a.sup.rec.table[row.Rank] = row.Addr
		}
		rows = append(rows, rankproto.Row{Rank: row.Rank, Incarnation: row.Incarnation, ITuple: row.Addr})
	}
	a.sup.rec.version = m.Version
	var tell []*rankProc
	for _, rp := range a.live() {
		if rp.inited.Load() && !a.sup.rec.held[rp.rank] {
			tell = append(tell, rp)
		}
	}
	a.mu.Unlock()
	ev := rankproto.EncodeEvent(rankproto.Event{Type: rankproto.TPatch, Epoch: m.Epoch, Version: m.Version, Rows: rows})
	for _, rp := range tell {
		_ = rp.event(rankproto.TPatch, ev) // a rank that is gone is another failure
	}
	a.send(proto.MPatched, proto.RecMsg{Epoch: m.Epoch, Version: m.Version}.Encode())
}

func (a *Agent) resume(m proto.RecMsg) {
	a.mu.Lock()
	if a.stale(m.Epoch) {
		a.mu.Unlock()
		return
	}
	if !a.sup.rec.suspended {
		a.mu.Unlock()
		a.send(proto.MResumed, proto.RecMsg{Epoch: m.Epoch}.Encode()) // sent again
		return
	}
	a.sup.rec.suspended = false
	var cont, tell, held []*rankProc
	for _, rp := range a.live() {
		switch {
		case a.sup.rec.held[rp.rank]:
			held = append(held, rp)
		case rp.inited.Load():
			tell = append(tell, rp)
		}
		if a.sup.rec.stopped[rp.rank] {
			cont = append(cont, rp)
		}
	}
	clear(a.sup.rec.stopped)
	clear(a.sup.rec.held)
	table := slices.Clone(a.sup.rec.table)
	a.mu.Unlock()
	a.sup.rec.wake()
	ev := rankproto.EncodeEvent(rankproto.Event{Type: rankproto.TResume, Epoch: m.Epoch, Version: m.Version})
	for _, rp := range tell {
		_ = rp.event(rankproto.TResume, ev)
	}
	for _, rp := range cont {
		rp.signal(syscall.SIGCONT)
	}
	for _, rp := range held {
		rp.deliver(&proto.CollResult{Seq: heldPublish, Op: rankproto.OpPublish, Values: table})
	}
	a.send(proto.MResumed, proto.RecMsg{Epoch: m.Epoch}.Encode())
}

// startAgain starts old's rank as info's incarnation, with old's binding;
// a start that fails is reported as the rank's end, and gives nil.
func (a *Agent) startAgain(old *rankProc, info rankproto.Info) *rankProc {
	rp, err := startRank(a.spec, info, a, old.cpus, proto.ResolveProgram)
	if err != nil {
		a.reportExit(proto.RankStatus{Rank: old.rank, Code: 127, Reason: "could not start it again: " + err.Error(), Incarnation: info.Incarnation})
		return nil
	}
	rp.cpus = old.cpus
	return rp
}

// restartJob ends every rank and starts them all again as their next
// incarnation, with a fresh PMI key space (--restart job). A command of an
// epoch already carried out is acknowledged again.
func (a *Agent) restartJob(m proto.RecMsg) {
	a.mu.Lock()
	if a.stale(m.Epoch) {
		a.mu.Unlock()
		return
	}
	if m.Epoch <= a.sup.rec.restarted {
		a.mu.Unlock()
		a.send(proto.MRestarted, proto.RecMsg{Epoch: m.Epoch}.Encode())
		return
	}
	a.sup.rec.restarted = m.Epoch
	olds := make([]*rankProc, 0, len(a.sup.order))
	for _, r := range a.sup.order {
		rp := a.sup.ranks[r]
		rp.replaced.Store(true)
		olds = append(olds, rp)
	}
	clear(a.sup.rec.stopped)
	a.mu.Unlock()
	a.goFunc(func() {
		for _, rp := range olds {
			rp.signal(syscall.SIGKILL)
			rp.signal(syscall.SIGCONT)
		}
		deadline := time.After(restartKillWait)
		for _, rp := range olds {
			select {
			case <-rp.exited:
			case <-deadline:
			case <-a.ctx.Done():
				return
			}
		}
		a.mu.Lock()
		if a.sup.rec.restarted != m.Epoch || a.sup.killing {
			a.mu.Unlock()
			return // a newer restart took over, or the job is ending
		}
		a.coll.colls, a.coll.sentUp = map[uint64]*localColl{}, map[uint64][]byte{}
		a.coll.ringWait, a.coll.ringKept = map[uint64]*ringWait{}, nil
		a.coll.comb.abandon(m.Epoch)
		a.coll.puts, a.coll.kv = map[string][]byte{}, map[string][]byte{}
		a.coll.pmiPuts, a.coll.pmiKV = map[string][]byte{}, map[string][]byte{}
		a.sup.gone, a.fo.exits = map[int]bool{}, map[int]proto.RankStatus{}
		a.sup.rec.table, a.sup.rec.version = nil, 0
		for _, r := range a.sup.order {
			a.coll.seq[r] = m.Epoch << 32
		}
		a.sup.rec.coll = m.Epoch
		a.reviveLocked(a.sup.ended)
		a.mu.Unlock()
		a.renewPMIx(m.Restarts)
		var st proto.Started
		for _, old := range olds {
			info := old.info
			// The job's restart R runs every rank as incarnation R+1 (a
			// rank that missed a restart, its agent not up yet, catches up).
			info.Incarnation = max(info.Incarnation+1, uint64(m.Restarts)+1)
			info.Restarts = m.Restarts
			rp := a.startAgain(old, info)
			if rp == nil {
				continue
			}
			a.mu.Lock()
			a.sup.ranks[old.rank] = rp
			a.mu.Unlock()
			st.Ranks, st.Pids, st.Incs = append(st.Ranks, old.rank), append(st.Pids, rp.cmd.Process.Pid), append(st.Incs, info.Incarnation)
			a.runRank(a.ctx, rp)
		}
		if len(st.Ranks) > 0 {
			a.send(proto.MStarted, st.Encode())
		}
		a.send(proto.MRestarted, proto.RecMsg{Epoch: m.Epoch}.Encode())
	})
}

// protocolOpened reports to the root under --restart rank that a rank
// opened the rank protocol (the client library's Init): from then on a
// failure before the first node table cannot be recovered by starting
// ranks again alone (recovery/alone.go).
func (a *Agent) protocolOpened(rank int) {
	if a.spec.Restart == "rank" {
		a.send(proto.MRankProto, proto.RecMsg{Rank: rank}.Encode())
	}
}

// openedProtocol records that a rank opened the rank protocol (resync
// reports it again to a successor) and reports it (protocolOpened).
func (a *Agent) openedProtocol(rank int) {
	a.mu.Lock()
	if !slices.Contains(a.fo.openedProto, rank) {
		a.fo.openedProto = append(a.fo.openedProto, rank)
	}
	a.mu.Unlock()
	a.protocolOpened(rank)
}

// observePMI reports a rank's PMI-1 init to the root under --restart rank,
// which cannot replace one MPI rank (rank is -1 for a TCP-mode client,
// which names itself).
func (a *Agent) observePMI(rank int) func(pmi.Event) {
	if a.spec.Restart != "rank" {
		return nil
	}
	return func(ev pmi.Event) {
		if ev.Kind == pmi.EventInit && ev.Rank >= 0 {
			a.send(proto.MPMIInit, proto.RecMsg{Rank: ev.Rank}.Encode())
		}
	}
}
