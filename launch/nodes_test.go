package launch

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/agent"
	"github.com/ftlaunch/ftlaunch/launch/alloc"
	"github.com/ftlaunch/ftlaunch/launch/client"
	"github.com/ftlaunch/ftlaunch/launch/output"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/root"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"github.com/ftlaunch/ftlaunch/raftstore"
)

// The in-process harness for several nodes: the root and one agent per
// host run in the test's own process, the agents started by a spawner of
// goroutines (agent.RunConnected, their bootstrap on a pipe as an SSH
// session's stdin) and linked to their parent over TCP with the job's
// mutual TLS, as agents on hosts are; the same spawner starts the
// children of interior agents (a launch tree), the agents a successor
// root starts, and fences. Each agent's link to its parent passes through
// a proxy of the test's (linkProxy) that can fall silent: a stopped or
// cut-off node. The ranks are real processes: this test binary in the
// role of a rank (rankRoleEnv), talking to its agent through the client
// library. The oracles are the root's typed events (root.Options.Observe,
// harness_test.go's observer) and the job's state log, checked with
// raftstore's invariants.

// rankRoleEnv makes this test binary a rank (TestMain): "allgather" has
// every rank publish its name, check the node table, allgather and print.
const rankRoleEnv = "FTLAUNCH_TEST_RANK_ROLE"

// gateEnv names the FIFO a "hold" rank writes to once it runs.
const gateEnv = "FTLAUNCH_TEST_GATE"

func TestMain(m *testing.M) {
	if role := os.Getenv(rankRoleEnv); role != "" {
		os.Exit(rankRole(role))
	}
	os.Exit(m.Run())
}

func rankRole(role string) int {
	if early, ok := strings.CutPrefix(os.Getenv(victimEnv), "early:"); ok {
		// Rank early's first incarnation fails before it opens the rank
		// protocol; the others wait for the test's word (gateEnv) before
		// they open it, so that no rank has when the failure is decided.
		first := os.Getenv("FTLAUNCH_INCARNATION") == "1"
		switch {
		case os.Getenv("FTLAUNCH_RANK") == early && first:
			return 7
		case os.Getenv("FTLAUNCH_RANK") != early:
			waitFile(os.Getenv(gateEnv))
		}
	}
	c, err := client.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rank:", err)
		return 1
	}
	me := fmt.Sprintf("rank%d", c.Rank())
	switch role {
	case "allgather":
		table, err := c.Publish([]byte(me))
		if err != nil {
			fmt.Fprintln(os.Stderr, "publish:", err)
			return 1
		}
		for r, v := range table {
			if string(v) != fmt.Sprintf("rank%d", r) {
				fmt.Fprintf(os.Stderr, "node table entry %d: %q\n", r, v)
				return 1
			}
		}
		vals, err := c.Allgather([]byte(fmt.Sprint(c.Rank() * c.Rank())))
		if err != nil {
			fmt.Fprintln(os.Stderr, "allgather:", err)
			return 1
		}
		fmt.Printf("%s sum %d\n", me, sumValues(vals))
		return 0
	case "hold": // tell the test it runs, then wait to be killed
		f, err := os.OpenFile(os.Getenv(gateEnv), os.O_WRONLY, 0)
		if err != nil {
			return 1
		}
		fmt.Fprintln(f, me)
		f.Close()
		select {}
	case "recover":
		return recoverRole(c, me)
	case "ringrecover":
		return ringRecoverRole(c, me)
	case "ringhold": // publish; enter the ring (the last rank once the test says); print the neighbours
		if _, err := c.Publish([]byte(me)); err != nil {
			fmt.Fprintln(os.Stderr, "publish:", err)
			return 1
		}
		if c.Rank() == c.Size()-1 {
			waitFile(os.Getenv(gateEnv))
		} else {
			_ = os.WriteFile(filepath.Join(os.Getenv(inRingEnv), fmt.Sprint(c.Rank())), nil, 0o600)
		}
		l, r, err := c.Ring([]byte(me))
		if err != nil {
			fmt.Fprintln(os.Stderr, "ring:", err)
			return 1
		}
		fmt.Printf("%s ring %s %s\n", me, l, r)
		return 0
	case "ring": // publish, then the ring exchange of the names, checked against the table
		table, err := c.Publish([]byte(me))
		if err != nil {
			fmt.Fprintln(os.Stderr, "publish:", err)
			return 1
		}
		l, r, err := c.Ring([]byte(me))
		if err != nil {
			fmt.Fprintln(os.Stderr, "ring:", err)
			return 1
		}
		n := c.Size()
		if string(l) != string(table[(c.Rank()-1+n)%n]) || string(r) != string(table[(c.Rank()+1)%n]) {
			fmt.Fprintf(os.Stderr, "%s: ring neighbours %q %q\n", me, l, r)
			return 1
		}
		fmt.Printf("%s ring %s %s\n", me, l, r)
		return 0
	case "fail1":
		if c.Rank() == 1 {
			return 7
		}
		// The others wait in a collective the failure ends.
		_, err := c.Allgather([]byte(me))
		if err == nil {
			fmt.Fprintln(os.Stderr, "allgather completed without rank 1")
			return 1
		}
		return 0
	}
	return 2
}

