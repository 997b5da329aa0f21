package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftlaunch/ftlaunch/launch/fence"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankenv"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// maxLine is the longest line forwarded whole; a longer one is forwarded in
// pieces of this size.
const maxLine = 1 << 20

// pipeDrainGrace bounds how long a rank's exit waits for its output pipes
// to close after the process ended (a background child may hold them).
const pipeDrainGrace = 2 * time.Second

// rankProc is one running rank and its plumbing.
type rankProc struct {
	rank  int
	agent *Agent
	cmd   *exec.Cmd
	conn  net.Conn // agent's end of the rank protocol socket
	info  rankproto.Info
	times string // the rank times directory (fence.EnvRankTimes; "": none)

	stdin  *os.File // rank 0 only; owned by feedStdin
	stdinQ chan stdinChunk

	outDone chan struct{} // closed when both output pipes reached EOF
	exited  chan struct{} // closed when the process was reaped
	replies chan *proto.CollResult

	pmiConn net.Conn    // agent's end of the PMI-1 socket (PMI_FD)
	pmiLost atomic.Bool // the PMI connection closed after init, before finalize

	cpus      *unix.CPUSet // its binding (--bind-to), nil if none
	wmu       sync.Mutex   // serializes writes on conn (replies and recovery events)
	inited    atomic.Bool  // it connected with the rank protocol (Init)
	replaced  atomic.Bool  // ended by a restart of the job: its end is not reported
	published bool         // its Publish was taken (a respawned rank's is held)
	addr      []byte       // a respawned rank's published I-tuple (guarded by Agent.mu)
}

// resolver finds a rank's program (proto.ResolveProgram's signature).
type resolver func(prog, wdir, path string) (string, error)

// resolveOnce returns a resolver that looks each program up once: the
// ranks an agent starts together mostly run the same program, and the
// search of PATH (a stat per directory) was 4% of starting 256 ranks.
// A failure is not kept (the next rank looks again). For one batch of
// starts; a rank started again later looks its program up afresh.
func resolveOnce() resolver {
	found := map[[3]string]string{}
	return func(prog, wdir, path string) (string, error) {
		k := [3]string{prog, wdir, path}
		if p, ok := found[k]; ok {
			return p, nil
		}
		p, err := proto.ResolveProgram(prog, wdir, path)
		if err == nil {
			found[k] = p
		}
		return p, err
	}
}

