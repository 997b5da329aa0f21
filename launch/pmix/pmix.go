// Package pmix is the PMIx server an agent runs for its node's ranks, so
// that Open MPI programs (which speak PMIx only) run unmodified beside
// MPICH ones (PMI-1, launch/pmi).
//
// It drives the system's OpenPMIx server library (Debian's libpmix2,
// libpmix.so.2) through cgo, opened at run time with dlopen: a binary built
// anywhere runs where the library is absent, and Start then fails with an
// *UnavailableError naming the package. The few PMIx types and functions
// used are declared in ftpmix.h, so the build needs no PMIx header;
// abicheck.c compares them with the real headers when those are installed
// (libpmix-dev).
//
// libpmix allows one server per process: Start refuses a second one
// (ErrBusy) until the first is closed. Each server has its own rendezvous
// directory and never registers as the host's system server, so several
// agents (one per process) share a host. A job is a Namespace: its
// job-, node- and process-level facts (those Open MPI 4.1 reads at
// MPI_Init), its local clients, and the environment each rank is forked
// with (ForkEnv). The server's callbacks are handed to the namespace they
// name: a fence (PMIx_Fence over the whole namespace, as MPI_Init and
// MPI_Barrier-free finalize use) goes to Backend.Fence with the node's
// collected data, which the agent carries through the job's tree; an abort
// to Backend.Abort; spawn, connect, publish, groups and tools are refused
// with PMIX_ERR_NOT_SUPPORTED and reported to Backend.Refused.
//
// The package's one piece of global state is that registry of the
// process's server and its namespaces: libpmix's callbacks carry no
// pointer of ours to find them by, and the library itself is one per
// process.
package pmix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LibraryEnv names the library to open instead of DefaultLibrary (a path
// or a soname; tests make the library unloadable with it).
const LibraryEnv = "FTLAUNCH_LIBPMIX"

// DefaultLibrary is OpenPMIx's server library, from Debian's libpmix2.
const DefaultLibrary = "libpmix.so.2"

// ErrBusy: a PMIx server runs in this process already.
var ErrBusy = errors.New("a PMIx server runs in this process already (libpmix allows one per process)")

// ErrSpent: a PMIx server ran in this process and was closed. OpenPMIx
// 4.2 cannot initialize a server again after PMIx_server_finalize (it
// aborts the process: its event library's file descriptors are gone),
// and Close leaves the library initialized (see Close).
var ErrSpent = errors.New("a PMIx server ran in this process already (libpmix allows one per process, ever)")

// UnavailableError: the PMIx library could not be opened.
type UnavailableError struct {
	Library string
	Reason  string
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("PMIx unavailable: cannot load %s (install the libpmix2 package): %s", e.Library, e.Reason)
}

// StatusError is a PMIx call that failed.
type StatusError struct {
	Op     string
	Status int
	Text   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: %s (%d)", e.Op, e.Text, e.Status)
}

// Library returns the library Start opens: LibraryEnv's value, or
// DefaultLibrary.
func Library() string {
	if p := os.Getenv(LibraryEnv); p != "" {
		return p
	}
	return DefaultLibrary
}

// Available reports whether the PMIx library can be opened (nil) or why not.
func Available() error {
	return load(Library())
}

// The process's server and its namespaces (see the package comment).
var registry struct {
	mu     sync.Mutex
	server *Server
	spent  bool // a server was finalized: none can start again
	spaces map[string]*Namespace
}

func lookup(ns string) *Namespace {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return registry.spaces[ns]
}

func current() *Server {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return registry.server
}

// Server is the process's PMIx server.
type Server struct {
	dir       string
	ownDir    bool
	shmDir    string // Open MPI's shared-memory segments (OpenMPIEnv)
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup // fences in progress
	onRefused func(what string)

	mu     sync.Mutex
	closed bool
}

// Config is how a server starts.
type Config struct {
	// Dir is the rendezvous directory (created if missing, kept at Close);
	// "" makes a fresh one under os.TempDir, removed at Close.
	Dir string
	// Hostname is the name the server gives its node ("": os.Hostname).
	Hostname string
	// Refused is told of a refused request that names no job (a tool's
	// connection); nil ignores it.
	Refused func(what string)
}

// Start opens the library and starts the process's PMIx server.
func Start(cfg Config) (*Server, error) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.server != nil {
		return nil, ErrBusy
	}
	if registry.spent {
		return nil, ErrSpent
	}
	if err := load(Library()); err != nil {
		return nil, err
	}
	s := &Server{dir: cfg.Dir, onRefused: cfg.Refused}
	if s.dir == "" {
		sweepStale(os.TempDir()) // best effort: a directory it cannot remove stays
		d, err := os.MkdirTemp("", ownPrefix())
		if err != nil {
			return nil, fmt.Errorf("pmix: rendezvous directory: %w", err)
		}
		s.dir, s.ownDir = d, true
	} else if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("pmix: rendezvous directory: %w", err)
	}
	shm := "/dev/shm"
	if st, err := os.Stat(shm); err != nil || !st.IsDir() {
		shm = ""
	}
	if shm != "" {
		sweepStale(shm) // best effort, as above
	}
	d, err := os.MkdirTemp(shm, ownPrefix())
	if err != nil {
		if s.ownDir {
			os.RemoveAll(s.dir)
		}
		return nil, fmt.Errorf("pmix: shared-memory directory: %w", err)
	}
	s.shmDir = d
	host := cfg.Hostname
	if host == "" {
		host, _ = os.Hostname()
	}
	a := cInfos([]keyValue{
		{key: keyServerTmpdir, kind: kindString, s: s.dir},
		{key: keySystemTmpdir, kind: kindString, s: s.dir},
		{key: keyServerSystemSupport, kind: kindBool, n: 0},
		{key: keyServerToolSupport, kind: kindBool, n: 0},
		{key: keyServerRemote, kind: kindBool, n: 0},
		{key: keyHostname, kind: kindString, s: host},
	}, nil, "")
	err = serverInit(a)
	a.free()
	if err != nil {
		if s.ownDir {
			os.RemoveAll(s.dir)
		}
		os.RemoveAll(s.shmDir)
		return nil, fmt.Errorf("pmix: %w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	registry.server = s
	if registry.spaces == nil {
		registry.spaces = map[string]*Namespace{}
	}
	return s, nil
}

// Dir is the server's rendezvous directory.
func (s *Server) Dir() string { return s.dir }

func (s *Server) refused(what string) {
	if s.onRefused != nil {
		s.onRefused(what)
	}
}

// Close ends every fence in progress (with an error to its ranks) and
// removes the server's directories (the rendezvous one if it made it).
// The namespaces should be closed first; any left are dropped.
//
// libpmix itself is not finalized: PMIx_server_finalize crashed the
// process (SIGSEGV inside the library) in 5 of 100 jobs ended by an
// MPI_Abort on a loaded machine, while the progress thread was still
// tearing down the killed ranks' connections; and a process can start a
// server once only (libpmix's state does not survive a finalize), so
// finalizing gains nothing but the library's own clean-up, which the
// process's exit does. The library's thread lives on, idle, until then.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	registry.mu.Lock()
	defer registry.mu.Unlock()
	for ns, n := range registry.spaces {
		if n.server == s {
			delete(registry.spaces, ns)
		}
	}
	var err error
	registry.server, registry.spent = nil, true
	if s.ownDir {
		if rerr := os.RemoveAll(s.dir); err == nil && rerr != nil {
			err = fmt.Errorf("pmix: remove rendezvous directory: %w", rerr)
		}
	}
	if rerr := os.RemoveAll(s.shmDir); err == nil && rerr != nil {
		err = fmt.Errorf("pmix: remove shared-memory directory: %w", rerr)
	}
	return err
}

