package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// SoloConfig configures a Solo.
type SoloConfig struct {
	// StateDir is the state directory; the log goes under StateDir/Name/.
	StateDir string
	// Name is the node name, the single voter's raft server ID.
	Name string
	// InMemory keeps the log in memory (StateDir is not used).
	InMemory bool
}

// Solo is the log of a group of one voter, written without a raft server
// (also the log of a group that never formed: see OpenSolo).
// A single voter needs no election and no replication: whatever it appends
// is committed once it is on its disk. Solo writes what a raft server
// would (the bootstrap configuration at index 1, term 1; a vote for itself
// and a no-op at index 2, term 2, as raft's first leader writes them; then
// one entry per command, term 2), in the same files, so that
// OpenReadOnly, `ftlaunch inspect` and a raft server opened on the
// directory later read it as any replica's. What it saves is the
// election's wait (one or two heartbeat timeouts) and raft's own
// goroutines and writes: the database is opened once, its metadata and
// stable store are one transaction, and a batch of commands is one more
// (entries encoded as raft-boltdb encodes them).
//
// Threading: every method may be called from any goroutine; appends are
// serialized.
type Solo struct {
	cfg SoloConfig
	dir string
	fsm *FSM
	db  *bbolt.DB     // the database (nil: in memory)
	mem raft.LogStore // the log in memory

	mu     sync.Mutex
	next   uint64 // the next entry's index
	term   uint64 // the term of the entries after the bootstrap
	led    bool   // the term's first entry, a no-op, is written
	closed bool
}

// soloAddr is the single voter's address in its configuration: it has no
// transport, and nobody dials it.
func soloAddr(name string) raft.ServerAddress { return raft.ServerAddress("solo:" + name) }

// soloTerm is the term of a solo log's entries after the bootstrap.
const soloTerm = 2