// startRank spawns one rank in its own session (and so its own process
// group) with its environment, output pipes and rank-protocol socket, bound
// to cpus unless nil; resolve finds its program.
func startRank(spec *proto.NodeSpec, info rankproto.Info, a *Agent, cpus *unix.CPUSet, resolve resolver) (*rankProc, error) {
	if a.guard != nil {
		if err := a.guard.Ready(); err != nil {
			return nil, fmt.Errorf("rank %d on %s: %w", info.Rank, info.Node, err)
		}
	}
	conn, theirs, err := launcher.SocketPair()
	if err != nil {
		return nil, fmt.Errorf("rank %d: rank socket: %w", info.Rank, err)
	}
	defer theirs.Close()
	pmiConn, pmiTheirs, err := launcher.SocketPair()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("rank %d: PMI socket: %w", info.Rank, err)
	}
	defer pmiTheirs.Close()

	app, appNum := spec.App(info.Rank)
	path, err := resolve(app.Argv[0], app.Wdir, proto.LookupEnv(app.Env, "PATH"))
	if a.stage.Done {
		path, err = a.stage.Path, nil
	}
	if err != nil {
		conn.Close()
		pmiConn.Close()
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: app.Argv, Dir: app.Wdir}
	pmixBefore, pmixAfter, err := a.pmixEnv(info.Rank)
	if err != nil {
		conn.Close()
		pmiConn.Close()
		return nil, err
	}
	cmd.Env = append(append(append(append(append([]string(nil), pmixBefore...), app.Env...), rankEnv(info, appNum)...), fence.RankEnv(a.fenceTarget())...), pmixAfter...)
	if a.coll.pmiTCP != nil {
		cmd.Env = append(cmd.Env, "PMI_PORT="+a.coll.pmiTCP.port())
	}
	cmd.ExtraFiles = []*os.File{theirs, pmiTheirs}
	// A session of its own, as Hydra gives each rank: with the kernel's
	// autogroup scheduling (sched_autogroup_enabled, on by default) a
	// session is a CPU-sharing group, so ranks left in the agent's session
	// would share one group's CPU share between them and the agent. On an
	// oversubscribed node (busy-polling MPI ranks) that slowed the whole
	// job by about 5% against mpiexec (docs/benchmarks.md).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}

	rp := &rankProc{rank: info.Rank, agent: a, cmd: cmd, conn: conn, pmiConn: pmiConn,
		outDone: make(chan struct{}), exited: make(chan struct{}),
		replies: make(chan *proto.CollResult, 1), stdinQ: make(chan stdinChunk, 16)}
	fail := func() {
		conn.Close()
		pmiConn.Close()
	}

	var closers []*os.File
	defer func() {
		for _, f := range closers {
			f.Close()
		}
	}()
	outR, outW, err := os.Pipe()
	if err != nil {
		fail()
		return nil, fmt.Errorf("rank %d: pipe: %w", info.Rank, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		fail()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("rank %d: pipe: %w", info.Rank, err)
	}
	closers = append(closers, outW, errW)
	cmd.Stdout, cmd.Stderr = outW, errW
	if info.Rank == 0 {
		inR, inW, err := os.Pipe()
		if err != nil {
			fail()
			outR.Close()
			errR.Close()
			return nil, fmt.Errorf("rank %d: pipe: %w", info.Rank, err)
		}
		closers = append(closers, inR)
		cmd.Stdin = inR
		rp.stdin = inW
	}
	if err := rankenv.StartBound(cpus, cmd.Start); err != nil {
		fail()
		outR.Close()
		errR.Close()
		if rp.stdin != nil {
			rp.stdin.Close()
		}
		return nil, fmt.Errorf("rank %d on %s: %w", info.Rank, info.Node, err)
	}
	if a.guard != nil {
		a.guard.Add(cmd.Process.Pid)
	}
	// The pumps are the agent's: they end at their pipes' EOF, or at the
	// agent's end, which interrupts their reads (a process the rank left
	// outside its group, a daemon, may hold the pipes open for long).
	interrupt := context.AfterFunc(a.ctx, func() {
		_ = outR.SetReadDeadline(time.Now())
		_ = errR.SetReadDeadline(time.Now())
	})
	var pumps sync.WaitGroup
	pumps.Add(2)
	a.wg.Add(3)
	go func() { defer a.wg.Done(); defer pumps.Done(); rp.pump(outR, proto.StreamStdout) }()
	go func() { defer a.wg.Done(); defer pumps.Done(); rp.pump(errR, proto.StreamStderr) }()
	go func() { defer a.wg.Done(); pumps.Wait(); interrupt(); close(rp.outDone) }()
	rp.info = info
	rp.times = proto.LookupEnv(cmd.Env, fence.EnvRankTimes)
	rp.recordTime(true)
	return rp, nil
}

// recordTime appends the rank's start or end to the rank times, if the
// job keeps them (fence.EnvRankTimes: make chaos's overlap check).
func (rp *rankProc) recordTime(start bool) {
	if rp.times == "" {
		return
	}
	t := fence.RankTime{Node: rp.info.Node, Rank: rp.rank, Inc: max(rp.info.Incarnation, 1), Start: start, Time: time.Now()}
	if err := fence.AppendRankTime(rp.times, t); err != nil {
		rp.agent.logf("%v", err)
	}
}