// Backend is the job-wide side of a namespace, implemented by the agent.
// Its methods are called on goroutines of the server (Fence) or on
// libpmix's progress thread (the others): they must not block.
type Backend interface {
	// Fence contributes this node's data to the job's fence number seq
	// (0, 1, ... in the order this node's fences happen) and returns every
	// node's data, concatenated in any order, once all nodes gave theirs.
	// It may block until then, or until ctx ends.
	Fence(ctx context.Context, data []byte) ([]byte, error)
	// Connected: rank called PMIx_Init (MPI_Init).
	Connected(rank int)
	// Abort ends the job for rank's PMIx_Abort (MPI_Abort) with code.
	Abort(rank, code int, msg string)
	// Finalized: rank called PMIx_Finalize (MPI_Finalize).
	Finalized(rank int)
	// Refused: rank (-1: not known) asked for what the server does not
	// support (what names the call and the MPI function behind it).
	Refused(rank int, what string)
}

// Job is what a namespace describes.
type Job struct {
	// Nspace names the job (one per job and restart): 1..255 bytes.
	Nspace string
	// NodeID is this node's index; NodeOf gives each rank's node index
	// (its length is the job's size) and NodeNames each node's name.
	NodeID    int
	NodeOf    []int
	NodeNames []string
	// AppOf gives each rank's app number (nil: every rank is app 0).
	AppOf []int
	// UID and GID are the ranks' (the agent's own).
	UID, GID int
}

