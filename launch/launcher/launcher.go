package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"github.com/ftlaunch/ftlaunch/launch/sshspawn"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// The launch tree. The front-end starts the plan's first-level agents; each
// agent starts its own children (over the same mechanism: SSH, or local
// processes for --test-nodes), accepts their connections back on its
// listener, and relays between them and its parent:
//
//   - up, a child's frame travels wrapped as mFrom{child, type, payload}
//     (an mFrom from deeper down is passed on unchanged), so the front-end
//     sees every agent's messages as if it were linked to each;
//   - down, mRoute{dst, type, payload} is passed towards dst along the
//     plan, and mBcast{type, payload} goes to every agent of the subtree.
//
// An agent reports each child's start to the front-end (mChildUp, with its
// timings, or mChildFailed) and the end of a child's link (mChildGone). The
// front-end then sends the child its share of the job along the tree.

// helloTimeout bounds how long a listener waits for a new connection's
// first frame.
const helloTimeout = 10 * time.Second

// LaunchResult is one child's start, as its launcher saw it: connected
// (link set) or failed (err set).
type LaunchResult struct {
	Child *proto.ChildSpec
	Sess  spawn.Session
	Link  *proto.Link
	Up    proto.ChildUp
	Err   error
}

// GroupSpawner starts one command on many hosts with the same stdin.
type GroupSpawner interface {
	StartGroup(ctx context.Context, hosts []string, argv []string, stdin []byte) (spawn.Session, error)
}

// Launcher starts a parent's children with a spawner and waits for each to
// connect back to the parent's listener.
type Launcher struct {
	sp     spawn.Spawner
	argv   []string
	port   int      // the parent's listening port, for the bootstraps
	hosts  []string // the parent's addresses beyond SSH_CONNECTION's
	batch  int      // 0: start every child at once
	Parent string   // the parent's certificate name ("": the front-end)
	Job    string   // the job's ID, for the children's fence records (bootstrap)
	// Group, if set, starts all the children in one call (one srun step)
	// with one bootstrap that holds every child's credentials.
	Group    GroupSpawner
	children []proto.ChildSpec
	Logf     func(format string, args ...any)

	mu      sync.Mutex
	waiting map[string]awaited // children started and not yet connected, by name
	// sessions are the goroutines that watch the sessions it started
	// (watch: their output and their end); Wait joins them.
	sessions sync.WaitGroup
}

// awaited is a child started and not yet connected: the incarnation it
// was started as, and where its connection goes.
type awaited struct {
	inc uint64
	ch  chan acceptedConn
}

type acceptedConn struct {
	conn  net.Conn
	hello proto.Hello
}

func NewLauncher(sp spawn.Spawner, argv []string, port int, hosts []string, batch int, children []proto.ChildSpec) *Launcher {
	return &Launcher{sp: sp, argv: argv, port: port, hosts: hosts, batch: batch, children: children, waiting: map[string]awaited{}}
}

// Run starts the children in plan order, in batches when batch > 0, and
// calls report once per child from its own goroutine. It returns when
// every child connected or failed; cancelling ctx ends the starts still in
// progress (they are reported as failed).
func (l *Launcher) Run(ctx context.Context, report func(LaunchResult)) {
	begin := time.Now()
	if l.Group != nil && len(l.children) > 0 {
		l.runGroup(ctx, begin, report)
		return
	}
	step := len(l.children)
	if l.batch > 0 {
		step = l.batch
	}
	for lo := 0; lo < len(l.children); lo += step {
		hi := min(lo+step, len(l.children))
		var wg sync.WaitGroup
		for i := lo; i < hi; i++ {
			c := &l.children[i]
			ch := l.Expect(c.Name, c.Inc)
			wg.Add(1)
			go func() {
				defer wg.Done()
				report(l.Start(ctx, c, ch, begin))
			}()
		}
		wg.Wait()
	}
}

// Expect registers a child whose connection back is awaited, started as
// incarnation inc.
func (l *Launcher) Expect(name string, inc uint64) chan acceptedConn {
	ch := make(chan acceptedConn, 1)
	l.mu.Lock()
	l.waiting[name] = awaited{inc: max(inc, 1), ch: ch}
	l.mu.Unlock()
	return ch
}