// rankEnv is what a rank finds in its environment besides the job's:
// ftlaunch's own variables, PMI-1's, and those that wrapper scripts written
// for Hydra (MPI_LOCALRANKID, MPI_LOCALNRANKS) and Open MPI
// (OMPI_COMM_WORLD_*) read, e.g. to pick a GPU by local rank. Nothing
// pretends to be Slurm (SLURM_PROCID, SLURM_LOCALID): srun's variables are
// left to srun.
func rankEnv(info rankproto.Info, appNum int) []string {
	rank, size := strconv.Itoa(info.Rank), strconv.Itoa(info.Size)
	local, localSize := strconv.Itoa(info.LocalRank), strconv.Itoa(info.LocalSize)
	return []string{
		"FTLAUNCH_RANK=" + rank,
		"FTLAUNCH_SIZE=" + size,
		"FTLAUNCH_LOCAL_RANK=" + local,
		"FTLAUNCH_LOCAL_SIZE=" + localSize,
		"FTLAUNCH_NODE=" + info.Node,
		"FTLAUNCH_NODEID=" + strconv.Itoa(info.NodeID),
		"FTLAUNCH_JOBID=" + info.JobID,
		"FTLAUNCH_APPNUM=" + strconv.Itoa(appNum),
		"FTLAUNCH_INCARNATION=" + strconv.FormatUint(max(info.Incarnation, 1), 10),
		"FTLAUNCH_RESTARTS=" + strconv.Itoa(info.Restarts),
		"FTLAUNCH_FD=3",
		"PMI_FD=4",
		"PMI_RANK=" + rank,
		"PMI_SIZE=" + size,
		"PMI_ID=" + rank,
		"MPI_LOCALRANKID=" + local,
		"MPI_LOCALNRANKS=" + localSize,
		"OMPI_COMM_WORLD_RANK=" + rank,
		"OMPI_COMM_WORLD_SIZE=" + size,
		"OMPI_COMM_WORLD_LOCAL_RANK=" + local,
		"OMPI_COMM_WORLD_LOCAL_SIZE=" + localSize,
		"OMPI_COMM_WORLD_NODE_RANK=" + local,
	}
}

// pump forwards complete lines from one of the rank's output pipes. A
// final line without a newline is forwarded at EOF.
func (rp *rankProc) pump(f *os.File, stream int) {
	defer f.Close()
	// Small at first (most ranks write little, and a job of 256 ranks
	// allocated and cleared 32 MiB of these); a read that fills it grows
	// it, and it keeps what it grew to.
	buf := make([]byte, 0, 4<<10)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			rp.output(stream, buf[:i+1])
			rest := copy(buf, buf[i+1:])
			buf = buf[:rest]
		} else if len(buf) >= maxLine {
			rp.output(stream, buf)
			buf = buf[:0]
		}
		if err != nil {
			if len(buf) > 0 {
				rp.output(stream, buf)
			}
			return
		}
	}
}

// output sends a piece of output once the front-end granted credit for it.
func (rp *rankProc) output(stream int, data []byte) {
	rp.agent.outWin.Acquire(len(data))
	rp.agent.outQ.Send(rp.rank, stream, data, func(p []byte) { rp.agent.send(proto.MOutput, p) })
}

// wait waits for the rank to end and for its output to drain, and returns
// its status.
func (rp *rankProc) wait() proto.RankStatus {
	rankenv.AwaitExit(rp.cmd.Process.Pid)
	rp.recordTime(false)
	err := rp.cmd.Wait()
	close(rp.exited)
	select {
	case <-rp.outDone:
	case <-time.After(pipeDrainGrace):
	}
	st := proto.RankStatus{Rank: rp.rank}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			st.Signal = int(ws.Signal())
		} else {
			st.Code = ee.ExitCode()
		}
	default:
		st.Code, st.Reason = 1, err.Error()
	}
	if st.Code == 0 && st.Signal == 0 && rp.pmiLost.Load() {
		st.Code, st.Reason = 1, "exited without calling MPI_Finalize (its PMI connection closed after MPI_Init)"
	}
	return st
}

// signal delivers sig to the rank's whole process group.
func (rp *rankProc) signal(sig syscall.Signal) {
	if rp.cmd.Process != nil {
		_ = syscall.Kill(-rp.cmd.Process.Pid, sig)
	}
}