// goSpawner starts each host's agent as a goroutine of this process, and
// runs fences in process.
type goSpawner struct {
	ctx    context.Context
	mu     sync.Mutex
	log    bytes.Buffer
	agents map[string]*goSession // by host, the latest
	all    []*goSession          // every agent started, in order
	// resume is how a replica agent takes over as root (nil: it cannot).
	resume agent.Resume
	wg     sync.WaitGroup
	joins  *joins // the collectives each agent's ranks all called
}

func (s *goSpawner) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.Write(p)
}

func (s *goSpawner) Start(fctx context.Context, host string, argv []string, stdin []byte) (spawn.Session, error) {
	if len(argv) >= 6 && argv[2] == "--fence" {
		return s.fence(fctx, argv[3], argv[4], argv[5])
	}
	ctx, cancel := context.WithCancel(s.ctx)
	sess := &goSession{host: host, cancel: cancel, done: make(chan struct{})}
	// The agent reaches its parent through a proxy of its own: the
	// bootstrap names the proxy's port instead of the parent's.
	b, err := proto.ReadBootstrap(bytes.NewReader(stdin))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("in-process agent on %s: %w", host, err)
	}
	sess.node, sess.inc = cmp.Or(b.Node, host), max(b.Inc, 1)
	if sess.proxy, err = newLinkProxy(net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))); err != nil {
		cancel()
		return nil, err
	}
	b.Port = sess.proxy.port()
	stdin = b.Encode()
	pr, pw := io.Pipe()
	sess.stdin = pw
	s.mu.Lock()
	s.agents[host] = sess
	s.all = append(s.all, sess)
	s.mu.Unlock()
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		defer close(sess.done)
		defer sess.proxy.close()
		sess.code = agent.RunConnected(ctx, agent.ConnectConfig{Stdin: pr, Node: host, Stderr: s, Began: time.Now(),
			// The root listens on every address: the agent comes "from" SSH
			// on the loopback.
			Getenv: func(k string) string {
				if k == "SSH_CONNECTION" {
					return "127.0.0.1 1 127.0.0.1 22"
				}
				return os.Getenv(k)
			},
			Spawner: s, Resume: s.resume, Joined: s.joins.of(host)})
		pr.Close()
	}()
	go func() { // the bootstrap; then stdin stays open until Close
		defer s.wg.Done()
		_, _ = pw.Write(stdin)
	}()
	go func() { // the proxy's, until the agent ended
		defer s.wg.Done()
		sess.proxy.serve()
	}()
	return sess, nil
}

