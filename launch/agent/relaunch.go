package agent

// An agent started again on its node after the one before was lost
// (docs/recovery.md, "Losing an agent"). It gets the node's share of the
// job like the first, but starts no rank by itself: the ranks of the lost
// agent died with it, and the recovery starts them again — a respawn of
// each (--restart rank) or a restart of the job (--restart job). Until
// then each rank has a placeholder that holds what a respawn needs (its
// incarnation that was lost, its binding) and counts as ended.

import (
	"context"
	"os/exec"
	"sync"

	"github.com/ftlaunch/ftlaunch/launch/rankenv"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// standby sets up a relaunched agent's ranks as placeholders and joins
// the recovery where the spec says it stands: its epoch, its node table
// and, under --restart rank, a suspension (the ranks it starts are held
// until the resume, as every other agent's are).
func (a *Agent) standby(ctx context.Context, wg *sync.WaitGroup) {
	if l, err := a.listenPMI(); err == nil {
		a.coll.pmiTCP = l
	}
	rl := a.spec.Relaunch
	n := len(a.spec.Ranks)
	binds, bindErr := rankenv.RankBindings(a.spec.Bind, n, a.spec.BindShare)
	if bindErr != nil {
		a.logf("binding the ranks it starts again: %v; they run unbound", bindErr)
	}
	gone := make(chan struct{})
	close(gone)
	a.mu.Lock()
	for i, r := range a.spec.Ranks {
		info := rankproto.Info{
			Rank: r, Size: a.spec.Size, LocalRank: i, LocalSize: n,
			Node: a.spec.Node, NodeID: a.spec.NodeID, JobID: a.spec.JobID, Incarnation: max(rl.Incs[i], 1),
		}
		// No process: cmd has none, and it was "reaped" already.
		a.sup.ranks[r] = &rankProc{rank: r, agent: a, cmd: &exec.Cmd{}, info: info, exited: gone, cpus: rankenv.BindingOf(binds, i)}
		a.sup.order = append(a.sup.order, r)
		a.sup.gone[r] = true
		a.coll.seq[r] = rl.CollEpoch << 32
	}
	a.sup.ended = n
	a.sup.rec.epoch, a.sup.rec.coll, a.sup.rec.version = rl.Epoch, rl.CollEpoch, rl.Version
	a.sup.rec.table = rl.Table
	a.sup.rec.suspended, a.sup.rec.settled = rl.Suspended, rl.Suspended
	close(a.sup.exited) // every rank "ended"; under the lock, as reportExit (a respawn replaces it)
	a.mu.Unlock()
	if l := a.coll.pmiTCP; l != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.serve(ctx, a, wg)
		}()
	}
	a.logf("started again as incarnation %d: %d rank(s) to be started by the recovery (epoch %d)", rl.Incarnation, n, rl.Epoch)
}
