package launch

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftlaunch/ftlaunch/launch/alloc"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/launch/sshspawn"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
)

// Exit codes of ftlaunch itself (a rank's failure is reported with the
// rank's own code).
const (
	ExitLauncher = 1   // ftlaunch failed: an agent could not start or was lost
	ExitUsage    = 2   // bad command line
	ExitTimeout  = 124 // --timeout expired
)

// Options describe one job run from this machine.
type Options struct {
	N         int           // number of ranks
	Argv      []string      // program and its arguments
	Env       []string      // the ranks' environment
	Wdir      string        // the ranks' working directory
	Label     bool          // prefix output lines with "[rank] "
	OutputDir string        // if set, write rank.R.out / rank.R.err there instead
	KillAfter time.Duration // SIGTERM to SIGKILL delay when terminating
	Timeout   time.Duration // whole-job limit (0: none)
	Verbose   bool
	TestNodes int    // local agents posing as nodes; 0 or 1: one agent for this machine
	AgentPath string // the ftlaunch executable agents run from (on every node)

	// Placement puts the ranks on hosts, whose agents SSH starts (nil: this
	// machine). SSH is required with a placement.
	Placement *alloc.Placement
	SSH       *sshspawn.Spawner
	Heartbeat time.Duration

	Stdin          *os.File // forwarded to rank 0 (nil: none)
	Stdout, Stderr io.Writer
	Signals        <-chan os.Signal // signals to forward to every rank
}

// Result is how a job ended.
type Result struct {
	ExitCode int
	// NodeTableAt is when every rank held the node table, measured from
	// Run's start (0 if the job never published one).
	NodeTableAt time.Duration
}

// frontend is the root of a local job. All its fields are owned by the
// goroutine running loop.
type frontend struct {
	opts  Options
	start time.Time
	jobID string

	agents []*agentHandle
	ranks  []rankState
	colls  map[uint64]*rootColl
	liveN  int // agents hosting ranks

	out         *outputWriter
	stdinAgent  *agentHandle
	stdinCredit chan struct{}

	ended       int
	shutdownAt  time.Time // when the job ended and agents were told to exit
	terminating bool
	failure     *failureInfo
	nodeTableAt time.Duration
	lastINT     time.Time

	progress  bool         // show a live launch line on stderr (a terminal)
	agentsUp  atomic.Int32 // agents connected (written by launch goroutines)
	ranksUp   int
	launching bool // the progress line is live
}

type agentHandle struct {
	idx    int
	name   string
	cmd    *exec.Cmd         // a local agent
	sess   *sshspawn.Session // an agent started over SSH
	link   *link
	ranks  []int
	closed bool // link ended
	done   bool // the agent reported mDone
	ended  int  // its ranks that ended

	queued time.Duration // how long its SSH launch waited for a slot
	upAt   time.Duration // when it connected back, since the launches began
}

// kill ends the agent: a local one is killed, a remote one's session is
// closed (the agent sees its link end and kills its ranks).
func (a *agentHandle) kill() {
	switch {
	case a.cmd != nil && a.cmd.Process != nil:
		_ = a.cmd.Process.Kill()
	case a.sess != nil:
		_ = a.sess.Close()
	}
}

// wait waits for the agent process or its session to end.
func (a *agentHandle) wait() {
	switch {
	case a.cmd != nil:
		_ = a.cmd.Wait()
	case a.sess != nil:
		_ = a.sess.Wait()
	}
}

type rankState struct {
	node       int
	pid        int
	ended      bool
	status     rankStatus
	byFrontend bool // ended while ftlaunch was terminating the job
}

type rootColl struct {
	op     rankproto.Op
	from   map[int]bool // agents that contributed, by index
	got    int
	values [][]byte
	kv     map[string][]byte
}

type failureInfo struct {
	msg  string
	code int
}

type event struct {
	agent *agentHandle
	typ   uint8
	p     []byte
	end   bool // the link ended with err
	err   error
}

// evLinkEnd is the type of the event that reports the end of a link.
const evLinkEnd = 0