// Start starts one child in a session of its own on its host
// (recovery.HostOf: a second agent on a surviving host is named
// host+node) and waits for it.
func (l *Launcher) Start(ctx context.Context, c *proto.ChildSpec, ch chan acceptedConn, begin time.Time) LaunchResult {
	boot := (&proto.Bootstrap{Creds: c.Creds, Port: l.port, Hosts: l.hosts, Idx: c.Idx, Parent: l.Parent, Inc: c.Inc, Job: l.Job, Node: c.Name}).Encode()
	argv := proto.AgentArgs{Node: c.Name, Job: l.Job, Inc: max(c.Inc, 1)}.Argv(l.argv)
	sess, err := l.sp.Start(ctx, recovery.HostOf(c.Name), argv, boot)
	if err != nil {
		l.forget(c.Name)
		return LaunchResult{Child: c, Err: fmt.Errorf("start the agent on %s: %w", c.Name, err)}
	}
	res := l.await(ctx, c, ch, sess, l.watch(sess), begin)
	if res.Err != nil {
		_ = sess.Close()
	}
	return res
}

// runGroup starts every child with one group start and waits for each to
// connect back; the children share the session.
func (l *Launcher) runGroup(ctx context.Context, begin time.Time, report func(LaunchResult)) {
	boot := &proto.Bootstrap{Port: l.port, Hosts: l.hosts, Parent: l.Parent, Job: l.Job}
	hosts := make([]string, len(l.children))
	chans := make([]chan acceptedConn, len(l.children))
	for i, c := range l.children {
		hosts[i] = recovery.HostOf(c.Name)
		boot.Group = append(boot.Group, proto.GroupEntry{Name: c.Name, Idx: c.Idx, Creds: c.Creds})
		chans[i] = l.Expect(c.Name, c.Inc)
	}
	// The group's bootstrap carries no incarnation: its agents are first
	// incarnations, and may register with the fence from their command
	// line (each knows its node from its environment).
	argv := l.argv
	if !slices.ContainsFunc(l.children, func(c proto.ChildSpec) bool { return c.Inc > 1 }) {
		argv = proto.AgentArgs{Job: l.Job, Inc: 1}.Argv(argv)
	}
	sess, err := l.Group.StartGroup(ctx, hosts, argv, boot.Encode())
	if err != nil {
		for i := range l.children {
			l.forget(l.children[i].Name)
			report(LaunchResult{Child: &l.children[i], Err: fmt.Errorf("start the agents on %s: %w", strings.Join(hosts, ","), err)})
		}
		return
	}
	ended := l.watch(sess)
	share := newGroupShare(sess, len(l.children))
	var wg sync.WaitGroup
	for i := range l.children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := share.member()
			res := l.await(ctx, &l.children[i], chans[i], m, ended, begin)
			if res.Err != nil {
				_ = m.Close() // a child that did not start holds no share
			}
			report(res)
		}()
	}
	wg.Wait()
}

// watch drains a started session's output (its stderr to the log) and
// returns a channel closed when the session ends.
func (l *Launcher) watch(sess spawn.Session) <-chan struct{} {
	ended := make(chan struct{})
	l.sessions.Add(3)
	go func() { defer l.sessions.Done(); forwardLines(sess.Stderr(), l.Logf) }()
	go func() { defer l.sessions.Done(); _, _ = io.Copy(io.Discard, sess.Stdout()) }()
	go func() {
		defer l.sessions.Done()
		_ = sess.Wait()
		close(ended)
	}()
	return ended
}

