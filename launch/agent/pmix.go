package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/alloc"
	"github.com/ftlaunch/ftlaunch/launch/pmix"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// The agent's PMIx server (launch/pmix), for Open MPI ranks: started
// before the node's ranks when the job wants it, a namespace for the job,
// each rank's fork environment, and fences carried by the job's
// collectives.

// pmixState is the node's PMIx server and the job's namespace.
type pmixState struct {
	srv *pmix.Server
	ns  *pmix.Namespace
}

// wantsPMIx reports whether the node's ranks are served PMIx: --mpi pmix,
// or by default when one of the job's programs may be a PMIx client.
func (a *Agent) wantsPMIx(resolve resolver) bool {
	switch a.spec.MPI {
	case "pmix":
		return true
	case "":
	default:
		return false
	}
	if a.stage.Done {
		return pmix.Uses(a.stage.Path)
	}
	seen := map[int]bool{}
	for _, r := range a.spec.Ranks {
		app, n := a.spec.App(r)
		if seen[n] {
			continue
		}
		seen[n] = true
		path, err := resolve(app.Argv[0], app.Wdir, proto.LookupEnv(app.Env, "PATH"))
		if err == nil && pmix.Uses(path) {
			return true
		}
	}
	return false
}

// startPMIx starts the server and registers the job when the node's ranks
// are served PMIx. An error is returned only under --mpi pmix: by default
// a server that cannot start leaves the ranks PMI-1 alone, silently when
// libpmix2 is missing on this host, else with a line saying why.
func (a *Agent) startPMIx(ctx context.Context, resolve resolver) error {
	if len(a.spec.Ranks) == 0 || !a.wantsPMIx(resolve) {
		return nil
	}
	asked := a.spec.MPI == "pmix"
	srv, err := pmix.Start(pmix.Config{Hostname: a.spec.Node, Refused: func(what string) {
		a.logf("refused %s: not supported by ftlaunch", what)
	}})
	if err != nil {
		if asked {
			return err
		}
		if errors.As(err, new(*pmix.UnavailableError)) {
			// No libpmix2 on this host: no Open MPI either, most likely.
			a.trace.Logf("PMIx not served: %v", err)
		} else {
			a.logf("PMIx not served: %v", err)
		}
		return nil
	}
	job, err := a.pmixJob()
	if err == nil {
		var ns *pmix.Namespace
		if ns, err = srv.Register(ctx, job, pmixBackend{a}); err == nil {
			a.coll.pmix = &pmixState{srv: srv, ns: ns}
			a.trace.Logf("PMIx server up: namespace %s, rendezvous %s", job.Nspace, srv.Dir())
			return nil
		}
	}
	if cerr := srv.Close(); cerr != nil {
		a.logf("%v", cerr)
	}
	if asked {
		return err
	}
	a.logf("PMIx not served: %v", err)
	return nil
}

// renewPMIx gives the job's restart number restarts a namespace of its
// own (--restart job): the ranks of the last one are gone.
func (a *Agent) renewPMIx(restarts int) {
	if a.coll.pmix == nil {
		return
	}
	if a.coll.pmix.ns != nil {
		a.coll.pmix.ns.Close()
	}
	job, err := a.pmixJob()
	if err == nil {
		job.Nspace += ".r" + strconv.Itoa(restarts)
		a.coll.pmix.ns, err = a.coll.pmix.srv.Register(a.ctx, job, pmixBackend{a})
	}
	if err != nil {
		// Its ranks start without PMIx, as singletons: say why.
		a.logf("PMIx for restart %d: %v", restarts, err)
		a.coll.pmix.ns = nil
	}
}

// pmixStopWait bounds how long an agent's end waits for libpmix.
const pmixStopWait = 5 * time.Second

