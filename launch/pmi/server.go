package pmi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Serve speaks PMI-1 with one rank over conn until the rank finalizes and
// closes the connection, the connection breaks, the rank aborts, the Backend
// fails a barrier, or ctx ends. It never closes conn.
//
// It returns the connection's Stats and:
//   - nil after a finalize followed by end of stream, and also when the
//     stream ends before the rank ever sent cmd=init (a program that does
//     not use PMI; the caller learns its fate from waitpid);
//   - an error wrapping ErrLost when the stream ends (or breaks) after init
//     and before finalize;
//   - an *AbortError after cmd=abort, once Backend.Abort has returned; the
//     rank is not answered;
//   - an error wrapping the Backend's error when Barrier fails (unanswered);
//   - an error wrapping ErrProtocol for an unanswerable violation;
//   - an error wrapping ctx.Err() when ctx ends.
//
// Cancelling ctx interrupts a blocked read or write only when conn has a
// SetDeadline method (net.Conn does); Serve then leaves the deadline set.
// Otherwise cancellation is seen at the next request or barrier.
func Serve(ctx context.Context, conn io.ReadWriter, cfg Config) (Stats, error) {
	if err := cfg.Job.validate(); err != nil {
		return Stats{}, fmt.Errorf("pmi serve: %w", err)
	}
	if cfg.Backend == nil {
		return Stats{}, errors.New("pmi serve: no backend")
	}
	if cfg.Rank < -1 || cfg.Rank >= cfg.Job.Size {
		return Stats{}, fmt.Errorf("pmi serve: rank %d outside [-1, %d)", cfg.Rank, cfg.Job.Size)
	}
	s := &session{cfg: cfg, rank: cfg.Rank, conn: conn}
	if d, ok := conn.(interface{ SetDeadline(time.Time) error }); ok {
		stop := context.AfterFunc(ctx, func() { _ = d.SetDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	err := s.run(ctx)
	return s.stats, err
}

// session is the state of one connection; it lives on Serve's goroutine.
type session struct {
	cfg         Config
	rank        int
	conn        io.ReadWriter
	stats       Stats
	initialized bool
	finalized   bool
	inSpawn     bool // inside an "mcmd=spawn" ... "endcmd" block
	spawnTotal  int  // totspawns of the spawn being read (0 = not given)
	spawnSoFar  int  // spawnssofar of the block being read (0 = not given)
	out         []byte
}

// run is the request loop.
func (s *session) run(ctx context.Context) error {
	br := bufio.NewReaderSize(countingReader{s.conn, &s.stats.BytesIn}, MaxLine)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) { // drop the rest of the line
				_, err = br.ReadSlice('\n')
			}
			if err != nil {
				return s.end(ctx, err, true)
			}
			s.stats.Requests++
			if err := s.garbage(fmt.Sprintf("line longer than %d bytes", MaxLine), "line_too_long"); err != nil {
				return s.end(ctx, err, true)
			}
			continue
		}
		if err != nil {
			return s.end(ctx, err, len(line) > 0)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("pmi rank %d: %w", s.rank, err)
		}
		if err := s.handle(ctx, line); err != nil {
			var ioErr *ioError
			if errors.As(err, &ioErr) {
				return s.end(ctx, ioErr.err, false)
			}
			return err
		}
	}
}

// countingReader adds the bytes read to *n.
type countingReader struct {
	r io.Reader
	n *int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

// ioError marks a failed write to the client.
type ioError struct{ err error }

func (e *ioError) Error() string { return "write: " + e.err.Error() }

// end turns the end of the stream (or a broken connection) into Serve's
// result.
func (s *session) end(ctx context.Context, err error, partial bool) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("pmi rank %d: %w", s.rank, cerr)
	}
	switch {
	case s.finalized:
		return nil
	case s.initialized:
		detail := err.Error()
		if partial {
			detail += " inside a request line"
		}
		s.emit(Event{Kind: EventLost, Rank: s.rank, Detail: detail})
		return fmt.Errorf("pmi rank %d: %w: %v", s.rank, ErrLost, detail)
	case errors.Is(err, io.EOF):
		return nil
	default:
		return fmt.Errorf("pmi rank %d before init: %w", s.rank, err)
	}
}

// emit reports ev to the observer, if any.
func (s *session) emit(ev Event) {
	if s.cfg.Observe != nil {
		s.cfg.Observe(ev)
	}
}

// reply sends one or more complete response lines.
func (s *session) reply(parts ...string) error {
	s.out = s.out[:0]
	for _, p := range parts {
		s.out = append(s.out, p...)
	}
	n, err := s.conn.Write(s.out)
	s.stats.BytesOut += int64(n)
	if err != nil {
		return &ioError{err}
	}
	return nil
}

// garbage reports a bad request and answers it with a generic error line.
func (s *session) garbage(detail, msg string) error {
	s.noteGarbage(detail)
	return s.reply("cmd=error rc=-1 msg=", word(msg), "\n")
}

