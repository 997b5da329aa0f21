package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/pmi"
	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// pmiLostGrace is how long a rank that closed its PMI connection after init
// and before finalize may take to exit before the agent reports it as
// failed: the other ranks would hang in the next global barrier.
const pmiLostGrace = time.Second

// pmiJob returns the job facts PMI clients ask for.
func (a *Agent) pmiJob() pmi.Job {
	return pmi.Job{Size: a.spec.Size, KVSName: "kvs_" + a.spec.JobID, ProcessMapping: a.spec.ProcessMapping, AppOf: a.spec.AppNum}
}

// Put buffers a PMI put on this node until the next barrier.
func (a *Agent) Put(rank int, key, value string) error {
	a.mu.Lock()
	a.coll.pmiPuts[key] = []byte(value)
	a.mu.Unlock()
	return nil
}

// Barrier takes part in the job-wide PMI barrier for rank.
func (a *Agent) Barrier(ctx context.Context, rank int) error {
	rp := a.rank(rank)
	if rp == nil {
		return fmt.Errorf("pmi barrier: rank %d does not run on node %s", rank, a.spec.Node)
	}
	seq, err := a.contribute(rank, proto.OpPMIBarrier, nil)
	if err != nil {
		return err
	}
	_, err = rp.await(ctx, seq)
	return err
}

// Get answers a PMI get from the node's copy of the key space.
func (a *Agent) Get(rank int, key string) (string, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.coll.pmiKV[key]
	return string(v), ok, nil
}

// Abort reports a rank's PMI abort; the front-end terminates the job.
func (a *Agent) Abort(rank, code int, msg string) {
	a.send(proto.MAbort, proto.AbortMsg{Rank: rank, Code: code, Msg: msg}.Encode())
}

// servePMI speaks PMI-1 with one rank over its inherited socket until the
// rank finalizes, closes it or the agent ends. The connection stays open
// for the rank's life (an aborting rank waits on it forever).
func (a *Agent) servePMI(ctx context.Context, rp *rankProc, conn net.Conn, rank int) {
	st, err := pmi.Serve(ctx, conn, pmi.Config{Job: a.pmiJob(), Rank: rank, Backend: a, Observe: a.observePMI(rank)})
	a.addPMIStats(st)
	a.pmiDone(ctx, rp, err)
}

// addPMIStats adds one connection's counts to the node's.
func (a *Agent) addPMIStats(st pmi.Stats) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &a.coll.pmiStats
	t.Requests += st.Requests
	t.Puts += st.Puts
	t.Gets += st.Gets
	t.Barriers += st.Barriers
	t.Garbage += st.Garbage
	t.BytesIn += st.BytesIn
	t.BytesOut += st.BytesOut
}

// pmiDone acts on the end of a rank's PMI session.
func (a *Agent) pmiDone(ctx context.Context, rp *rankProc, err error) {
	if rp == nil || !errors.Is(err, pmi.ErrLost) {
		return
	}
	// The rank closed its PMI connection after init and before finalize:
	// it died or is about to, and the others would hang in the next
	// barrier. If it does not exit at once, report it failed now.
	rp.pmiLost.Store(true)
	select {
	case <-rp.exited:
	case <-ctx.Done():
	case <-time.After(pmiLostGrace):
		a.send(proto.MAbort, proto.AbortMsg{Rank: rp.rank, Code: 1, Failed: true,
			Msg: "closed its PMI connection before MPI_Finalize and is still running"}.Encode())
	}
}

// pmiListener serves PMI-1's TCP mode (PMI_PORT and PMI_ID) for the node's
// ranks on a loopback port.
type pmiListener struct {
	ln      net.Listener
	mu      sync.Mutex
	claimed map[int]bool
}

func (a *Agent) listenPMI() (*pmiListener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pmi tcp listener: %w", err)
	}
	return &pmiListener{ln: ln, claimed: map[int]bool{}}, nil
}

func (l *pmiListener) port() string {
	return "127.0.0.1:" + strconv.Itoa(l.ln.Addr().(*net.TCPAddr).Port)
}

// claim turns a client's PMI_ID into its rank: one of this node's ranks,
// once.
func (l *pmiListener) claim(a *Agent, id int) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.rank(id) == nil {
		return 0, fmt.Errorf("PMI_ID %d is not a rank of node %s", id, a.spec.Node)
	}
	if l.claimed[id] {
		return 0, fmt.Errorf("PMI_ID %d is already connected", id)
	}
	l.claimed[id] = true
	return id, nil
}

// serve accepts TCP-mode clients until ctx ends.
func (l *pmiListener) serve(ctx context.Context, a *Agent, wg *sync.WaitGroup) {
	stop := context.AfterFunc(ctx, func() { l.ln.Close() })
	defer stop()
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			var rank = -1
			_, err := pmi.Serve(ctx, conn, pmi.Config{
				Job: a.pmiJob(), Rank: -1, Backend: a, Observe: a.observePMI(-1),
				ClaimID: func(id int) (int, error) {
					r, err := l.claim(a, id)
					rank = r
					return r, err
				},
			})
			if rank >= 0 {
				a.pmiDone(ctx, a.rank(rank), err)
			}
			if errors.As(err, new(*pmi.AbortError)) {
				<-ctx.Done() // keep an aborting rank's connection open
			}
		}()
	}
}