// stopPMIx ends the namespace and the server, after the ranks. It waits
// for libpmix at most pmixStopWait: a progress thread stuck inside the
// library must not keep the agent (and its node's share of the job) from
// ending. What is left of the close then ends with the agent's process;
// an agent run in the front-end's process (tests) leaves it behind.
func (a *Agent) stopPMIx() {
	if a.coll.pmix == nil {
		return
	}
	done := make(chan error, 1)
	go func() {
		if a.coll.pmix.ns != nil {
			a.coll.pmix.ns.Close()
		}
		done <- a.coll.pmix.srv.Close()
	}()
	select {
	case err := <-done:
		if err != nil {
			a.logf("%v", err)
		}
	case <-time.After(pmixStopWait):
		a.logf("PMIx server: libpmix did not shut down within %v; the agent ends without it", pmixStopWait)
	}
}

// pmixEnv is what rank's environment gets for PMIx: before the job's
// environment (which may override it) and after it (which may not).
func (a *Agent) pmixEnv(rank int) (before, after []string, err error) {
	if a.coll.pmix == nil || a.coll.pmix.ns == nil {
		return nil, nil, nil
	}
	after, err = a.coll.pmix.ns.ForkEnv(rank)
	return a.coll.pmix.srv.OpenMPIEnv(), after, err
}

// pmixJob describes the job for its namespace: the nodes from the
// process mapping (other nodes are named node<i>: the spec names only
// this one), each rank's app.
func (a *Agent) pmixJob() (pmix.Job, error) {
	s := a.spec
	nodeOf, err := alloc.NodesOf(s.ProcessMapping, s.Size)
	if err != nil {
		return pmix.Job{}, err
	}
	nodes := s.NodeID + 1
	for _, n := range nodeOf {
		nodes = max(nodes, n+1)
	}
	names := make([]string, nodes)
	for i := range names {
		names[i] = "node" + strconv.Itoa(i)
	}
	names[s.NodeID] = s.Node
	for _, r := range s.Ranks {
		if nodeOf[r] != s.NodeID {
			return pmix.Job{}, fmt.Errorf("process mapping %s puts rank %d of node %d on node %d", s.ProcessMapping, r, s.NodeID, nodeOf[r])
		}
	}
	var apps []int
	if len(s.Apps) > 1 {
		apps = make([]int, s.Size)
		for r := range apps {
			apps[r] = s.AppNum(r)
		}
	}
	return pmix.Job{Nspace: "ftlaunch." + s.JobID, NodeID: s.NodeID, NodeOf: nodeOf, NodeNames: names,
		AppOf: apps, UID: os.Getuid(), GID: os.Getgid()}, nil
}

// pmixBackend is the agent's side of the job's namespace.
type pmixBackend struct{ a *Agent }

// Fence carries the node's fence data to every node: an allgather of the
// job's collectives, the data as the node's first rank's value.
func (b pmixBackend) Fence(ctx context.Context, data []byte) ([]byte, error) {
	a := b.a
	if len(a.sup.order) == 0 {
		return nil, errors.New("pmix fence: no rank runs on this node")
	}
	first := a.sup.order[0]
	var seq uint64
	for _, r := range a.sup.order {
		v := []byte{}
		if r == first {
			v = data
		}
		s, err := a.contribute(r, rankproto.OpAllgather, v)
		if err != nil {
			return nil, fmt.Errorf("pmix fence: %w", err)
		}
		if r == first {
			seq = s
		}
	}
	res, err := a.rank(first).await(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("pmix fence: %w", err)
	}
	var all []byte
	for _, v := range res.Values {
		all = append(all, v...)
	}
	return all, nil
}

func (b pmixBackend) Abort(rank, code int, msg string) { b.a.Abort(rank, code, msg) }

// Connected: under --restart rank, an MPI rank is one the job cannot
// replace alone, as for a PMI-1 client (observePMI).
func (b pmixBackend) Connected(rank int) {
	if b.a.spec.Restart == "rank" && rank >= 0 {
		b.a.send(proto.MPMIInit, proto.RecMsg{Rank: rank}.Encode())
	}
}

func (b pmixBackend) Finalized(rank int) {}

func (b pmixBackend) Refused(rank int, what string) {
	b.a.logf("rank %d: refused %s: not supported by ftlaunch", rank, what)
}
