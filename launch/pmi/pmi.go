// Package pmi serves the PMI-1 "simple" wire protocol (version 1.1) that
// MPICH programs speak to their process manager during MPI_Init,
// MPI_Finalize and MPI_Abort.
//
// Serve handles one rank's connection: the inherited socket named by PMI_FD
// (socket mode, the rank is known in advance) or an accepted TCP connection
// whose client introduces itself with "cmd=initack pmiid=N" (TCP mode). It
// parses requests incrementally (several lines per read, lines split across
// reads), answers each with exactly one response line (never a line that was
// not asked for), and leaves the job-wide work to a Backend: buffering puts,
// the global barrier, gets and aborting the job. The node agent implements
// Backend over the launch tree; KVS is an in-process implementation for
// tests and single-node runs.
//
// Limits are Hydra's: a line is at most MaxLine bytes (newline included),
// kvsname_max=256, keylen_max=64, vallen_max=1024. A put whose value could
// not be returned by a get within MaxLine is refused with rc=-1.
//
// Threading: Serve runs on the caller's goroutine and starts no goroutine of
// its own; it only registers a context.AfterFunc that sets the connection's
// deadline when ctx ends, and unregisters it before returning. Many Serve
// calls (one per rank) run concurrently against one Backend, so Backend
// implementations must be safe for concurrent use. Serve never closes the
// connection: the caller owns it and must keep a live rank's connection open
// for the rank's whole life (a rank whose PMI socket is closed dies of
// SIGPIPE at its next PMI call; after an abort the rank waits for an answer
// that never comes until the launcher kills it).
package pmi

import (
	"context"
	"errors"
	"fmt"
)

// Protocol limits, as Hydra announces them in cmd=maxes.
const (
	MaxLine       = 1024 // bytes per line, newline included
	MaxKVSNameLen = 256
	MaxKeyLen     = 64
	MaxValueLen   = 1024
)

// ProcessMappingKey is the key MPICH reads to learn which ranks share a node.
// Serve answers it from Job.ProcessMapping without asking the Backend.
const ProcessMappingKey = "PMI_process_mapping"

// Backend is the job-wide side of PMI, implemented by the node agent (and by
// KVS). Calls for different ranks arrive concurrently; calls for one rank
// never overlap. Calls may block until a job-wide step completes.
type Backend interface {
	// Put stores key=value for the job on behalf of rank. Puts may be
	// buffered node-locally; they must be visible to every rank's Get after
	// the next completed Barrier. An error is answered with rc=-1.
	Put(rank int, key, value string) error
	// Barrier returns when all ranks of the job entered it (PMI-1 barriers
	// are always global), or with an error when ctx ends or the job failed.
	// On error Serve returns without answering, leaving the rank waiting:
	// the launcher must then kill or restart it.
	Barrier(ctx context.Context, rank int) error
	// Get returns the value of key as seen by rank, and whether it exists.
	// An error is answered with rc=-1.
	Get(rank int, key string) (value string, ok bool, err error)
	// Abort must start killing the whole job; the launcher then exits with
	// code & 0xff. The aborting rank waits for an answer forever, so it must
	// be killed too. Abort must not wait for the ranks to die: Serve returns
	// an *AbortError right after it, without answering the rank.
	Abort(rank, code int, msg string)
}

// Job is the job-wide facts a rank can ask for.
type Job struct {
	// Size is the number of ranks, at least 1.
	Size int
	// KVSName names the job's key space: 1..MaxKVSNameLen bytes, no space,
	// no '=' and no control character.
	KVSName string
	// UniverseSize is answered to get_universe_size; 0 means Size.
	UniverseSize int
	// AppNum is answered to get_appnum (0 for the first app context).
	AppNum int
	// AppOf, if set, answers get_appnum instead of AppNum with the app
	// context of the asking rank: an MPMD job's ranks run several
	// programs, numbered from 0 (MPICH's MPI_APPNUM). It is called on
	// Serve's goroutine and must be safe for concurrent use.
	AppOf func(rank int) int
	// ProcessMapping is the PMI_process_mapping value (see the alloc
	// package). Empty, or too long for one line, means the key is reported
	// missing and MPICH falls back to exchanging host names.
	ProcessMapping string
}