// writeStdin queues a chunk for rank 0's stdin; the stdin goroutine
// writes it and calls ack once it is written or dropped. The front-end
// keeps at most a few chunks unacknowledged, so the queue never fills.
func (rp *rankProc) writeStdin(p []byte, ack func()) {
	select {
	case rp.stdinQ <- stdinChunk{data: p, ack: ack}:
	default:
		ack() // the front-end broke its window: drop
	}
}

// closeStdin queues the end of rank 0's stdin after the chunks before it.
func (rp *rankProc) closeStdin() {
	select {
	case rp.stdinQ <- stdinChunk{eof: true}:
	default:
	}
}

type stdinChunk struct {
	data []byte
	eof  bool
	ack  func()
}

// feedStdin writes queued chunks to rank 0's stdin, in order, until the end
// of stdin or ctx ends. A rank that stops reading or exits loses the rest.
func (rp *rankProc) feedStdin(ctx context.Context) {
	defer rp.stdin.Close()
	for {
		var c stdinChunk
		select {
		case c = <-rp.stdinQ:
		case <-ctx.Done():
			return
		}
		if c.eof {
			return
		}
		if rp.stdin != nil {
			if _, err := rp.stdin.Write(c.data); err != nil {
				rp.stdin.Close()
				rp.stdin = nil
			}
		}
		c.ack()
	}
}

// deliver hands a collective's result to the goroutine serving the rank.
func (rp *rankProc) deliver(res *proto.CollResult) {
	select {
	case rp.replies <- res:
	default: // the rank is not waiting (it broke the protocol); drop
	}
}

// serveRank answers the rank's protocol requests until the rank closes its
// socket or ctx ends. A malformed or oversized frame, or a protocol
// violation, is reported as the rank's failure and ends the service.
func (rp *rankProc) serveRank(ctx context.Context) {
	defer rp.conn.Close()
	stop := context.AfterFunc(ctx, func() { rp.conn.Close() })
	defer stop()
	r := wire.NewReaderSize(rp.conn, rankproto.MaxFrame, 4<<10) // a rank's requests are small
	for {
		f, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) && !rp.died() {
				rp.fail(fmt.Sprintf("rank protocol: %v", err))
			}
			return
		}
		if err := rp.request(ctx, f); err != nil {
			// A reply that cannot be written because the rank died (killed
			// before it read it: a broken pipe) is its exit, not a
			// protocol error; what the rank sent wrong is one at once.
			var op *net.OpError
			if ctx.Err() == nil && !(errors.As(err, &op) && rp.died()) {
				rp.fail(fmt.Sprintf("rank protocol: %v", err))
			}
			return
		}
	}
}

// died reports whether the rank's process ended within a moment: a read
// that fails because the rank died (a connection reset: it was killed
// with frames unread) is its exit, reported as such, not a protocol error.
func (rp *rankProc) died() bool {
	select {
	case <-rp.exited:
		return true
	case <-time.After(500 * time.Millisecond):
		return false
	}
}

// fail reports a protocol failure of the rank as if it had aborted.
func (rp *rankProc) fail(msg string) {
	rp.agent.send(proto.MAbort, proto.AbortMsg{Rank: rp.rank, Code: 1, Msg: msg, Failed: true}.Encode())
}

func (rp *rankProc) reply(typ uint8, p []byte) error {
	rp.wmu.Lock()
	defer rp.wmu.Unlock()
	return wire.WriteFrame(rp.conn, typ, p)
}

// event sends the rank a recovery event (agent-initiated: the client's
// reader takes it). A write that does not go through within a second
// fails: the rank is stopped instead.
func (rp *rankProc) event(typ uint8, p []byte) error {
	rp.wmu.Lock()
	defer rp.wmu.Unlock()
	_ = rp.conn.SetWriteDeadline(time.Now().Add(time.Second))
	defer rp.conn.SetWriteDeadline(time.Time{})
	return wire.WriteFrame(rp.conn, typ, p)
}