// noteGarbage counts and reports a bad request that is answered elsewhere.
func (s *session) noteGarbage(detail string) {
	s.stats.Garbage++
	s.emit(Event{Kind: EventGarbage, Rank: s.rank, Detail: detail})
}

// handle answers one request line.
func (s *session) handle(ctx context.Context, line []byte) error {
	if s.inSpawn {
		return s.spawnLine(line)
	}
	s.stats.Requests++
	req, err := parseLine(line)
	if err != nil {
		return s.garbage("malformed request: "+err.Error(), "malformed_request")
	}
	cmd := req.cmd()
	if s.rank < 0 && cmd != "initack" {
		s.noteGarbage(fmt.Sprintf("command %q before initack in TCP mode", cmd))
		return fmt.Errorf("pmi: %w: command %q before cmd=initack", ErrProtocol, cmd)
	}
	if s.finalized {
		return s.garbage(fmt.Sprintf("command %q after finalize", cmd), "after_finalize")
	}
	switch cmd {
	case "init":
		return s.init(&req)
	case "initack":
		return s.initack(&req)
	case "get_maxes":
		return s.reply("cmd=maxes kvsname_max=", strconv.Itoa(MaxKVSNameLen),
			" keylen_max=", strconv.Itoa(MaxKeyLen), " vallen_max=", strconv.Itoa(MaxValueLen), "\n")
	case "get_appnum":
		n := s.cfg.Job.AppNum
		if s.cfg.Job.AppOf != nil && s.rank >= 0 {
			n = s.cfg.Job.AppOf(s.rank)
		}
		return s.reply("cmd=appnum appnum=", strconv.Itoa(n), "\n")
	case "get_my_kvsname":
		return s.reply("cmd=my_kvsname kvsname=", s.cfg.Job.KVSName, "\n")
	case "get_universe_size":
		u := s.cfg.Job.UniverseSize
		if u == 0 {
			u = s.cfg.Job.Size
		}
		return s.reply("cmd=universe_size size=", strconv.Itoa(u), "\n")
	case "put":
		return s.put(&req)
	case "get":
		return s.get(&req)
	case "barrier_in":
		s.stats.Barriers++
		if err := s.cfg.Backend.Barrier(ctx, s.rank); err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return fmt.Errorf("pmi rank %d: %w", s.rank, cerr)
			}
			return fmt.Errorf("pmi rank %d: barrier: %w", s.rank, err)
		}
		return s.reply("cmd=barrier_out\n")
	case "finalize":
		if err := s.reply("cmd=finalize_ack\n"); err != nil {
			return err
		}
		s.finalized = true
		s.emit(Event{Kind: EventFinalize, Rank: s.rank})
		return nil
	case "abort":
		return s.abort(&req)
	case "publish_name", "unpublish_name", "lookup_name":
		s.noteGarbage(cmd + " is not supported")
		result := strings.TrimSuffix(strings.TrimSuffix(cmd, "_name"), "_") + "_result"
		return s.reply("cmd=", result, " rc=-1 msg=not_supported\n")
	case "mcmd=spawn":
		s.inSpawn, s.spawnTotal, s.spawnSoFar = true, 0, 0
		return nil
	case "":
		return s.garbage("request without cmd", "missing_cmd")
	default:
		return s.garbage(fmt.Sprintf("unknown command %.40q", cmd), "unknown_command")
	}
}

// init answers cmd=init; only PMI 1.0 and 1.1 are spoken.
func (s *session) init(req *request) error {
	v, err1 := req.atoi("pmi_version")
	sv, err2 := req.atoi("pmi_subversion")
	if err1 != nil || err2 != nil || v != 1 || sv < 0 || sv > 1 {
		s.noteGarbage(fmt.Sprintf("init asks for unsupported PMI version %q.%q",
			fieldOr(req, "pmi_version"), fieldOr(req, "pmi_subversion")))
		return s.reply("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n")
	}
	if err := s.reply("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"); err != nil {
		return err
	}
	if !s.initialized {
		s.initialized = true
		s.emit(Event{Kind: EventInit, Rank: s.rank})
	}
	return nil
}

// fieldOr returns the value of key or "" for messages.
func fieldOr(req *request, key string) string {
	v, _ := req.get(key)
	return v
}

// initack answers a TCP-mode client's introduction with its size and rank.
func (s *session) initack(req *request) error {
	id, err := req.atoi("pmiid")
	if err != nil {
		s.noteGarbage("initack: " + err.Error())
		return fmt.Errorf("pmi: %w: initack: %v", ErrProtocol, err)
	}
	rank := id
	switch {
	case s.rank >= 0:
		if id != s.rank {
			s.noteGarbage(fmt.Sprintf("initack pmiid=%d on the connection of rank %d", id, s.rank))
			return fmt.Errorf("pmi: %w: pmiid %d on rank %d's connection", ErrProtocol, id, s.rank)
		}
	case s.cfg.ClaimID != nil:
		if rank, err = s.cfg.ClaimID(id); err != nil {
			s.noteGarbage(fmt.Sprintf("initack pmiid=%d refused: %v", id, err))
			return fmt.Errorf("pmi: %w: pmiid %d: %v", ErrProtocol, id, err)
		}
	}
	if rank < 0 || rank >= s.cfg.Job.Size {
		s.noteGarbage(fmt.Sprintf("initack pmiid=%d outside the job", id))
		return fmt.Errorf("pmi: %w: pmiid %d gives rank %d outside [0, %d)", ErrProtocol, id, rank, s.cfg.Job.Size)
	}
	s.rank = rank
	return s.reply("cmd=initack\ncmd=set size=", strconv.Itoa(s.cfg.Job.Size),
		"\ncmd=set rank=", strconv.Itoa(rank), "\ncmd=set debug=0\n")
}