// validate checks j for use by Serve.
func (j Job) validate() error {
	if j.Size < 1 {
		return fmt.Errorf("job size %d: need at least one rank", j.Size)
	}
	if j.UniverseSize < 0 {
		return fmt.Errorf("universe size %d is negative", j.UniverseSize)
	}
	if j.KVSName == "" || len(j.KVSName) > MaxKVSNameLen {
		return fmt.Errorf("kvsname %q: want 1..%d bytes", j.KVSName, MaxKVSNameLen)
	}
	for i := 0; i < len(j.KVSName); i++ {
		if c := j.KVSName[i]; c <= ' ' || c == '=' || c == 0x7f {
			return fmt.Errorf("kvsname %q: byte %q not allowed", j.KVSName, c)
		}
	}
	return nil
}

// EventKind says what happened on a connection.
type EventKind int

// The events Serve reports through Config.Observe.
const (
	// EventInit: the rank's cmd=init was answered successfully.
	EventInit EventKind = iota + 1
	// EventFinalize: the rank's cmd=finalize was answered.
	EventFinalize
	// EventLost: the connection ended after init and before finalize — the
	// rank died or exited without MPI_Finalize. Act at once: the other
	// ranks will hang in their next barrier.
	EventLost
	// EventAbort: the rank sent cmd=abort; Code holds its exit code. The
	// Backend's Abort has already been called.
	EventAbort
	// EventGarbage: a malformed, oversized, unknown or out-of-order request.
	// It was answered with an error line where the protocol allows one.
	EventGarbage
)

// String returns the event kind's name.
func (k EventKind) String() string {
	switch k {
	case EventInit:
		return "init"
	case EventFinalize:
		return "finalize"
	case EventLost:
		return "lost"
	case EventAbort:
		return "abort"
	case EventGarbage:
		return "garbage"
	}
	return fmt.Sprintf("event(%d)", int(k))
}

// Event is one thing the agent must know about a rank's connection.
type Event struct {
	Kind   EventKind
	Rank   int    // -1 while a TCP-mode client has not introduced itself
	Code   int    // exit code, for EventAbort
	Detail string // what was wrong, for EventGarbage and EventLost
}

// Config tells Serve whom it talks to and where to send the work.
type Config struct {
	// Job holds the job-wide facts.
	Job Job
	// Rank is the rank on this connection (socket mode), or -1 when the
	// client introduces itself with cmd=initack pmiid=N (TCP mode).
	Rank int
	// ClaimID, used in TCP mode only, turns the client's PMI_ID into its
	// rank and may refuse an id (unknown, or already connected). Nil means
	// rank = id for ids in [0, Size).
	ClaimID func(id int) (rank int, err error)
	// Backend does the job-wide work. Required.
	Backend Backend
	// Observe, if set, is called synchronously on Serve's goroutine for
	// every Event; it must not block for long. Calls from the Serve calls of
	// different ranks may run concurrently.
	Observe func(Event)
}

// Stats counts one connection's traffic.
type Stats struct {
	Requests int64 // request lines handled, garbage included
	Puts     int64
	Gets     int64
	Barriers int64
	Garbage  int64 // requests answered with an error for being malformed
	BytesIn  int64
	BytesOut int64
}

// ErrLost is returned (wrapped) by Serve when the connection ended after
// init and before finalize.
var ErrLost = errors.New("pmi connection lost before finalize")

// ErrProtocol is returned (wrapped) by Serve when the client broke the
// protocol in a way that cannot be answered (for example a TCP-mode client
// that does not introduce itself first).
var ErrProtocol = errors.New("pmi protocol violation")

// AbortError is returned by Serve after a rank sent cmd=abort.
type AbortError struct {
	Rank int
	Code int    // as sent; the job's exit status is Code & 0xff
	Msg  string // error_msg, when the client sent one
}

// Error describes the abort.
func (e *AbortError) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("rank %d aborted the job with code %d: %s", e.Rank, e.Code, e.Msg)
	}
	return fmt.Sprintf("rank %d aborted the job with code %d", e.Rank, e.Code)
}