func (rp *rankProc) request(ctx context.Context, f wire.Frame) error {
	a := rp.agent
	switch f.Type {
	case rankproto.TInit:
		if !rp.inited.Swap(true) {
			a.openedProtocol(rp.rank)
		}
		return rp.reply(rankproto.TInitOK, rp.info.Encode())
	case rankproto.TAck:
		typ, epoch, err := rankproto.DecodeAck(f.Payload)
		if err != nil {
			return err
		}
		a.suspendAck(rp.rank, typ, epoch)
		return nil
	case rankproto.TPut:
		k, v, err := rankproto.DecodeKV(f.Payload)
		if err != nil {
			return err
		}
		a.put(k, bytes.Clone(v))
		return rp.reply(rankproto.TOK, nil)
	case rankproto.TGet:
		k, _, err := rankproto.DecodeKV(f.Payload)
		if err != nil {
			return err
		}
		v, ok := a.get(k)
		return rp.reply(rankproto.TGetOK, rankproto.EncodeGetOK(ok, v))
	case rankproto.TAbort:
		code, msg, err := rankproto.DecodeAbort(f.Payload)
		if err != nil {
			return err
		}
		a.send(proto.MAbort, proto.AbortMsg{Rank: rp.rank, Code: code, Msg: msg}.Encode())
		return nil
	case rankproto.TBarrier, rankproto.TAllgather, rankproto.TPublish, rankproto.TFence, rankproto.TRing:
		var value []byte
		if f.Type != rankproto.TBarrier && f.Type != rankproto.TFence {
			vs, err := rankproto.DecodeValues(f.Payload)
			if err != nil {
				return err
			}
			if len(vs) != 1 {
				return fmt.Errorf("%s request with %d values, want 1", rankproto.Op(f.Type), len(vs))
			}
			value = vs[0]
		}
		if f.Type == rankproto.TPublish && a.spec.Restart == "rank" && rp.info.Incarnation > 1 && !rp.info.Alone && !rp.published {
			// A respawned rank: its I-tuple patches the others' tables;
			// it gets the whole table when they resume. One started again
			// alone (before any rank opened the protocol: no table, no
			// suspension, no resume) joins the first Publish as the
			// others do, below.
			rp.published = true
			a.published(rp, bytes.Clone(value))
			res, err := rp.await(ctx, heldPublish)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			return rp.reply(collReply(res, rp.rank))
		}
		seq, err := a.contribute(rp.rank, rankproto.Op(f.Type), value)
		if errors.Is(err, errRecovering) {
			return rp.reply(rankproto.TRecovering, nil)
		}
		if err != nil {
			_ = rp.reply(rankproto.TError, []byte(err.Error()))
			return err
		}
		res, err := rp.await(ctx, seq)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if res.Recovering {
			return rp.reply(rankproto.TRecovering, nil)
		}
		return rp.reply(collReply(res, rp.rank))
	default:
		return fmt.Errorf("unknown request type %d", f.Type)
	}
}

// await waits for the result of the rank's collective number seq.
func (rp *rankProc) await(ctx context.Context, seq uint64) (*proto.CollResult, error) {
	select {
	case res := <-rp.replies:
		if res.Seq != seq {
			return nil, fmt.Errorf("collective result %d while waiting for %d", res.Seq, seq)
		}
		return res, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// collReply builds the reply a rank receives for a collective's result.
func collReply(res *proto.CollResult, rank int) (uint8, []byte) {
	switch res.Op {
	case rankproto.OpAllgather, rankproto.OpPublish:
		return rankproto.TValues, rankproto.EncodeValues(res.Values)
	case rankproto.OpRing:
		n := res.Size()
		if n == 0 {
			return rankproto.TError, []byte("ring result without values")
		}
		left, lok := res.Value((rank - 1 + n) % n)
		right, rok := res.Value((rank + 1) % n)
		if !lok || !rok {
			return rankproto.TError, []byte("ring result without this rank's neighbours")
		}
		return rankproto.TRingOK, rankproto.EncodeValues([][]byte{left, right})
	}
	return rankproto.TOK, nil
}