// OpenSolo creates a single voter's log in a new directory, or continues
// one that a raft server bootstrapped as this node alone and that holds no
// command (a group that never formed: the server did not lead, or led
// alone and wrote nothing); it fails on any other database. It writes the database's
// metadata and raft's stable store (a vote for itself in a term after any
// the raft server reached); the log's next entries go with the first
// Apply.
func OpenSolo(cfg SoloConfig) (*Solo, error) {
	if cfg.StateDir == "" && !cfg.InMemory || cfg.Name == "" || cfg.Name == "." || cfg.Name == ".." || strings.ContainsAny(cfg.Name, `/\`) {
		return nil, fmt.Errorf("raftstore: open solo: need a state directory and a plain node name (got %q, %q)", cfg.StateDir, cfg.Name)
	}
	s := &Solo{cfg: cfg, fsm: NewFSM(), next: 1, term: soloTerm}
	if cfg.InMemory {
		s.mem = raft.NewInmemStore()
		return s, nil
	}
	s.dir = filepath.Join(cfg.StateDir, cfg.Name)
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftstore: open solo %s: %w", s.dir, err)
	}
	dbPath := filepath.Join(s.dir, dbFile)
	var err error
	if s.db, s.next, s.term, err = initSolo(dbPath, cfg.Name); err != nil {
		return nil, fmt.Errorf("raftstore: open solo %s: %w", dbPath, err)
	}
	return s, nil
}

// initSolo prepares the database in one transaction: a new one gets its
// buckets and ftlaunch's metadata; one a raft server bootstrapped and
// never led is checked. Either gets raft's stable store as a single voter
// that voted for itself leaves it. It returns the log's next index and the
// term of the entries to come.
func initSolo(path, name string) (db *bbolt.DB, next, term uint64, err error) {
	db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: lockTimeout})
	if err != nil {
		return nil, 0, 0, lockErr(err)
	}
	next, term = 1, soloTerm
	err = db.Update(func(tx *bbolt.Tx) error {
		var logs, conf *bbolt.Bucket
		if tx.Bucket([]byte(bucketMeta)) == nil {
			meta, err := tx.CreateBucket([]byte(bucketMeta))
			if err != nil {
				return err
			}
			if err := putMeta(meta, name); err != nil {
				return err
			}
		} else {
			m, err := readMeta(tx)
			if err != nil {
				return err
			}
			if m.Node != name {
				return fmt.Errorf("the directory belongs to node %q, not %q: %w", m.Node, name, ErrForeign)
			}
		}
		if logs, err = tx.CreateBucketIfNotExists([]byte(bucketLogs)); err != nil {
			return err
		}
		if conf, err = tx.CreateBucketIfNotExists([]byte(bucketConf)); err != nil {
			return err
		}
		// A raft server's bootstrap wrote the configuration at index 1,
		// and if it led alone, a no-op; a command, or a configuration with
		// another member, means that it wrote a group's log.
		c := logs.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var l raft.Log
			if err := codec.NewDecoderBytes(v, &codec.MsgpackHandle{}).Decode(&l); err != nil {
				return fmt.Errorf("log entry %d: %w (%v)", binary.BigEndian.Uint64(k), ErrCorrupt, err)
			}
			switch l.Type {
			case raft.LogNoop, raft.LogBarrier:
			case raft.LogConfiguration:
				conf := raft.DecodeConfiguration(l.Data)
				if len(conf.Servers) != 1 || conf.Servers[0].ID != raft.ServerID(name) {
					return fmt.Errorf("its log has a configuration of %d servers at entry %d: a group's log: %w", len(conf.Servers), l.Index, os.ErrExist)
				}
			default:
				return fmt.Errorf("its log has entries (entry %d is a %v): %w", l.Index, l.Type, os.ErrExist)
			}
			next = l.Index + 1
		}
		// raft-boltdb's encoding of a uint64: 8 bytes, big-endian.
		if v := conf.Get([]byte(confKeyCurrentTerm)); len(v) == 8 {
			term = max(term, binary.BigEndian.Uint64(v)+1)
		}
		t := binary.BigEndian.AppendUint64(nil, term)
		if err := conf.Put([]byte(confKeyCurrentTerm), t); err != nil {
			return err
		}
		if err := conf.Put([]byte(confKeyLastVoteTerm), t); err != nil {
			return err
		}
		// raft records the candidate's address.
		return conf.Put([]byte(confKeyLastVoteCand), []byte(soloAddr(name)))
	})
	if err != nil {
		return nil, 0, 0, errors.Join(err, db.Close())
	}
	return db, next, term, nil
}

// storeLogs appends entries in one transaction, encoded as raft-boltdb
// encodes them (msgpack, times in its old format), so that it and raft
// read them back.
func (s *Solo) storeLogs(logs []*raft.Log) error {
	if s.db == nil {
		return s.mem.StoreLogs(logs)
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketLogs))
		h := codec.MsgpackHandle{BasicHandle: codec.BasicHandle{TimeNotBuiltin: true}}
		for _, l := range logs {
			var val []byte
			if err := codec.NewEncoderBytes(&val, &h).Encode(l); err != nil {
				return fmt.Errorf("encode log entry %d: %w", l.Index, err)
			}
			if err := b.Put(binary.BigEndian.AppendUint64(nil, l.Index), val); err != nil {
				return err
			}
		}
		return nil
	})
}

// Dir returns the log's directory, StateDir/Name ("" in memory).
func (s *Solo) Dir() string { return s.dir }

// FSM returns the state machine, with every command applied so far.
func (s *Solo) FSM() *FSM { return s.fsm }

// Apply commits one command (one transaction, one sync) and returns what
// the FSM made of it, with Replica.Apply's errors: ErrRefused,
// ErrUnknownCommand or ErrMalformed for a command that was committed and
// refused; ErrShutdown after Close; any other error for a command that
// was not written.
func (s *Solo) Apply(c Command) (*Result, error) {
	res, err := s.ApplyBatch([]Command{c})
	if err != nil {
		return nil, err
	}
	return res[0].Result, res[0].Err
}

// Outcome is what the FSM made of one command of a batch.
type Outcome struct {
	Result *Result
	Err    error // the command was committed and refused (ErrRefused...)
}

// ApplyBatch commits commands in order in one transaction (one sync) and
// returns what the FSM made of each. Commands and events without a time
// get the current time. An error means none was written.
func (s *Solo) ApplyBatch(cs []Command) ([]Outcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("raftstore: solo apply: %w", ErrShutdown)
	}
	now := time.Now()
	var logs []*raft.Log
	next := s.next
	if next == 1 {
		conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(s.cfg.Name), Address: soloAddr(s.cfg.Name)}}}
		logs = append(logs, &raft.Log{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(conf), AppendedAt: now})
		next++
	}
	if !s.led { // a leader's first entry in its term
		logs = append(logs, &raft.Log{Index: next, Term: s.term, Type: raft.LogNoop, AppendedAt: now})
		next++
	}
	for _, c := range cs {
		stamp(c, now)
		logs = append(logs, &raft.Log{Index: next, Term: s.term, Type: raft.LogCommand, Data: Encode(c), AppendedAt: now})
		next++
	}
	if err := s.storeLogs(logs); err != nil {
		return nil, fmt.Errorf("raftstore: solo apply: %w", err)
	}
	s.next, s.led = next, true
	out := make([]Outcome, 0, len(cs))
	for _, l := range logs {
		resp := s.fsm.Apply(l)
		if l.Type != raft.LogCommand {
			continue
		}
		switch r := resp.(type) {
		case *Result:
			out = append(out, Outcome{Result: r})
		case error:
			out = append(out, Outcome{Err: fmt.Errorf("raftstore: solo apply: %w", r)})
		default:
			out = append(out, Outcome{Err: fmt.Errorf("raftstore: solo apply: unexpected response %T", resp)})
		}
	}
	return out, nil
}

// Close closes the database. It is idempotent.
func (s *Solo) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.db == nil {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("raftstore: close solo %s: %w", s.cfg.Name, err)
	}
	return nil
}
