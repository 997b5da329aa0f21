package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/fence"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"github.com/ftlaunch/ftlaunch/launch/srunspawn"
	"github.com/ftlaunch/ftlaunch/launch/sshspawn"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
)

// childWait bounds how long an agent told to shut down waits for its
// children to finish theirs before it reports done itself.
const childWait = 10 * time.Second

// treeState is an agent's part of the launch tree: its listener, its
// children's links and the routes to the agents below them.
type treeState struct {
	idx int
	inc uint64 // the agent's incarnation on its node (bootstrap.Inc)
	// fenced is the fence record RunConnected made from the bootstrap
	// (zero: none); run makes its own only if it names another target.
	fenced fence.Target
	creds  *secure.Credentials
	ln     net.Listener
	port   int
	// awake: how long this agent has been able to listen (a child's
	// silence counts only for that long: proto.Awake); startTree runs it.
	awake *proto.Awake

	mu        sync.Mutex
	children  map[int]*proto.Link   // connected children, by agent index
	ups       map[int]proto.ChildUp // their starts, as reported up
	launching map[int]bool          // children being started, by agent index (their parts of collectives are waited for)
	route     map[int]int           // agent below us -> the child it is reached through
	standby   map[int]*proto.Link   // standby links of the agents whose backup parent this is, by index
	condemned map[*proto.Link]bool  // children's links ended on gossip's word and their silence (suspectChild)
	watched   map[*proto.Link]bool  // children's links gossip condemned, watched for silence (watchChild)
	closing   bool                  // shutting down: no new children
	changed   chan struct{}         // signalled when a child's link ends
	cancel    context.CancelFunc

	stdinGone <-chan struct{} // closed when the agent's session ended

	spawner spawn.Spawner // a test's spawner (ConnectConfig.Spawner; nil: the launch mode's)

	joined func(seq uint64, op rankproto.Op) // a test's (ConnectConfig.Joined; nil: none)
}

func newTreeState(idx int, creds *secure.Credentials, ln net.Listener) *treeState {
	return &treeState{
		idx: idx, creds: creds, ln: ln, port: ln.Addr().(*net.TCPAddr).Port,
		children: map[int]*proto.Link{}, launching: map[int]bool{}, ups: map[int]proto.ChildUp{}, route: map[int]int{}, standby: map[int]*proto.Link{}, condemned: map[*proto.Link]bool{}, watched: map[*proto.Link]bool{},
		changed: make(chan struct{}, 1), awake: proto.NewAwake(proto.AwakeTick),
	}
}

// startTree starts the agent's children and serves its listener. It runs
// once the job spec arrived, before the node's ranks start.
func (a *Agent) startTree(ctx context.Context, wg *sync.WaitGroup) {
	t := a.tree
	t.mu.Lock()
	for _, c := range a.spec.Children {
		t.launching[c.Idx] = true
	}
	t.mu.Unlock()
	for _, c := range a.spec.Children {
		t.route[c.Idx] = c.Idx
		for _, s := range c.Sub {
			t.route[s] = c.Idx
		}
	}
	// Always: a leaf may adopt children later (a backup parent).
	wg.Add(1)
	go func() {
		defer wg.Done()
		t.awake.Run(ctx)
	}()
	var l *launcher.Launcher
	if len(a.spec.Children) > 0 {
		sp, closeSp, err := a.spawner()
		if err != nil {
			t.mu.Lock()
			clear(t.launching)
			t.mu.Unlock()
			a.sendCombined()
			for _, c := range a.spec.Children {
				a.send(proto.MChildFailed, proto.ChildFailed{Idx: c.Idx, Msg: fmt.Sprintf("start the agent on %s: node %s cannot launch: %v", c.Name, a.spec.Node, err)}.Encode())
			}
		} else {
			l = a.childLauncher(sp, t.port, a.spec.Launch.Batch, a.spec.Children)
			l.Logf = func(format string, args ...any) { fmt.Fprintf(a.log, format+"\n", args...) }
			lctx, cancel := context.WithCancel(ctx)
			t.mu.Lock()
			t.cancel = cancel
			t.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.Run(lctx, func(res launcher.LaunchResult) { a.childStarted(ctx, wg, res) })
				<-ctx.Done() // the spawner's sessions live as long as the agent
				closeSp()
				l.Wait(launcher.SessionsWait) // their watchers, once they ended (bounded)
			}()
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		launcher.AcceptLoop(t.ln, l, func(conn net.Conn, h proto.Hello) { a.adoptStandby(ctx, wg, conn, h) }, a.adoptRequest)
	}()
}