// Run launches the job on this machine and returns once every rank ended
// and every agent exited. Problems that prevent any rank from starting (an
// agent that cannot be spawned) are returned as errors.
func Run(ctx context.Context, opts Options) (Result, error) {
	if opts.N < 1 {
		return Result{ExitCode: ExitUsage}, fmt.Errorf("need at least one rank, got %d", opts.N)
	}
	if len(opts.Argv) == 0 {
		return Result{ExitCode: ExitUsage}, errors.New("no program given")
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = time.Second
	}
	if opts.KillAfter <= 0 {
		opts.KillAfter = 5 * time.Second
	}
	fe := &frontend{
		opts:  opts,
		start: time.Now(),
		jobID: newJobID(),
		colls: map[uint64]*rootColl{},
		out:   newOutputWriter(opts.Stdout, opts.Stderr, opts.Label),
		ranks: make([]rankState, opts.N),
	}
	go fe.out.run()
	defer fe.out.close()
	if opts.OutputDir != "" {
		if err := fe.out.openFiles(opts.OutputDir, opts.N); err != nil {
			return Result{ExitCode: ExitLauncher}, err
		}
	}
	fe.progress = !opts.Verbose && isTerminal(opts.Stderr)
	fe.launching = fe.progress
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan event, 256)
	if err := fe.startAgents(ctx, events); err != nil {
		fe.killAgents()
		return Result{ExitCode: ExitLauncher}, err
	}
	code := fe.loop(ctx, events)
	return Result{ExitCode: code, NodeTableAt: fe.nodeTableAt}, nil
}

func newJobID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "ft-" + hex.EncodeToString(b[:])
}

// nodeNames returns the names of the job's nodes on this machine.
func (fe *frontend) nodeNames() []string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	k := max(fe.opts.TestNodes, 1)
	if fe.opts.TestNodes <= 1 {
		return []string{host}
	}
	names := make([]string, k)
	for i := range names {
		names[i] = "node" + strconv.Itoa(i)
	}
	return names
}