// put answers cmd=put.
func (s *session) put(req *request) error {
	s.stats.Puts++
	const fail = "cmd=put_result rc=-1 msg="
	kvs, okK := req.get("kvsname")
	key, okKey := req.get("key")
	value, okV := req.get("value")
	switch {
	case !okK || !okKey || !okV:
		s.noteGarbage("put without kvsname, key or value")
		return s.reply(fail, "missing_field\n")
	case kvs != s.cfg.Job.KVSName:
		s.noteGarbage(fmt.Sprintf("put to unknown kvsname %.40q", kvs))
		return s.reply(fail, "unknown_kvsname\n")
	case key == "" || len(key) > MaxKeyLen:
		return s.reply(fail, "bad_key_length\n")
	case len(value) > MaxValueLen || !responseFits(value):
		return s.reply(fail, "value_too_long\n")
	case key == ProcessMappingKey:
		return s.reply(fail, "reserved_key\n")
	}
	if err := s.cfg.Backend.Put(s.rank, key, value); err != nil {
		return s.reply(fail, word(err.Error()), "\n")
	}
	return s.reply("cmd=put_result rc=0 msg=success\n")
}

// get answers cmd=get.
func (s *session) get(req *request) error {
	s.stats.Gets++
	kvs, okK := req.get("kvsname")
	key, okKey := req.get("key")
	switch {
	case !okK || !okKey:
		s.noteGarbage("get without kvsname or key")
		return s.reply("cmd=get_result rc=-1 msg=missing_field value=unknown\n")
	case kvs != s.cfg.Job.KVSName:
		s.noteGarbage(fmt.Sprintf("get from unknown kvsname %.40q", kvs))
		return s.reply("cmd=get_result rc=-1 msg=unknown_kvsname value=unknown\n")
	case key == "" || len(key) > MaxKeyLen:
		return s.reply("cmd=get_result rc=-1 msg=bad_key_length value=unknown\n")
	}
	var value string
	var ok bool
	if key == ProcessMappingKey {
		value = s.cfg.Job.ProcessMapping
		ok = value != "" && len(value) <= MaxValueLen && responseFits(value)
	} else {
		var err error
		value, ok, err = s.cfg.Backend.Get(s.rank, key)
		if err != nil {
			return s.reply("cmd=get_result rc=-1 msg=", word(err.Error()), " value=unknown\n")
		}
		if ok && !responseFits(value) {
			return s.reply("cmd=get_result rc=-1 msg=value_too_long value=unknown\n")
		}
	}
	if !ok {
		return s.reply("cmd=get_result rc=-1 msg=key_", word(key), "_not_found value=unknown\n")
	}
	return s.reply("cmd=get_result rc=0 msg=success value=", value, "\n")
}

// abort handles cmd=abort: the job must die; the rank gets no answer.
func (s *session) abort(req *request) error {
	code, err := req.atoi("exitcode")
	if err != nil {
		s.noteGarbage("abort: " + err.Error())
		code = 1
	}
	msg, _ := req.get("error_msg")
	s.cfg.Backend.Abort(s.rank, code, msg)
	s.emit(Event{Kind: EventAbort, Rank: s.rank, Code: code, Detail: msg})
	return &AbortError{Rank: s.rank, Code: code, Msg: msg}
}

// spawnLine consumes one line of an "mcmd=spawn" block. MPI_Comm_spawn is
// not supported: the client sends one block per command of the spawn
// (numbered by spawnssofar out of totspawns) and is told so after the last.
func (s *session) spawnLine(line []byte) error {
	text := strings.TrimRight(string(line), "\r\n")
	if text != "endcmd" {
		key, value, _ := strings.Cut(text, "=")
		if n, err := strconv.Atoi(value); err == nil {
			switch key {
			case "totspawns":
				s.spawnTotal = n
			case "spawnssofar":
				s.spawnSoFar = n
			}
		}
		return nil
	}
	s.inSpawn = false
	if s.spawnTotal > 0 && s.spawnSoFar > 0 && s.spawnSoFar < s.spawnTotal {
		return nil // more blocks of this spawn follow; the answer comes after the last
	}
	s.noteGarbage("spawn is not supported")
	return s.reply("cmd=spawn_result rc=-1 errmsg=spawn_not_supported\n")
}