// Wait joins the goroutines that watch the sessions the launcher started
// (their output, their end), waiting at most d, and reports whether every
// one ended. Its owner calls it once the sessions were closed or killed
// (they end with them); a session that does not end (an SSH connection
// that hangs) is left to the process's exit rather than holding it up.
func (l *Launcher) Wait(d time.Duration) bool {
	done := make(chan struct{})
	go func() { // ends with the last session's watchers
		l.sessions.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// SessionsWait bounds an owner's Wait for its launcher's sessions once
// it closed them.
const SessionsWait = time.Second

// await waits for child c, started in sess, to connect back: it is up,
// or its session ended first, or the connect timeout or ctx ended.
func (l *Launcher) await(ctx context.Context, c *proto.ChildSpec, ch chan acceptedConn, sess spawn.Session, ended <-chan struct{}, begin time.Time) LaunchResult {
	defer l.forget(c.Name)
	timer := time.NewTimer(proto.ConnectTimeout + 5*time.Second)
	defer timer.Stop()
	select {
	case ac := <-ch:
		t := sess.Timings()
		up := proto.ChildUp{Idx: c.Idx, SSH: t.Total, Queued: t.Queued, Attempts: t.Attempts, Up: time.Since(begin), Init: ac.hello.Init}
		if ta, ok := ac.conn.RemoteAddr().(*net.TCPAddr); ok {
			up.Addr = net.JoinHostPort(ta.IP.String(), fmt.Sprint(ac.hello.Port))
		}
		return LaunchResult{Child: c, Sess: sess, Link: proto.NewLink(ac.conn), Up: up}
	case <-ended:
		err := sess.Wait() // ended: returns at once
		if err == nil {
			err = errors.New("exited")
		}
		return LaunchResult{Child: c, Err: fmt.Errorf("the agent on %s ended before it connected back: %w", c.Name, err)}
	case <-timer.C:
		return LaunchResult{Child: c, Err: fmt.Errorf("the agent on %s did not connect back within %v", c.Name, proto.ConnectTimeout+5*time.Second)}
	case <-ctx.Done():
		return LaunchResult{Child: c, Err: fmt.Errorf("start the agent on %s: %w", c.Name, ctx.Err())}
	}
}

// forget stops awaiting a child.
func (l *Launcher) forget(name string) {
	l.mu.Lock()
	delete(l.waiting, name)
	l.mu.Unlock()
}

// deliver hands a primary child's connection to its waiting start; it
// reports false for a caller nobody waits for, or another incarnation of
// the node's agent than the one started (one that was declared lost).
func (l *Launcher) deliver(name string, ac acceptedConn) bool {
	l.mu.Lock()
	w, ok := l.waiting[name]
	if ok && w.inc == max(ac.hello.Inc, 1) {
		delete(l.waiting, name)
	}
	l.mu.Unlock()
	if !ok || w.inc != max(ac.hello.Inc, 1) {
		return false
	}
	w.ch <- ac
	return true
}

// AcceptLoop accepts connections on ln until it is closed: a primary child
// goes to its start in l, a standby link (a node whose backup parent we
// are) to standby, which may be nil (refused). It returns once the
// handshakes it started ended (each within helloTimeout).
func AcceptLoop(ln net.Listener, l *Launcher, standby func(net.Conn, proto.Hello), adopt func(net.Conn, proto.Hello)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			name, _ := secure.PeerName(conn)
			_ = conn.SetReadDeadline(time.Now().Add(helloTimeout))
			f, err := wire.ReadFrame(conn, 1024)
			_ = conn.SetReadDeadline(time.Time{})
			if err != nil || f.Type != proto.MHello {
				conn.Close()
				return
			}
			h, err := proto.DecodeHello(f.Payload)
			if err != nil {
				conn.Close()
				return
			}
			switch {
			case h.Backup && standby != nil:
				standby(conn, h)
			case (h.Adopt || h.Control) && adopt != nil:
				// A control request (ftlaunch cancel) goes where an
				// adoption does: to the root, if one runs here.
				adopt(conn, h)
			case !h.Backup && l != nil && l.deliver(name, acceptedConn{conn: conn, hello: h}):
			default:
				conn.Close()
			}
		}()
	}
}

// forwardLines passes r's lines to logf (or discards them).
func forwardLines(r io.Reader, logf func(string, ...any)) {
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 4096)
	for {
		n, err := r.Read(tmp)
		buf = append(buf, tmp[:n]...)
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			if logf != nil {
				logf("%s", buf[:i])
			}
			buf = buf[i+1:]
		}
		if err != nil {
			if len(buf) > 0 && logf != nil {
				logf("%s", buf)
			}
			return
		}
	}
}

// sshSpawner adapts *sshspawn.Spawner to spawn.Spawner.
type sshSpawner struct{ sp *sshspawn.Spawner }

func (s sshSpawner) Start(ctx context.Context, host string, argv []string, stdin []byte) (spawn.Session, error) {
	sess, err := s.sp.Start(ctx, host, argv, stdin)
	if err != nil {
		return nil, err
	}
	return sshSession{sess}, nil
}

type sshSession struct{ *sshspawn.Session }

func (s sshSession) Timings() spawn.Timings {
	t := s.Session.Timings()
	return spawn.Timings{Total: t.Total, Queued: t.Queued, Attempts: t.Attempts}
}

// SSHSpawner returns sp as a spawn.Spawner.
func SSHSpawner(sp *sshspawn.Spawner) spawn.Spawner { return sshSpawner{sp} }

// LocalSpawner starts agents as processes on this machine (test nodes).
// delay holds test-only start delays by node name (newLocalSpawner).
type LocalSpawner struct {
	delay    map[string]startDelay
	delaySet string // delayEnv's value, passed on to the agents it starts
}

// startDelay holds an agent's start for a while, or until a file exists.
type startDelay struct {
	d    time.Duration
	gate string
}

// delayEnv names the test nodes whose agents start late, with how late or
// until when ("node2=4s,node4=/tmp/t/go": 4 s, until /tmp/t/go exists): a
// launch that lasts, for tests of what happens during one. Only test nodes
// (local agents) honour it, and they pass it on to the agents they start.
const delayEnv = "FTLAUNCH_TEST_DELAY_START"