// startAgents starts one agent per node that runs ranks — local
// processes, or over SSH when the job has a placement on hosts — and sends
// each its share of the job.
func (fe *frontend) startAgents(ctx context.Context, events chan<- event) error {
	n := fe.opts.N
	pl := fe.opts.Placement
	if pl == nil {
		pl = blockPlacement(fe.nodeNames(), n)
	}
	mapping := alloc.ProcessMapping(pl)
	for i, node := range pl.Nodes {
		a := &agentHandle{idx: i, name: node.Name, ranks: node.Ranks}
		for _, r := range a.ranks {
			fe.ranks[r].node = i
		}
		if len(a.ranks) > 0 && a.ranks[0] == 0 {
			fe.stdinAgent = a
		}
		fe.agents = append(fe.agents, a)
	}
	fe.liveN = len(fe.agents)
	// activate sends an agent its share of the job and starts reading its
	// link; it runs as soon as that agent is up.
	activate := func(a *agentHandle) error {
		spec := &nodeSpec{
			JobID: fe.jobID, Argv: fe.opts.Argv, Env: fe.opts.Env, Wdir: fe.opts.Wdir,
			Size: n, KillAfter: fe.opts.KillAfter, Heartbeat: fe.opts.Heartbeat,
			Node: a.name, NodeID: a.idx, Ranks: a.ranks, ProcessMapping: mapping,
		}
		if err := a.link.send(mSpec, spec.encode()); err != nil {
			return fmt.Errorf("send job to node %s: %w", a.name, err)
		}
		fe.agentsUp.Add(1)
		fe.showProgress()
		go func() {
			err := a.link.run(ctx, fe.opts.Heartbeat, 4*fe.opts.Heartbeat+time.Second, func(typ uint8, p []byte) error {
				select {
				case events <- event{agent: a, typ: typ, p: p}:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			select {
			case events <- event{agent: a, end: true, err: err}:
			case <-ctx.Done():
			}
		}()
		return nil
	}
	if fe.opts.SSH != nil {
		if err := fe.spawnRemote(ctx, activate); err != nil {
			return err
		}
	} else {
		for _, a := range fe.agents {
			if err := fe.spawnAgent(a); err != nil {
				return fmt.Errorf("start agent for node %s: %w", a.name, err)
			}
			if err := activate(a); err != nil {
				return err
			}
		}
	}
	fe.verbosef("%d agent(s) started for %d rank(s)", len(fe.agents), n)
	return nil
}

// spawnRemote starts every node's agent over SSH at once (the spawner
// bounds the concurrency per host and in all). Each agent reads its job
// credentials from the session's stdin and connects back to the
// front-end's listener over TCP with mutual TLS; the front-end activates it
// as soon as it is connected. The first failure cancels the other launches.
func (fe *frontend) spawnRemote(ctx context.Context, activate func(*agentHandle) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ca, err := secure.NewJobCA(fe.jobID)
	if err != nil {
		return fmt.Errorf("job credentials: %w", err)
	}
	rootCreds, err := ca.Issue(rootName)
	if err != nil {
		return fmt.Errorf("job credentials: %w", err)
	}
	ln, err := secure.Listen(ctx, "tcp", ":0", rootCreds)
	if err != nil {
		return fmt.Errorf("listen for agents: %w", err)
	}
	// Once every agent is connected no one else may: close the listener.
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	byName := map[string]*agentHandle{}
	for _, a := range fe.agents {
		byName[a.name] = a
	}

	// Each agent reports twice on errs: once its SSH session is up, once
	// it has connected back (or an error). The channel orders the writes
	// of a.sess, a.link and the timings before their later reads.
	errs := make(chan error, 2*len(fe.agents))
	argv := []string{fe.opts.AgentPath, "agent", "--connect"}
	start := time.Now()
	for _, a := range fe.agents {
		creds, err := ca.Issue(a.name)
		if err != nil {
			return fmt.Errorf("credentials for %s: %w", a.name, err)
		}
		boot := (&bootstrap{Creds: creds.Marshal(), Port: port}).encode()
		go func() {
			sess, err := fe.opts.SSH.Start(ctx, a.name, argv, boot)
			if err != nil {
				errs <- fmt.Errorf("start the agent on %s: %w", a.name, err)
				return
			}
			a.sess = sess
			go fe.agentStderr(sess.Stderr())
			go io.Copy(io.Discard, sess.Stdout())
			t := sess.Timings()
			a.queued = t.Queued
			fe.verbosef("node %s: ssh session up in %.1f ms (%d attempt(s), %.1f ms queued)", a.name, t.Total.Seconds()*1e3, t.Attempts, t.Queued.Seconds()*1e3)
			errs <- nil
			// An agent that dies before it connects ends its session.
			go func() {
				if err := sess.Wait(); err != nil && ctx.Err() == nil {
					errs <- fmt.Errorf("the agent on %s ended before it connected back: %w", a.name, err)
				}
			}()
		}()
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			name, _ := secure.PeerName(conn)
			a := byName[name]
			if a == nil || a.link != nil {
				conn.Close()
				continue
			}
			a.link = newLink(conn)
			a.upAt = time.Since(start)
			fe.verbosef("node %s: agent connected back", a.name)
			errs <- activate(a)
		}
	}()
	timeout := time.NewTimer(connectTimeout + 30*time.Second)
	defer timeout.Stop()
	for done := 0; done < 2*len(fe.agents); {
		select {
		case err := <-errs:
			if err != nil {
				return err
			}
			done++
		case <-timeout.C:
			return fmt.Errorf("agents did not connect back within %v", connectTimeout+30*time.Second)
		}
	}
	fe.calibrate()
	return nil
}

// agentStderr forwards a remote agent's own messages line by line.
func (fe *frontend) agentStderr(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fe.out.message(sc.Text() + "\n")
	}
}

// blockPlacement places n ranks on the named nodes in blocks of
// ceil(n/len(names)), as mpirun does on one host per node.
func blockPlacement(names []string, n int) *alloc.Placement {
	per := (n + len(names) - 1) / len(names)
	pl := &alloc.Placement{Ranks: make([]alloc.RankPlace, n)}
	for i, name := range names {
		lo, hi := i*per, min(n, (i+1)*per)
		if lo >= hi {
			break
		}
		node := alloc.NodePlace{Name: name}
		for r := lo; r < hi; r++ {
			node.Ranks = append(node.Ranks, r)
			pl.Ranks[r] = alloc.RankPlace{Node: len(pl.Nodes), LocalRank: r - lo, LocalSize: hi - lo}
		}
		pl.Nodes = append(pl.Nodes, node)
	}
	return pl
}

// spawnAgent starts an agent process with its link on file descriptor 3.
// The agent runs in its own process group, so a terminal's signals reach
// only the front-end, which forwards them.
func (fe *frontend) spawnAgent(a *agentHandle) error {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socketpair: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "agent-link")
	theirs := os.NewFile(uintptr(fds[1]), "agent-link-child")
	defer theirs.Close()
	conn, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return fmt.Errorf("agent socket: %w", err)
	}
	cmd := exec.Command(fe.opts.AgentPath, "agent")
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Stderr = fe.opts.Stderr
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		conn.Close()
		return err
	}
	a.cmd, a.link = cmd, newLink(conn)
	return nil
}