// closeFinished ends the session of a child that closed its link (it is
// exiting): it lets the session end by itself (closing an srun session
// cancels the step, noisily), grace at most or until ctx ends, and then
// closes it. It joins its wait for the session: after a close of a
// session still running, grace at most again; a session that outlives
// its close leaves it to the process's exit.
func closeFinished(ctx context.Context, sess spawn.Session, grace time.Duration) {
	ended := make(chan struct{})
	go func() { // joined below, but for a session that outlives its close
		defer close(ended)
		_ = sess.Wait()
	}()
	select {
	case <-ended:
	case <-time.After(grace):
	case <-ctx.Done():
	}
	_ = sess.Close()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-ended:
	case <-t.C:
	}
}

// childLauncher starts children of this agent with sp: they run the agent
// binary and connect back to port on this host (loopback for test nodes).
func (a *Agent) childLauncher(sp spawn.Spawner, port, batch int, cs []proto.ChildSpec) *launcher.Launcher {
	hosts := []string{"127.0.0.1"}
	if a.spec.Launch.Mode != "local" {
		hosts = proto.OwnAddrs()
	}
	l := launcher.NewLauncher(sp, []string{a.spec.Launch.AgentPath, "agent", "--connect"}, port, hosts, batch, cs)
	l.Parent, l.Job = a.spec.Node, a.spec.JobID
	return l
}

