package journal

// Replica agents joining the front-end's group, and the group's loss of
// its majority.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// Defaults of Config's group timers.
const (
	// DefaultNoLeader: raft's timers for a group (275 ms) elect a leader
	// again 0.3-0.9 s after one is lost while a majority is left; 2 s
	// without any leader is several failed election rounds.
	DefaultNoLeader = 2 * time.Second
	// DefaultJoinWait: a configuration change commits in milliseconds,
	// or fails once the leader's lease (275 ms) runs out.
	DefaultJoinWait = 2 * time.Second
	// joinChangeTimeout bounds the enqueueing of each of a join's
	// configuration changes (raft's timeout).
	joinChangeTimeout = 10 * time.Second
)

var (
	// ErrNoMajority: the front-end's replica led, then went without any
	// leader for Config.NoLeader: it cannot reach a majority of the
	// group's voters (they are lost, or it is cut off from them). Writes
	// fail with it at once from then on, until a leader is known again.
	ErrNoMajority = errors.New("the state log's raft group lost its majority")
	// ErrClosed: Join after Close. The replica was not added: the job's
	// end came first.
	ErrClosed = errors.New("the journal is closed")
)

// Join adds a replica agent to the group (id its raft server ID, addr its
// raft address) in two configuration changes, as a nonvoter and then as a
// voter (see joinGroup), one join at a time. It waits for the journal's
// replica to lead (Ready), and tries again after a change that failed
// while ctx lasts (a leadership blip on a loaded machine), unless the
// group lost its majority (ErrNoMajority) or the journal is closing.
//
// Close and Join are ordered: a join not begun when Close is called is
// refused (ErrClosed: the replica stays out of the configuration, its log
// empty, and `inspect` names it as never joined), and the final status
// waits for the join under way, at most Config.JoinWait, so that it is
// on every replica in the configuration it is committed in. replaces, if
// set, is the ID of a lost voter this one takes the place of: it is
// removed from the group first.
func (j *Journal) Join(ctx context.Context, id, addr, replaces string) error {
	if err := j.Ready(ctx); err != nil {
		return fmt.Errorf("journal: join %s: %w", id, err)
	}
	r := j.Replica()
	if r == nil {
		// The journal wrote its log alone (closed before its replica
		// led), or failed to start.
		if err := j.Err(); err != nil {
			return fmt.Errorf("journal: join %s: %w", id, err)
		}
		return fmt.Errorf("journal: join %s: %w (before the group formed)", id, ErrClosed)
	}
	j.joinMu.Lock()
	defer j.joinMu.Unlock()
	j.mu.Lock()
	if j.closing || j.dead {
		j.mu.Unlock()
		return fmt.Errorf("journal: join %s: %w", id, ErrClosed)
	}
	j.joins++
	j.mu.Unlock()
	defer func() {
		j.mu.Lock()
		j.joins--
		j.mu.Unlock()
		j.poke()
	}()
	// The voter this one takes the place of (a lost replica host's, or
	// the front-end's) leaves the group first: the group keeps its size.
	// Each change is tried again after a leadership blip, the removal
	// too (a successor's replica that lost the lead for a moment under
	// load left the lost front-end's voter in, and its replacement out).
	removed, reachable := replaces == "", false
	for {
		var err error
		if !reachable {
			if err = j.reachableFrom(r, addr); err == nil {
				reachable = true
			}
		}
		if reachable && !removed {
			if err = r.Raft().RemoveServer(raft.ServerID(replaces), 0, joinChangeTimeout).Error(); err == nil {
				removed = true
			} else {
				err = fmt.Errorf("remove the lost voter %s: %w", replaces, err)
			}
		}
		if reachable && removed {
			if err = joinGroup(r.Raft(), raft.ServerID(id), raft.ServerAddress(addr), joinChangeTimeout); err == nil {
				return nil
			}
		}
		if j.isClosing() {
			return fmt.Errorf("journal: join %s: %w (%w)", id, ErrClosed, err)
		}
		if lost := j.noMajority(r.Leaderless()); lost != nil {
			return fmt.Errorf("journal: join %s: %w: %w", id, lost, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("journal: join %s: %w (%w)", id, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// reachableFrom makes this replica's address in the group's configuration
// one a replica at peer (host:port) can dial: the address of this machine
// that routes to it (RouteAddr), if it is not already. The replica agents
// dial the front-end's replica only once another leads (an election, a
// transfer back): an address they cannot reach would leave it out of the
// group for good after a stall. Addresses that are not host:port (raft's
// in-memory transport) are left alone.
func (j *Journal) reachableFrom(r *raftstore.Replica, peer string) error {
	f := r.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("read the configuration: %w", err)
	}
	var own raft.ServerAddress
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(j.cfg.Node) {
			own = s.Address
		}
	}
	host, port, err := net.SplitHostPort(string(own))
	if err != nil || net.ParseIP(host) == nil {
		return nil
	}
	if _, _, err := net.SplitHostPort(peer); err != nil {
		return nil
	}
	ip, err := RouteAddr(peer)
	if err != nil || ip == host {
		return nil // no better address known: keep the one advertised
	}
	addr := raft.ServerAddress(net.JoinHostPort(ip, port))
	if err := r.Raft().AddVoter(raft.ServerID(j.cfg.Node), addr, 0, joinChangeTimeout).Error(); err != nil {
		return fmt.Errorf("advertise %s instead of %s, the address that reaches %s: %w", addr, own, peer, err)
	}
	return nil
}

// noMajority returns ErrNoMajority, with what it is based on, when the
// replica has been without a leader for Config.NoLeader (leaderless as
// raftstore.Replica.Leaderless says), nil otherwise. While the caller
// says a majority of the voters are alive (MajorityAlive: their agents'
// links are up), the group is slow, not lost, and gets aliveNoLeader
// times as long: on two cores at a load of 30 an election of three live
// replicas took 7 s, and the 2 s rule ended a job whose group could elect
// (issue #27's acceptance run).
func (j *Journal) noMajority(leaderless time.Duration) error {
	if leaderless < j.cfg.NoLeader {
		return nil
	}
	j.mu.Lock()
	alive := j.majorityAlive
	j.mu.Unlock()
	if alive && leaderless < aliveNoLeader*j.cfg.NoLeader {
		return nil
	}
	return fmt.Errorf("%w: replica %s has known no leader for %.1f s", ErrNoMajority, j.cfg.Node, leaderless.Seconds())
}

// aliveNoLeader: how many times NoLeader a replica waits for a leader
// while a majority of the group's voters are alive (noMajority).
const aliveNoLeader = 10

// MajorityAlive tells the journal whether a majority of the group's
// voters are alive as far as the caller knows (the front-end: its own and
// the replica agents' whose links are up); a replica without a leader then
// waits longer before it takes the majority for lost (noMajority).
func (j *Journal) MajorityAlive(alive bool) {
	j.mu.Lock()
	j.majorityAlive = alive
	j.mu.Unlock()
}

// joinsUnderWay returns the number of joins begun and not ended.
func (j *Journal) joinsUnderWay() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.joins
}

// poke wakes the journal goroutine.
func (j *Journal) poke() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// joinGroup adds a replica to the raft group as a voter in two
// configuration changes: as a nonvoter first, then promoted. Added as a
// voter at once, it would be committed by a majority of the configuration
// that has it, which need not include the voters already there (with three
// replicas, the front-end and the new one suffice). Were the front-end to
// die before the first replica agent got that entry, the two left could
// never elect a leader: the first still sees a group of two voters, the
// dead front-end and itself, and raft refuses votes to a candidate outside
// its configuration, while the newer one's log is ahead of it. As a
// nonvoter, the new replica is committed by a majority of the voters
// already there (with three replicas: both), so that once it votes they
// know it. Joins must not overlap: one replica promoted while another is a
// nonvoter that has not heard of it would undo this.
func joinGroup(r *raft.Raft, id raft.ServerID, addr raft.ServerAddress, timeout time.Duration) error {
	if err := r.AddNonvoter(id, addr, 0, timeout).Error(); err != nil {
		return fmt.Errorf("add %s to the group as a nonvoter: %w", id, err)
	}
	if err := r.AddVoter(id, addr, 0, timeout).Error(); err != nil {
		return fmt.Errorf("make %s a voter: %w", id, err)
	}
	return nil
}