// loop is the front-end's event loop: it owns all job state.
func (fe *frontend) loop(ctx context.Context, events <-chan event) int {
	var timeout <-chan time.Time
	if fe.opts.Timeout > 0 {
		t := time.NewTimer(fe.opts.Timeout - time.Since(fe.start))
		defer t.Stop()
		timeout = t.C
	}
	if fe.stdinAgent != nil && fe.opts.Stdin != nil {
		fe.stdinCredit = make(chan struct{}, 4)
		for range cap(fe.stdinCredit) {
			fe.stdinCredit <- struct{}{}
		}
		go fe.forwardStdin(ctx, fe.stdinAgent)
	}
	var shutdownTimer <-chan time.Time
	for !fe.allAgentsGone() {
		select {
		case ev := <-events:
			fe.handle(ev)
		case sig := <-fe.opts.Signals:
			fe.onSignal(sig)
		case <-timeout:
			fe.fail(ExitTimeout, fmt.Sprintf("the job exceeded --timeout %v; terminating it", fe.opts.Timeout))
		case <-shutdownTimer:
			fe.warnf("agents did not exit after the job ended; killing them")
			fe.killAgents()
			shutdownTimer = nil
		case <-ctx.Done():
			fe.killAgents()
			return ExitLauncher
		}
		if fe.ended == fe.opts.N && fe.shutdownAt.IsZero() {
			fe.shutdown()
			shutdownTimer = time.After(5 * time.Second)
		}
	}
	for _, a := range fe.agents {
		a.wait()
	}
	return fe.finish()
}

func (fe *frontend) allAgentsGone() bool {
	for _, a := range fe.agents {
		if !a.closed {
			return false
		}
	}
	return true
}

func (fe *frontend) shutdown() {
	for _, a := range fe.agents {
		if !a.closed && !a.done {
			_ = a.link.send(mShutdown, nil)
		}
	}
	fe.shutdownAt = time.Now()
}