// Namespace is a job registered with the server.
type Namespace struct {
	server  *Server
	job     Job
	backend Backend
	local   []int
	ctx     context.Context
	cancel  context.CancelFunc
	fenceMu sync.Mutex // orders this node's fences
}

// Register registers job's namespace and its ranks on this node as
// clients; it returns once libpmix has taken them.
func (s *Server) Register(ctx context.Context, job Job, b Backend) (*Namespace, error) {
	if job.Nspace == "" || len(job.Nspace) > 255 {
		return nil, fmt.Errorf("pmix: namespace %q: want 1..255 bytes", job.Nspace)
	}
	top, procs, local, err := describe(job, s.dir)
	if err != nil {
		return nil, err
	}
	n := &Namespace{server: s, job: job, backend: b, local: local}
	n.ctx, n.cancel = context.WithCancel(s.ctx)
	registry.mu.Lock()
	if registry.server != s {
		registry.mu.Unlock()
		n.cancel()
		return nil, errors.New("pmix: server closed")
	}
	if registry.spaces[job.Nspace] != nil {
		registry.mu.Unlock()
		n.cancel()
		return nil, fmt.Errorf("pmix: namespace %s is registered already", job.Nspace)
	}
	registry.spaces[job.Nspace] = n
	registry.mu.Unlock()
	fail := func(err error) (*Namespace, error) {
		n.drop()
		return nil, fmt.Errorf("pmix: namespace %s: %w", job.Nspace, err)
	}
	a := cInfos(top, procs, keyProcData)
	w, err := registerNspace(job.Nspace, len(local), a)
	if err != nil {
		a.free()
		return fail(err)
	}
	waits := []*opWait{w}
	for _, r := range local {
		cw, err := registerClient(job.Nspace, r, job.UID, job.GID)
		if err != nil {
			// The namespace's registration still completes: wait for it
			// before freeing what it reads.
			waitAll(context.Background(), waits)
			a.free()
			return fail(err)
		}
		waits = append(waits, cw)
	}
	err = waitAll(ctx, waits)
	if err != nil && ctx.Err() != nil {
		// libpmix still holds a's memory: leak it rather than free it
		// under the library.
		return fail(err)
	}
	a.free()
	if err != nil {
		return fail(err)
	}
	return n, nil
}