// fence is `ftlaunch agent --fence JOB NODE UPTO` in process: the agents
// of node up to that incarnation are ended (their context cancelled: each
// kills its ranks), as launch/fence kills them on a host. (launch/fence
// itself would kill this process: every in-process agent registers its
// pid.) It waits for them to end until ctx ends (the fence's bound).
func (s *goSpawner) fence(ctx context.Context, job, node, upTo string) (spawn.Session, error) {
	inc, err := strconv.ParseUint(upTo, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("fence %s: incarnation %q", node, upTo)
	}
	var ended []*goSession
	s.mu.Lock()
	for _, g := range s.all {
		if g.node == node && g.inc <= inc {
			ended = append(ended, g)
		}
	}
	s.mu.Unlock()
	for _, g := range ended {
		g.cancel()
		select {
		case <-g.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("fence %s: agent incarnation %d still running: %w", node, g.inc, ctx.Err())
		}
	}
	return &doneSession{out: fmt.Sprintf("fenced job %s on node %s up to incarnation %d: %d agent(s)\n", job, node, inc, len(ended))}, nil
}

// release closes what silent links held open, once every agent ended.
func (s *goSpawner) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.all {
		g.proxy.release()
	}
}

func (s *goSpawner) agent(host string) *goSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agents[host]
}

// goSession is an agent goroutine's session.
type goSession struct {
	host, node string
	inc        uint64
	proxy      *linkProxy // its link to its parent passes here
	stdin      *io.PipeWriter
	cancel     context.CancelFunc // kills the agent at once (its context)
	done       chan struct{}
	code       int
}

// kill ends the agent as SIGKILL would: its links to its parent end at
// once with nothing more said, then its context is cancelled (it kills
// its ranks, and its children's links end).
func (g *goSession) kill() {
	g.proxy.kill()
	g.cancel()
}

func (g *goSession) Stdout() io.Reader      { return strings.NewReader("") }
func (g *goSession) Stderr() io.Reader      { return strings.NewReader("") }
func (g *goSession) Timings() spawn.Timings { return spawn.Timings{Attempts: 1} }
func (g *goSession) Close() error           { return g.stdin.Close() }
func (g *goSession) Wait() error {
	<-g.done
	if g.code != 0 {
		return fmt.Errorf("agent exited with code %d", g.code)
	}
	return nil
}

// doneSession is a session that ran already (a fence): out is its stdout.
type doneSession struct{ out string }

func (d *doneSession) Stdout() io.Reader      { return strings.NewReader(d.out) }
func (d *doneSession) Stderr() io.Reader      { return strings.NewReader("") }
func (d *doneSession) Timings() spawn.Timings { return spawn.Timings{Attempts: 1} }
func (d *doneSession) Close() error           { return nil }
func (d *doneSession) Wait() error            { return nil }

// linkProxy forwards an agent's connections to its parent's listener,
// until silence: then it forwards nothing more, in either direction, and
// closes nothing (a stopped node, or one cut off); the parent's side of a
// silent link stays open after the agent's end, as a stopped node's
// socket does, until the parent gives up on it or release.
type linkProxy struct {
	ln     net.Listener
	target string
	silent chan struct{} // closed: forward nothing
	done   chan struct{} // closed by close
	once   sync.Once
	mu     sync.Mutex
	agents []net.Conn // the agent's side of each connection
	ups    []net.Conn // the parent's side of each connection
	held   []net.Conn // the parent's side of silent connections
	closed bool
	cut    bool // ended at once (kill)
	wg     sync.WaitGroup
}

func newLinkProxy(target string) (*linkProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("link proxy: %w", err)
	}
	return &linkProxy{ln: ln, target: target, silent: make(chan struct{}), done: make(chan struct{})}, nil
}