func (fe *frontend) handle(ev event) {
	a := ev.agent
	if ev.end {
		a.closed = true
		if !a.done {
			fe.agentLost(a, ev.err)
		}
		return
	}
	switch ev.typ {
	case mStarted:
		st, err := decodeStarted(ev.p)
		if err != nil {
			fe.protocolError(a, err)
			return
		}
		for i, r := range st.Ranks {
			if r >= 0 && r < len(fe.ranks) {
				fe.ranks[r].pid = st.Pids[i]
			}
		}
		fe.ranksUp += len(st.Ranks)
		fe.showProgress()
		fe.verbosef("node %s: %d rank(s) running", a.name, len(st.Ranks))
	case mOutput:
		r, stream, data, err := decodeOutput(ev.p)
		if err != nil || r >= len(fe.ranks) {
			fe.protocolError(a, fmt.Errorf("output message: %v", err))
			return
		}
		fe.out.push(outItem{agent: a, rank: r, stream: stream, data: data})
	case mExit:
		st, err := decodeRankStatus(ev.p)
		if err != nil || st.Rank >= len(fe.ranks) || fe.ranks[st.Rank].ended {
			fe.protocolError(a, fmt.Errorf("exit message for rank %d: %v", st.Rank, err))
			return
		}
		fe.rankEnded(st)
	case mAbort:
		ab, err := decodeAbort(ev.p)
		if err != nil || ab.Rank >= len(fe.ranks) {
			fe.protocolError(a, fmt.Errorf("abort message: %v", err))
			return
		}
		code := ab.Code & 0xff
		if code == 0 {
			code = 1
		}
		if ab.Failed {
			fe.fail(code, fmt.Sprintf("rank %d on node %s %s", ab.Rank, fe.nodeOf(ab.Rank), ab.Msg))
			return
		}
		msg := ab.Msg
		if msg != "" {
			msg = ": " + msg
		}
		fe.fail(code, fmt.Sprintf("rank %d on node %s called Abort(%d)%s", ab.Rank, fe.nodeOf(ab.Rank), ab.Code, msg))
	case mContrib:
		c, err := decodeContrib(ev.p)
		if err != nil {
			fe.protocolError(a, err)
			return
		}
		fe.contribute(a, c)
	case mStdinAck:
		if fe.stdinCredit != nil {
			select {
			case fe.stdinCredit <- struct{}{}:
			default:
			}
		}
	case mDone:
		a.done = true
		if st, err := decodeNodeStats(ev.p); err == nil && st.PMI.Requests > 0 {
			fe.verbosef("node %s: PMI %d requests (%d puts, %d gets, %d barriers) answered on the node, %d B in / %d B out; %d B sent up in %d barrier(s)",
				a.name, st.PMI.Requests, st.PMI.Puts, st.PMI.Gets, st.PMI.Barriers, st.PMI.BytesIn, st.PMI.BytesOut, st.PMIUp, st.Barrier)
		}
	default:
		fe.protocolError(a, fmt.Errorf("unknown message type %d", ev.typ))
	}
}