// spawner makes what starts this agent's children.
func (a *Agent) spawner() (spawn.Spawner, func(), error) {
	if a.tree != nil && a.tree.spawner != nil {
		return a.tree.spawner, func() {}, nil
	}
	ls := a.spec.Launch
	switch ls.Mode {
	case "local":
		sp, err := launcher.NewLocalSpawner()
		return sp, func() {}, err
	case "ssh":
		policy := sshspawn.HostKeyFromConfig
		if ls.AcceptNew {
			policy = sshspawn.HostKeyAcceptNew
		}
		sp, err := sshspawn.New(sshspawn.Options{
			ConfigFile: ls.SSHConfig, HostKeyPolicy: policy, ForwardAgent: ls.ForwardAgent,
			Logf: a.logf,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("ssh: %w", err)
		}
		return launcher.SSHSpawner(sp), func() { sp.Close() }, nil
	case "slurm":
		// srun inside a job step: a new step of the same allocation.
		sp, err := srunspawn.New(srunspawn.Options{})
		if err != nil {
			return nil, nil, fmt.Errorf("slurm: %w", err)
		}
		return sp, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown launch mode %q", ls.Mode)
}

// childStarted takes a child's start: a failure is reported up; a child
// that connected back is linked, announced up, and relayed until its link
// ends.
func (a *Agent) childStarted(ctx context.Context, wg *sync.WaitGroup, res launcher.LaunchResult) {
	t := a.tree
	t.mu.Lock()
	closing := t.closing
	delete(t.launching, res.Child.Idx)
	if res.Err == nil && !closing {
		t.children[res.Child.Idx] = res.Link
		t.ups[res.Child.Idx] = res.Up
	}
	t.mu.Unlock()
	if res.Err != nil {
		a.sendCombined() // what waited for it goes up without it
		if !closing {
			a.send(proto.MChildFailed, proto.ChildFailed{Idx: res.Child.Idx, Msg: res.Err.Error()}.Encode())
		}
		return
	}
	if closing {
		res.Link.Conn.Close()
		_ = res.Sess.Close()
		return
	}
	idx := res.Child.Idx
	a.send(proto.MChildUp, res.Up.Encode())
	wg.Add(1)
	go func() {
		defer wg.Done()
		hb := a.spec.Heartbeat
		done := false // the child said it is done: its link ends normally
		err := res.Link.Run(ctx, hb, a.spec.Timing.LinkTimeout(hb), func(typ uint8, p []byte) error {
			return a.relayUp(idx, typ, p, &done)
		})
		a.childGone(idx, res.Link, err)
		if !done {
			// Lost: end its session at once (srun's own cancellation of
			// a step on a dead node waits for Slurm).
			launcher.KillSession(res.Sess)
			return
		}
		closeFinished(ctx, res.Sess, 2*time.Second)
		select {
		case t.changed <- struct{}{}:
		default:
		}
	}()
}

// childGone reports the end of child idx's link l (err: why) up, once the
// child is forgotten.
func (a *Agent) childGone(idx int, l *proto.Link, err error) {
	t := a.tree
	t.mu.Lock()
	if t.children[idx] == l {
		delete(t.children, idx)
		delete(t.ups, idx)
	}
	condemned := t.condemned[l]
	delete(t.condemned, l)
	delete(t.watched, l)
	t.mu.Unlock()
	// What waited for its part goes up without it: its subtree's agents
	// send theirs through their new parents (docs/collectives.md).
	a.sendCombined()
	if condemned {
		err = proto.ErrGossipDead
	}
	msg := "link ended"
	if err != nil {
		msg = err.Error()
	}
	a.send(proto.MChildGone, proto.ChildFailed{Idx: idx, Msg: msg, Silent: errors.Is(err, proto.ErrHeartbeat)}.Encode())
}

// suspectChild takes the root's word that gossip finds child idx dead:
// its link is watched (watchChild) unless it is already.
func (a *Agent) suspectChild(idx int) {
	t := a.tree
	if t == nil {
		return
	}
	t.mu.Lock()
	l := t.children[idx]
	watched := l == nil || t.watched[l]
	if !watched {
		t.watched[l] = true
	}
	t.mu.Unlock()
	if watched {
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.watchChild(idx, l)
	}()
}

// watchChild ends child idx's link l as silent once it has been quiet for
// a heartbeat interval and proto.ConfirmQuiet (ConfirmSilence), looking
// each time the silence would be long enough; a child that spoke
// meanwhile is kept, and watched on: gossip's word stands (memberlist
// never takes a member it declared dead back by itself), so should it
// crash later, its silence alone condemns it within the same bound
// (recovery/detect.go). It ends with the link, or the agent.
func (a *Agent) watchChild(idx int, l *proto.Link) {
	t := a.tree
	for looked, kept := false, false; ; looked = true {
		quiet, left := l.ConfirmSilence(a.spec.Heartbeat, a.spec.Timing, t.awake)
		if left <= 0 {
			t.mu.Lock()
			t.condemned[l] = true
			t.mu.Unlock()
			a.logf("gossip finds %s dead and its link has been quiet %v: it is lost", linkPeer(l, idx), quiet.Round(time.Millisecond))
			l.Conn.Close()
			return
		}
		if looked && !kept {
			kept = true
			a.logf("gossip said %s was dead, but its link spoke %v ago: kept (watched)", linkPeer(l, idx), quiet.Round(time.Millisecond))
		}
		select {
		case <-time.After(left):
		case <-a.ctx.Done():
			return
		}
		t.mu.Lock()
		cur := t.children[idx]
		t.mu.Unlock()
		if cur != l {
			return // its link ended (childGone reported it) or was replaced
		}
	}
}

// relayDown passes a routed message towards its destination.
func (a *Agent) relayDown(p []byte) error {
	dst, typ, inner, err := proto.Unwrap(p, true)
	if err != nil {
		return fmt.Errorf("routed message: %w", err)
	}
	if a.tree == nil {
		return fmt.Errorf("routed message for agent %d, but this agent has no children", dst)
	}
	t := a.tree
	t.mu.Lock()
	c, ok := t.route[dst]
	l := t.children[c]
	t.mu.Unlock()
	if !ok {
		return fmt.Errorf("routed message for agent %d, which is not below this one", dst)
	}
	if l == nil {
		return nil // the child is gone; its parent (us) reported it
	}
	if c == dst {
		if typ == proto.MSpec && a.stage.Done {
			// The child's copy of the program goes before its job.
			if err := a.stage.Forward(l); err != nil {
				return err
			}
		}
		_ = l.Send(typ, inner)
	} else {
		_ = l.Send(proto.MRoute, p)
	}
	return nil
}

// bcastDown passes a broadcast to every child.
func (a *Agent) bcastDown(p []byte) {
	if a.tree == nil {
		return
	}
	t := a.tree
	t.mu.Lock()
	ls := make([]*proto.Link, 0, len(t.children))
	for _, l := range t.children {
		ls = append(ls, l)
	}
	t.mu.Unlock()
	proto.SendEach(ls, proto.MBcast, p)
}

// stopLaunching ends the starts still in progress; with closing set no
// child is accepted any more. It reports whether children are linked.
func (t *treeState) stopLaunching(closing bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancel != nil {
		t.cancel()
	}
	if closing {
		t.closing = true
	}
	return len(t.children) > 0
}

// waitChildren waits until every child's link ended, or d.
func (t *treeState) waitChildren(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		t.mu.Lock()
		n := len(t.children)
		t.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-t.changed:
		case <-timer.C:
			return
		}
	}
}