// NewLocalSpawner returns a local spawner with the delays of delayEnv: the
// one place the test hook is read.
func NewLocalSpawner() (LocalSpawner, error) {
	v := os.Getenv(delayEnv)
	if v == "" {
		return LocalSpawner{}, nil
	}
	sp := LocalSpawner{delay: map[string]startDelay{}, delaySet: v}
	for _, item := range strings.Split(v, ",") {
		name, ds, ok := strings.Cut(item, "=")
		if ok && strings.HasPrefix(ds, "/") {
			sp.delay[name] = startDelay{gate: ds}
			continue
		}
		d, err := time.ParseDuration(ds)
		if !ok || err != nil || d < 0 {
			return sp, fmt.Errorf("%s: %q is not NODE=DURATION or NODE=/FILE", delayEnv, item)
		}
		sp.delay[name] = startDelay{d: d}
	}
	return sp, nil
}

// wait holds a start as the delay says, or until ctx ends.
func (sd startDelay) wait(ctx context.Context) {
	if sd.gate == "" {
		select {
		case <-time.After(sd.d):
		case <-ctx.Done():
		}
		return
	}
	for {
		if _, err := os.Stat(sd.gate); err == nil {
			return
		}
		select {
		case <-time.After(50 * time.Millisecond): // polling for the file
		case <-ctx.Done():
			return
		}
	}
}

type localSession struct {
	cmd            *exec.Cmd
	stdin          *os.File
	stdout, stderr *os.File
	t              spawn.Timings
	once           sync.Once
	waitErr        error
	waitOnce       sync.Once
}

func (sp LocalSpawner) Start(ctx context.Context, host string, argv []string, stdin []byte) (spawn.Session, error) {
	if sd, ok := sp.delay[host]; ok {
		sd.wait(ctx)
	}
	begin := time.Now()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	if sp.delaySet != "" {
		cmd.Env = append(cmd.Env, delayEnv+"="+sp.delaySet)
	}
	// Its own process group: a terminal's signals reach only the front-end.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	inW, outR, errR, err := spawn.StartPiped(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s for %s: %w", argv[0], host, err)
	}
	s := &localSession{cmd: cmd, stdin: inW, stdout: outR, stderr: errR}
	if _, err := inW.Write(stdin); err != nil {
		s.Close()
		return nil, fmt.Errorf("write the bootstrap of %s: %w", host, err)
	}
	s.t = spawn.Timings{Total: time.Since(begin), Attempts: 1}
	return s, nil
}

func (s *localSession) Stdout() io.Reader      { return s.stdout }
func (s *localSession) Stderr() io.Reader      { return s.stderr }
func (s *localSession) Timings() spawn.Timings { return s.t }
func (s *localSession) Close() error           { s.once.Do(func() { s.stdin.Close() }); return nil }
func (s *localSession) Wait() error {
	s.waitOnce.Do(func() {
		s.waitErr = s.cmd.Wait()
		s.Close()
	})
	return s.waitErr
}

// FenceTimeout bounds a fence: a node that does not answer its spawner
// within it (crashed, cut off) is left to fence itself (docs/recovery.md,
// "Fencing").
const FenceTimeout = 5 * time.Second

// Fence runs `ftlaunch agent --fence JOB NODE UPTO` on node's host
// (recovery.HostOf) with the spawner that starts agents there, in a
// session of its own, and returns what it reports: the agent
// incarnations up to upTo of node and their ranks are killed there. It
// ends within FenceTimeout.
func (l *Launcher) Fence(ctx context.Context, job, node string, upTo uint64) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, FenceTimeout)
	defer cancel()
	host := recovery.HostOf(node)
	if _, ssh := l.sp.(sshSpawner); !ssh {
		// A local process or an srun step reaches its node at once or
		// fails fast: the fence is waited for (docs/recovery.md,
		// "Fencing").
		spawn.Reached(ctx)
	}
	argv := []string{l.argv[0], "agent", "--fence", job, node, strconv.FormatUint(upTo, 10)}
	sess, err := l.sp.Start(ctx, host, argv, nil)
	if err != nil {
		return "", fmt.Errorf("fence node %s: %w", node, err)
	}
	var out, errOut bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(&out, io.LimitReader(sess.Stdout(), 4096)) }()
	go func() { defer wg.Done(); _, _ = io.Copy(&errOut, io.LimitReader(sess.Stderr(), 4096)) }()
	ended := make(chan error, 1)
	go func() {
		wg.Wait()
		ended <- sess.Wait()
	}()
	select {
	case err = <-ended:
	case <-ctx.Done():
		KillSession(sess)
		<-ended
		return "", fmt.Errorf("fence node %s on %s: no answer within %v", node, host, FenceTimeout)
	}
	_ = sess.Close()
	if err != nil {
		return "", fmt.Errorf("fence node %s on %s: %w: %s", node, host, err, strings.TrimSpace(errOut.String()))
	}
	return strings.TrimSpace(out.String()), nil
}