func (p *linkProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// hush makes the link fall silent.
func (p *linkProxy) hush() { p.once.Do(func() { close(p.silent) }) }

func (p *linkProxy) isSilent() bool {
	select {
	case <-p.silent:
		return true
	default:
		return false
	}
}

// serve forwards connections until close; it joins its goroutines.
func (p *linkProxy) serve() {
	defer p.wg.Wait()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil || !p.track(c, up) {
			c.Close()
			if up != nil {
				up.Close()
			}
			continue
		}
		var pair sync.WaitGroup // both directions: then both sides are closed
		pair.Add(2)
		p.wg.Add(3)
		go func() { defer p.wg.Done(); defer pair.Done(); p.copy(up, c) }()
		go func() { defer p.wg.Done(); defer pair.Done(); p.copy(c, up) }()
		go func() {
			defer p.wg.Done()
			pair.Wait()
			c.Close()
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.isSilent() && !p.cut {
				p.held = append(p.held, up)
				return
			}
			up.Close()
		}()
	}
}

// track keeps both sides of a connection for close and kill; false once
// closed.
func (p *linkProxy) track(c, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.agents, p.ups = append(p.agents, c), append(p.ups, up)
	return true
}

// kill ends every connection at once, both sides, forwarding nothing
// more: what the parent sees of a killed process's sockets. (An agent
// whose context is cancelled says its dying words first: its children's
// links ended, its ranks' ends; a killed one says nothing.)
func (p *linkProxy) kill() {
	p.mu.Lock()
	p.cut = true
	conns := append(slices.Clone(p.agents), p.ups...)
	p.mu.Unlock()
	p.hush()
	for _, c := range conns {
		c.Close()
	}
}

// copy forwards from src to dst until src's end, which it passes on
// (dst's write side closed: what the other direction carries still
// arrives). Once a write fails (dst's reader is gone) it reads src to its
// end and drops it: a socket closed with unread data resets the
// connection, and the peer's reset drops what it had not read yet (an
// agent's last words, its done). Once silent, it forwards nothing more
// and returns at close.
func (p *linkProxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	gone := false // dst's reader is gone
	for {
		n, err := src.Read(buf)
		if p.isSilent() {
			<-p.done // what it read is dropped
			return
		}
		if n > 0 && !gone {
			_, werr := dst.Write(buf[:n])
			gone = werr != nil
		}
		if err != nil {
			if !gone {
				_ = dst.(*net.TCPConn).CloseWrite()
			}
			return
		}
	}
}

// close ends the proxy once the agent ended: no new connection; a silent
// one's copiers return. A live connection ends as the agent closed it
// (proto.Link.Run closes its connection): closing the proxy's side here
// would drop what the agent wrote last and the proxy had not read yet
// (its done, so that its parent would find it lost).
func (p *linkProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	close(p.done)
	p.ln.Close()
}

// release closes the parent's side of silent connections, once serve
// returned.
func (p *linkProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.held {
		c.Close()
	}
	p.held = nil
}

// nodesJob is one job run on in-process nodes.
type nodesJob struct {
	res            root.Result
	err            error
	stdout, stderr bytes.Buffer
	state          *raftstore.State
	sp             *goSpawner
	obs            *observer // the root's events (Options.Observe), and a successor's
	ctx            context.Context
	stateDir       string
}