// linkPeer names the agent at the other end of l for people: its node,
// from the peer's certificate ("node node3"), else its index in the tree
// ("agent 3": a link without TLS, in tests).
func linkPeer(l *proto.Link, idx int) string {
	if c, ok := l.Conn.(net.Conn); ok {
		if name, err := secure.PeerName(c); err == nil && name != "" {
			return "node " + name
		}
	}
	return fmt.Sprintf("agent %d", idx)
}

// handleTree executes a message about the launch tree: routing and
// broadcasts through this agent, moves to backup or fallback parents, a
// child suspected lost.
func (a *Agent) handleTree(typ uint8, p []byte) error {
	switch typ {
	case proto.MRoute:
		return a.relayDown(p)
	case proto.MBcast:
		_, typ, inner, err := proto.Unwrap(p, false)
		if err != nil || typ == proto.MBcast || typ == proto.MRoute {
			return fmt.Errorf("broadcast message: bad envelope (%v)", err)
		}
		a.bcastDown(p)
		return a.handle(typ, inner)
	case proto.MSwitch:
		idx, err := proto.DecodeInt(p)
		if err != nil {
			return fmt.Errorf("switch message: %w", err)
		}
		if idx < 0 {
			a.switchNow()
		} else {
			a.switchChild(int(idx))
		}
	case proto.MSuspect:
		idx, err := proto.DecodeInt(p)
		if err != nil {
			return fmt.Errorf("suspect message: %w", err)
		}
		a.suspectChild(int(idx))
	case proto.MRoutes:
		r, err := proto.DecodeRoutes(p)
		if err != nil {
			return fmt.Errorf("routes message: %w", err)
		}
		a.addRoutes(r)
	case proto.MFallbacks:
		ps, err := proto.DecodePeers(p)
		if err != nil {
			return fmt.Errorf("fallbacks message: %w", err)
		}
		a.mu.Lock()
		a.par.fallbacks = ps
		a.mu.Unlock()
	case proto.MBackup:
		pa, err := proto.DecodePeerAddr(p)
		if err != nil {
			return fmt.Errorf("backup message: %w", err)
		}
		if a.tree != nil {
			a.connectBackup(a.ctx, a.wg, pa)
		}
	default:
		return fmt.Errorf("tree message: message type %d", typ)
	}
	return nil
}