// waitAll waits for every operation and returns the first failure.
func waitAll(ctx context.Context, ws []*opWait) error {
	var first error
	for _, w := range ws {
		select {
		case st := <-w.ch:
			if st != 0 && first == nil {
				first = &StatusError{Op: "registration", Status: st, Text: "failed"}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return first
}

// drop removes n from the registry and ends its fences.
func (n *Namespace) drop() {
	registry.mu.Lock()
	if registry.spaces[n.job.Nspace] == n {
		delete(registry.spaces, n.job.Nspace)
	}
	registry.mu.Unlock()
	n.cancel()
}

// OpenMPIEnv is what Open MPI 4.1 needs besides PMIx's variables, as
// NAME=value, to go before the job's environment (which may override it):
//
//   - to be bootstrapped by a PMIx server it did not start: its
//     schizo/orte component declares every process not started by Open
//     MPI's own daemon (nor by Slurm, Flux or JSM, which its other schizo
//     components detect) a singleton, which then ignores the server;
//     without that component the ess/pmi component is selected by the
//     PMIx variables (Open MPI 5 reads PMIx's variables alone);
//   - to keep the shared-memory segments of its vader transport apart
//     from those of another agent's ranks of the same job on the same
//     host (test nodes, ranks moved to a survivor's slots): their names
//     are made of the host name, the job and the local rank, which
//     collide; the server's own directory (under /dev/shm when there is
//     one) holds them.
func (s *Server) OpenMPIEnv() []string {
	return []string{"OMPI_MCA_schizo=^orte", "OMPI_MCA_btl_vader_backing_directory=" + s.shmDir}
}

// ForkEnv returns the variables rank must be started with to reach the
// server (PMIx_server_setup_fork: its namespace, rank, the server's
// address and the library's settings), as NAME=value. They go after the
// job's own environment (a launcher running inside another PMIx job has
// that job's PMIX_ variables); OpenMPIEnv goes before it.
func (n *Namespace) ForkEnv(rank int) ([]string, error) {
	env, err := setupFork(n.job.Nspace, rank)
	if err != nil {
		return nil, fmt.Errorf("pmix: rank %d: %w", rank, err)
	}
	return env, nil
}

// Nspace is the namespace's name.
func (n *Namespace) Nspace() string { return n.job.Nspace }

// nsCloseWait bounds how long Namespace.Close waits for libpmix.
const nsCloseWait = 2 * time.Second

// Close deregisters the namespace, which purges its clients in libpmix;
// fences in progress end with an error. It waits for libpmix at most
// nsCloseWait.
//
// The clients are not deregistered one by one: PMIx_server_deregister_client
// without a callback waits on libpmix's progress thread, and an agent's
// end hung there for minutes after an MPI_Abort (TestOpenMPIAbort), the
// progress thread blocked on a lock of an object already released.
func (n *Namespace) Close() {
	n.drop()
	n.server.mu.Lock()
	closed := n.server.closed
	n.server.mu.Unlock()
	if closed {
		return
	}
	w := deregisterNspace(n.job.Nspace)
	t := time.NewTimer(nsCloseWait)
	defer t.Stop()
	select {
	case <-w.ch:
	case <-n.server.ctx.Done():
	case <-t.C:
	}
}

// fence runs one fence for the namespace on a goroutine the server owns
// and hands its result to done.
func (n *Namespace) fence(data []byte, done func([]byte, error)) {
	s := n.server
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		done(nil, errors.New("pmix: server closed"))
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		n.fenceMu.Lock()
		defer n.fenceMu.Unlock()
		all, err := n.backend.Fence(n.ctx, data)
		done(all, err)
	}()
}

// Value kinds of the facts a namespace describes.
const (
	kindString = iota
	kindU32
	kindU16
	kindRank
	kindBool
)

type keyValue struct {
	key  string
	kind int
	s    string
	n    int
}

// The PMIx keys used (pmix_common.h).
const (
	keyServerTmpdir        = "pmix.srvr.tmpdir"
	keySystemTmpdir        = "pmix.sys.tmpdir"
	keyServerSystemSupport = "pmix.srvr.sys"
	keyServerToolSupport   = "pmix.srvr.tool"
	keyServerRemote        = "pmix.srvr.remote"
	keyHostname            = "pmix.hname"
	keyUnivSize            = "pmix.univ.size"
	keyJobSize             = "pmix.job.size"
	keyMaxProcs            = "pmix.max.size"
	keyJobID               = "pmix.jobid"
	keyNumNodes            = "pmix.num.nodes"
	keyNumApps             = "pmix.job.napps"
	keyNodeMap             = "pmix.nmap"
	keyProcMap             = "pmix.pmap"
	keyLocalPeers          = "pmix.lpeers"
	keyLocalSize           = "pmix.local.size"
	keyNodeSize            = "pmix.node.size"
	keyLocalLeader         = "pmix.lldr"
	keyTmpdir              = "pmix.tmpdir"
	keyProcData            = "pmix.pdata"
	keyRank                = "pmix.rank"
	keyAppNum              = "pmix.appnum"
	keyAppLeader           = "pmix.aldr"
	keyGlobalRank          = "pmix.grank"
	keyAppRank             = "pmix.apprank"
	keyLocalRank           = "pmix.lrank"
	keyNodeRank            = "pmix.nrank"
	keyNodeID              = "pmix.nodeid"
)

// describe computes a namespace's job-level facts and each rank's
// process-level ones, and this node's ranks.
func describe(job Job, dir string) (top []keyValue, procs [][]keyValue, local []int, err error) {
	size := len(job.NodeOf)
	if size == 0 {
		return nil, nil, nil, errors.New("pmix: a job without ranks")
	}
	nodes := len(job.NodeNames)
	if job.NodeID < 0 || job.NodeID >= nodes {
		return nil, nil, nil, fmt.Errorf("pmix: node %d outside %d nodes", job.NodeID, nodes)
	}
	if job.AppOf != nil && len(job.AppOf) != size {
		return nil, nil, nil, fmt.Errorf("pmix: %d app numbers for %d ranks", len(job.AppOf), size)
	}
	appOf := func(r int) int {
		if job.AppOf == nil {
			return 0
		}
		return job.AppOf[r]
	}
	byNode := make([][]int, nodes)
	localRank := make([]int, size)
	apps, appLeader, appRank := 0, map[int]int{}, make([]int, size)
	appCount := map[int]int{}
	for r, nd := range job.NodeOf {
		if nd < 0 || nd >= nodes {
			return nil, nil, nil, fmt.Errorf("pmix: rank %d on node %d outside %d nodes", r, nd, nodes)
		}
		localRank[r] = len(byNode[nd])
		byNode[nd] = append(byNode[nd], r)
		a := appOf(r)
		if _, ok := appLeader[a]; !ok {
			appLeader[a] = r
			apps++
		}
		appRank[r] = appCount[a]
		appCount[a]++
	}
	local = byNode[job.NodeID]
	if len(local) == 0 {
		return nil, nil, nil, fmt.Errorf("pmix: no rank on node %d", job.NodeID)
	}
	var used []string
	var ppn []string
	for nd, rs := range byNode {
		if len(rs) == 0 {
			continue
		}
		used = append(used, job.NodeNames[nd])
		ppn = append(ppn, joinInts(rs))
	}
	top = []keyValue{
		{key: keyJobID, kind: kindString, s: job.Nspace},
		{key: keyUnivSize, kind: kindU32, n: size},
		{key: keyJobSize, kind: kindU32, n: size},
		{key: keyMaxProcs, kind: kindU32, n: size},
		{key: keyNumNodes, kind: kindU32, n: len(used)},
		{key: keyNumApps, kind: kindU32, n: apps},
		{key: keyNodeMap, kind: kindString, s: strings.Join(used, ",")},
		{key: keyProcMap, kind: kindString, s: strings.Join(ppn, ";")},
		{key: keyLocalPeers, kind: kindString, s: joinInts(local)},
		{key: keyLocalSize, kind: kindU32, n: len(local)},
		{key: keyNodeSize, kind: kindU32, n: len(local)},
		{key: keyLocalLeader, kind: kindRank, n: local[0]},
		{key: keyTmpdir, kind: kindString, s: dir},
	}
	for r := range size {
		nd := job.NodeOf[r]
		procs = append(procs, []keyValue{
			{key: keyRank, kind: kindRank, n: r},
			{key: keyAppNum, kind: kindU32, n: appOf(r)},
			{key: keyAppLeader, kind: kindRank, n: appLeader[appOf(r)]},
			{key: keyGlobalRank, kind: kindRank, n: r},
			{key: keyAppRank, kind: kindRank, n: appRank[r]},
			{key: keyLocalRank, kind: kindU16, n: localRank[r]},
			{key: keyNodeRank, kind: kindU16, n: localRank[r]},
			{key: keyNodeID, kind: kindU32, n: nd},
			{key: keyHostname, kind: kindString, s: job.NodeNames[nd]},
		})
	}
	return top, procs, local, nil
}

func joinInts(v []int) string {
	var b strings.Builder
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}