// showProgress updates the live launch line: agents up, ranks running.
// The line goes once every rank runs (or the job fails); it is never shown
// when stderr is not a terminal. Launch goroutines call it before the
// event loop starts (ordered by the launch's result channel), the loop
// after.
func (fe *frontend) showProgress() {
	if !fe.launching {
		return
	}
	if fe.ranksUp >= fe.opts.N || fe.failure != nil {
		fe.launching = false
		fe.out.push(outItem{progress: true})
		return
	}
	fe.out.push(outItem{progress: true, data: []byte(fmt.Sprintf("ftlaunch: %d/%d agents up, %d/%d ranks running",
		fe.agentsUp.Load(), len(fe.agents), fe.ranksUp, fe.opts.N))})
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func (fe *frontend) nodeOf(rank int) string {
	return fe.agents[fe.ranks[rank].node].name
}

func (fe *frontend) warnf(format string, args ...any) {
	fe.out.message(fmt.Sprintf("ftlaunch: "+format+"\n", args...))
}

func (fe *frontend) verbosef(format string, args ...any) {
	if fe.opts.Verbose {
		fe.warnf("[%7.3fs] "+format, append([]any{time.Since(fe.start).Seconds()}, args...)...)
	}
}

// rankEnded records a rank's end; the first failure terminates the job.
func (fe *frontend) rankEnded(st rankStatus) {
	rs := &fe.ranks[st.Rank]
	rs.ended, rs.status = true, st
	// A rank killed by the termination ftlaunch started is not a failure
	// of its own; one that exits with an error code meanwhile is.
	rs.byFrontend = fe.terminating && (st.Signal == int(syscall.SIGTERM) || st.Signal == int(syscall.SIGKILL))
	fe.ended++
	fe.agents[rs.node].ended++
	if st.Code == 0 && st.Signal == 0 && st.Reason == "" {
		fe.checkStranded()
		return
	}
	if fe.terminating {
		return
	}
	fe.fail(exitCodeOf(st), fmt.Sprintf("rank %d on node %s %s", st.Rank, fe.nodeOf(st.Rank), describe(st)))
}

func exitCodeOf(st rankStatus) int {
	if st.Signal != 0 {
		return 128 + st.Signal
	}
	if st.Code&0xff == 0 {
		return 1
	}
	return st.Code & 0xff
}

func describe(st rankStatus) string {
	switch {
	case st.Reason != "" && st.Code == 127:
		return "failed to start: " + st.Reason
	case st.Reason != "":
		return st.Reason
	case st.Signal != 0:
		return fmt.Sprintf("was killed by signal %d (%v)", st.Signal, syscall.Signal(st.Signal))
	default:
		return fmt.Sprintf("exited with code %d", st.Code)
	}
}

// checkStranded fails the job when a node whose ranks have all ended never
// gave its part to a collective the other nodes are waiting in: the wait
// would last forever. (A node with ranks left reports its own stranded
// collectives: see Agent.contribute.)
func (fe *frontend) checkStranded() {
	if fe.terminating || len(fe.colls) == 0 {
		return
	}
	for seq, rc := range fe.colls {
		for _, b := range fe.agents {
			if len(b.ranks) > 0 && b.ended == len(b.ranks) && !rc.from[b.idx] {
				fe.fail(ExitLauncher, fmt.Sprintf("the ranks of node %s ended without joining collective %d (%s) that other ranks are waiting in", b.name, seq, rc.op))
				return
			}
		}
	}
}

// fail records the job's first failure and terminates every rank.
func (fe *frontend) fail(code int, msg string) {
	if fe.failure != nil {
		return
	}
	fe.failure = &failureInfo{msg: msg, code: code}
	fe.showProgress() // clears the launch line
	fe.warnf("%s", msg)
	fe.terminate()
}

func (fe *frontend) terminate() {
	if fe.terminating {
		return
	}
	fe.terminating = true
	fe.verbosef("terminating the job: SIGTERM to every rank, SIGKILL after %v", fe.opts.KillAfter)
	for _, a := range fe.agents {
		if !a.closed {
			_ = a.link.send(mTerminate, encodeInt(int64(fe.opts.KillAfter)))
		}
	}
}

func (fe *frontend) onSignal(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	if s == syscall.SIGINT {
		if !fe.lastINT.IsZero() && time.Since(fe.lastINT) < 2*time.Second {
			fe.warnf("second interrupt: killing every rank")
			fe.terminating = true
			for _, a := range fe.agents {
				if !a.closed {
					_ = a.link.send(mKill, nil)
				}
			}
			return
		}
		fe.lastINT = time.Now()
	}
	fe.verbosef("forwarding signal %d (%v) to every rank", int(s), s)
	for _, a := range fe.agents {
		if !a.closed {
			_ = a.link.send(mSignal, encodeInt(int64(s)))
		}
	}
}

// agentLost handles an agent whose link ended before it said it was done:
// its ranks are killed (they run on this machine) and the job fails.
func (fe *frontend) agentLost(a *agentHandle, err error) {
	for _, r := range a.ranks {
		rs := &fe.ranks[r]
		if rs.pid > 0 && a.cmd != nil { // pids are meaningful on this machine only
			_ = syscall.Kill(-rs.pid, syscall.SIGKILL)
		}
		if !rs.ended {
			rs.ended = true
			rs.byFrontend = fe.terminating
			rs.status = rankStatus{Rank: r, Code: ExitLauncher, Reason: "lost with its agent"}
			fe.ended++
			a.ended++
		}
	}
	a.kill()
	if !fe.shutdownAt.IsZero() { // the job had already ended
		return
	}
	fe.fail(ExitLauncher, fmt.Sprintf("lost the agent of node %s: %v", a.name, err))
}

func (fe *frontend) protocolError(a *agentHandle, err error) {
	fe.fail(ExitLauncher, fmt.Sprintf("protocol error from the agent of node %s: %v", a.name, err))
}

// contribute merges a node's contribution; when every node has given its
// part, the result goes down to every node.
func (fe *frontend) contribute(a *agentHandle, c *contrib) {
	rc := fe.colls[c.Seq]
	if rc == nil {
		rc = &rootColl{op: c.Op, kv: map[string][]byte{}, from: map[int]bool{}}
		if c.Op != rankproto.OpBarrier && !isKVOp(c.Op) {
			rc.values = make([][]byte, fe.opts.N)
		}
		fe.colls[c.Seq] = rc
	}
	if rc.op != c.Op {
		fe.fail(ExitLauncher, fmt.Sprintf("collective %d: node %s called %s while others called %s", c.Seq, a.name, c.Op, rc.op))
		return
	}
	for i, r := range c.Ranks {
		if rc.values != nil && r < len(rc.values) {
			rc.values[r] = c.Values[i]
		}
	}
	for k, v := range c.KV {
		rc.kv[k] = v
	}
	rc.got++
	rc.from[a.idx] = true
	if rc.got < fe.liveN {
		fe.checkStranded()
		return
	}
	delete(fe.colls, c.Seq)
	res := &collResult{Seq: c.Seq, Op: c.Op, Values: rc.values}
	if isKVOp(c.Op) {
		res.KV = rc.kv
	}
	p := res.encode()
	for _, b := range fe.agents {
		if len(b.ranks) > 0 && !b.closed {
			_ = b.link.send(mCollResult, p)
		}
	}
	if c.Op == rankproto.OpPublish && fe.nodeTableAt == 0 {
		fe.nodeTableAt = time.Since(fe.start)
		fe.verbosef("node table of %d ranks published", fe.opts.N)
	}
}

// forwardStdin copies the front-end's stdin to rank 0 in chunks, with at
// most cap(stdinCredit) chunks unacknowledged.
func (fe *frontend) forwardStdin(ctx context.Context, a *agentHandle) {
	buf := make([]byte, 32<<10)
	for {
		select {
		case <-fe.stdinCredit:
		case <-ctx.Done():
			return
		}
		n, err := fe.opts.Stdin.Read(buf)
		if n > 0 {
			if a.link.send(mStdin, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			_ = a.link.send(mStdinClose, nil)
			return
		}
	}
}

func (fe *frontend) killAgents() {
	for _, a := range fe.agents {
		// An agent that got its job is told to shut down first, so that it
		// kills its ranks and exits quietly instead of reporting a lost
		// link.
		if a.link != nil && !a.closed && a.link.send(mShutdown, nil) == nil && a.cmd == nil {
			continue // a remote agent: closing its session now would race the shutdown
		}
		a.kill()
	}
	for _, rs := range fe.ranks {
		if rs.pid > 0 && !rs.ended && fe.agents[rs.node].cmd != nil {
			_ = syscall.Kill(-rs.pid, syscall.SIGKILL)
		}
	}
}

// finish prints the failure summary and returns the exit code.
func (fe *frontend) finish() int {
	fe.verbosef("job ended")
	if fe.failure == nil {
		return 0
	}
	var failed []int
	for r, rs := range fe.ranks {
		st := rs.status
		if (st.Code != 0 || st.Signal != 0 || st.Reason != "") && !rs.byFrontend {
			failed = append(failed, r)
		}
	}
	if len(failed) > 1 {
		sort.Ints(failed)
		var b strings.Builder
		fmt.Fprintf(&b, "ftlaunch: %d ranks failed:\n", len(failed))
		for _, r := range failed {
			fmt.Fprintf(&b, "  rank %-6d node %-16s %s\n", r, fe.nodeOf(r), describe(fe.ranks[r].status))
		}
		fe.out.message(b.String())
	}
	return fe.failure.code
}