// runOnNodes runs a job of ppn ranks on each of hosts, in process (a flat
// tree unless opts.Tree says otherwise; opts.Spares are hosts too). ready,
// if set, runs in a goroutine of its own while the job runs.
func runOnNodes(t *testing.T, hosts []string, ppn int, opts Options, ready func(*nodesJob)) *nodesJob {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second) // a hang's bound, not a pass's
	defer cancel()
	j := &nodesJob{obs: newObserver(), ctx: ctx}
	j.sp = &goSpawner{ctx: ctx, agents: map[string]*goSession{}, resume: j.obs.resume, joins: newJoins()}
	if opts.Observe == nil {
		opts.Observe = j.obs.observe
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opts.N = len(hosts) * ppn
	opts.Argv = []string{exe}
	opts.Env = append(os.Environ(), opts.Env...)
	opts.StateDir = t.TempDir()
	j.stateDir = opts.StateDir
	t.Cleanup(func() {
		if t.Failed() {
			// A replica agent's failover trace: nobody reads its stderr
			// once the front-end is gone (launch/agent's traceFailover).
			logs, _ := filepath.Glob(filepath.Join(j.stateDir, "*", "failover.*.log"))
			// A successor's log (its front-end's stderr).
			succ, _ := filepath.Glob(filepath.Join(j.stateDir, "*", output.JobOutput, output.JobLog))
			logs = append(logs, succ...)
			for _, f := range logs {
				b, _ := os.ReadFile(f)
				t.Logf("%s:\n%s", filepath.Base(f), b)
			}
		}
	})
	opts.Stdout, opts.Stderr = &j.stdout, &j.stderr
	opts.Agents.Spawner, opts.Agents.Launcher, opts.Tree = j.sp, "ssh", cmp.Or(opts.Tree, "flat")
	var allocated alloc.Allocation
	for _, h := range hosts {
		allocated.Hosts = append(allocated.Hosts, alloc.Host{Name: h})
	}
	if opts.Placement, err = alloc.Place(allocated, alloc.Request{NP: opts.N}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	if ready != nil {
		wg.Add(1)
		go func() { defer wg.Done(); ready(j) }()
	}
	j.res, j.err = Run(ctx, opts)
	wg.Wait()
	// Every agent goroutine ended with the job (the root closed their
	// sessions): the spawner's goroutines are joined, or the test hangs.
	done := make(chan struct{})
	go func() { j.sp.wg.Wait(); j.sp.release(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		var stacks strings.Builder
		pprof.Lookup("goroutine").WriteTo(&stacks, 1) // where the agents wait
		t.Fatalf("agents still running 30 s after the job's end; their log:\n%s\ngoroutines:\n%s", j.sp.log.String(), stacks.String())
	}
	j.state = readState(t, opts.StateDir)
	return j
}

func TestNodesInProcessCollectives(t *testing.T) {
	hosts := []string{"nodeA", "nodeB", "nodeC"}
	j := runOnNodes(t, hosts, 2, Options{Env: []string{rankRoleEnv + "=allgather"}, Label: true}, nil)
	if j.err != nil || j.res.ExitCode != 0 {
		t.Fatalf("exit %d, %v; stderr %s; agents:\n%s", j.res.ExitCode, j.err, j.stderr.String(), j.sp.log.String())
	}
	// 0²+…+5² = 55, on every rank.
	for r := range 6 {
		if want := fmt.Sprintf("[%d] rank%d sum 55\n", r, r); !strings.Contains(j.stdout.String(), want) {
			t.Errorf("stdout lacks %q: %q", want, j.stdout.String())
		}
	}
	st := j.state
	if !st.Status.Done || st.Status.ExitCode != 0 || len(st.Ranks) != 6 {
		t.Fatalf("status %+v, %d ranks", st.Status, len(st.Ranks))
	}
	for _, r := range st.Ranks {
		if r.State != raftstore.RankExited || r.ExitCode != 0 || r.Node != hosts[r.Rank/2] {
			t.Errorf("rank %+v", r)
		}
	}
	noRankLeft(t, st)
}

// The ring exchange on a launch tree (kary:2 over seven nodes of two
// ranks: subtrees of several runs of ranks): every rank gets its
// neighbours' values, the scan's both ways (docs/collectives.md).
func TestNodesInProcessRing(t *testing.T) {
	hosts := []string{"nodeA", "nodeB", "nodeC", "nodeD", "nodeE", "nodeF", "nodeG"}
	j := runOnNodes(t, hosts, 2, Options{Env: []string{rankRoleEnv + "=ring"}, Label: true, Tree: "kary:2"}, nil)
	if j.err != nil || j.res.ExitCode != 0 {
		t.Fatalf("exit %d, %v; stderr %s; agents:\n%s", j.res.ExitCode, j.err, j.stderr.String(), j.sp.log.String())
	}
	n := 2 * len(hosts)
	for r := range n {
		if want := fmt.Sprintf("[%d] rank%d ring rank%d rank%d\n", r, r, (r-1+n)%n, (r+1)%n); !strings.Contains(j.stdout.String(), want) {
			t.Errorf("stdout lacks %q: %q", want, j.stdout.String())
		}
	}
	noRankLeft(t, j.state)
}

func TestNodesInProcessRankFails(t *testing.T) {
	j := runOnNodes(t, []string{"nodeA", "nodeB"}, 2, Options{Env: []string{rankRoleEnv + "=fail1"}}, nil)
	if j.err != nil || j.res.ExitCode != 7 {
		t.Fatalf("exit %d, %v; stderr %s", j.res.ExitCode, j.err, j.stderr.String())
	}
	if !strings.Contains(j.stderr.String(), "rank 1 on node nodeA") || !strings.Contains(j.state.Status.Message, "rank 1") {
		t.Fatalf("stderr %q, status %+v", j.stderr.String(), j.state.Status)
	}
	noRankLeft(t, j.state)
}

// An agent lost mid-job (its goroutine's context cancelled: it kills its
// ranks and its link drops) ends the job naming its node; the other
// agent and every rank are gone at the end.
func TestNodesInProcessAgentLost(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "running")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // a reader still waiting (no rank ran) is let go
		if f, err := os.OpenFile(gate, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	j := runOnNodes(t, []string{"nodeA", "nodeB"}, 1, Options{Env: []string{rankRoleEnv + "=hold", gateEnv + "=" + gate}}, func(j *nodesJob) {
		// Both ranks opened the FIFO: both agents run their ranks.
		for seen := 0; seen < 2; {
			f, err := os.Open(gate) // returns once a rank opened it
			if err != nil {
				return
			}
			b, _ := io.ReadAll(f)
			f.Close()
			seen += bytes.Count(b, []byte("\n"))
		}
		j.sp.agent("nodeB").cancel()
	})
	if j.err != nil || j.res.ExitCode != root.ExitLauncher {
		t.Fatalf("exit %d, %v; stderr %s", j.res.ExitCode, j.err, j.stderr.String())
	}
	if !strings.Contains(j.stderr.String(), "lost the agent of node nodeB") || !strings.Contains(j.state.Status.Message, "nodeB") {
		t.Fatalf("stderr %q, status %+v", j.stderr.String(), j.state.Status)
	}
	noRankLeft(t, j.state)
}

// A job that runs into --timeout inside a collective says which agents
// the collective waited for: on three nodes of two ranks, every rank but
// the last (nodeC's second) enters the ring exchange, the last waits for
// a file no one writes, and at the timeout the root reports the ring
// open, waiting for nodeC.
func TestNodesTimeoutNamesOpenCollective(t *testing.T) {
	hosts := []string{"nodeA", "nodeB", "nodeC"}
	never := filepath.Join(t.TempDir(), "never")
	opts := Options{Env: []string{rankRoleEnv + "=ringhold", inRingEnv + "=" + t.TempDir(), gateEnv + "=" + never}, Label: true, Timeout: 3 * time.Second}
	j := runOnNodes(t, hosts, 2, opts, nil)
	if j.res.ExitCode != ExitTimeout {
		t.Fatalf("exit %d, %v, want %d (timeout); stderr %s", j.res.ExitCode, j.err, ExitTimeout, j.stderr.String())
	}
	var open []root.OpenAtTimeout
	for _, ev := range j.obs.events() {
		if o, ok := ev.(root.OpenAtTimeout); ok {
			open = append(open, o)
		}
	}
	if len(open) != 1 || open[0].Kind != "ring" || !slices.Contains(open[0].Missing, "nodeC") {
		t.Fatalf("open collectives at the timeout: %+v, want the ring waiting for nodeC", open)
	}
}
