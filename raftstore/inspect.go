package raftstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Meta is what the ftlaunch bucket of a replica's database records.
type Meta struct {
	Format  uint64
	Node    string
	Created time.Time
}

// Entry describes one raft log entry found by OpenReadOnly.
type Entry struct {
	Index      uint64
	Term       uint64
	Type       raft.LogType
	Command    CommandType // for raft.LogCommand entries: the type byte
	Size       int         // bytes of data
	AppendedAt time.Time   // when the leader appended it (zero if unknown)
	Replayed   bool        // applied on top of the snapshot to build State
	Err        error       // the FSM's refusal or decoding error, if any
}

// Inspection is a stopped replica's files, read back.
type Inspection struct {
	Dir    string // the replica's directory
	DBPath string
	Meta   Meta

	// raft's stable store. LastVoteCandidate is what raft recorded: the
	// address of the candidate it last voted for.
	CurrentTerm       uint64
	LastVoteTerm      uint64
	LastVoteCandidate string

	// The log as stored: entries FirstIndex..LastIndex (both 0 if empty).
	// The last entries may never have been committed (raft does not store
	// the commit index); they are replayed like the others.
	FirstIndex, LastIndex uint64
	Entries               []Entry

	// The snapshot State was rebuilt from, if any, and problems with
	// snapshots that were skipped.
	Snapshot *raft.SnapshotMeta
	Problems []string

	// The latest membership: from the last configuration entry in the
	// log, else from the snapshot.
	Configuration      raft.Configuration
	ConfigurationIndex uint64

	// State is the snapshot's state with every later log entry applied.
	State *State
}

// TermStart is where a term's entries begin in the log.
type TermStart struct {
	Term       uint64
	FirstIndex uint64
}

// Terms lists the terms of the stored log entries, in order: each new
// term is a new leader.
func (in *Inspection) Terms() []TermStart {
	var out []TermStart
	for _, e := range in.Entries {
		if len(out) == 0 || out[len(out)-1].Term != e.Term {
			out = append(out, TermStart{Term: e.Term, FirstIndex: e.Index})
		}
	}
	return out
}

// OpenReadOnly reads a replica's directory (or its raft.db file; the
// snapshots are then looked for beside it) without changing anything, and
// rebuilds its state from the newest readable snapshot plus the log
// entries after it. A replica that is running holds its database locked:
// OpenReadOnly then fails within about 100 ms with an error wrapping
// ErrLocked. A file that is not an ftlaunch replica's database gives
// ErrForeign; a truncated or damaged one gives ErrCorrupt. It never
// panics on bad files.
func OpenReadOnly(path string) (*Inspection, error) {
	in, err := openReadOnly(path)
	if err != nil {
		return nil, fmt.Errorf("raftstore: inspect %s: %w", path, err)
	}
	return in, nil
}

func openReadOnly(path string) (*Inspection, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	in := &Inspection{Dir: path, DBPath: filepath.Join(path, dbFile)}
	if !fi.IsDir() {
		in.Dir, in.DBPath = filepath.Dir(path), path
	}
	fi, err = os.Stat(in.DBPath)
	if err != nil {
		return nil, err
	}
	if fi.Size() == 0 {
		// bbolt would try to initialise it, even read-only.
		return nil, fmt.Errorf("empty file: %w", ErrCorrupt)
	}
	db, err := bbolt.Open(in.DBPath, 0o600, &bbolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if err != nil {
		switch {
		case errors.Is(err, bbolt.ErrTimeout):
			return nil, lockErr(err)
		case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrChecksum):
			return nil, fmt.Errorf("not a bbolt database, or its header is damaged: %w (%v)", ErrCorrupt, err)
		}
		return nil, fmt.Errorf("open database: %w", err)
	}
	defer db.Close()
	if err := guard(func() error { return checkDB(db, fi.Size(), in) }); err != nil {
		return nil, err
	}
	// The log's values are raft-boltdb's encoding: read them through it.
	// Both handles hold shared locks, which do not exclude each other.
	store, err := raftboltdb.New(raftboltdb.Options{Path: in.DBPath, BoltOptions: &bbolt.Options{ReadOnly: true, Timeout: lockTimeout}})
	if err != nil {
		return nil, fmt.Errorf("open log store: %w", lockErr(err))
	}
	defer store.Close()
	var logs []*raft.Log
	if err := guard(func() error {
		var err error
		logs, err = readLog(store, in)
		return err
	}); err != nil {
		return nil, err
	}
	if err := rebuild(in, logs); err != nil {
		return nil, err
	}
	return in, nil
}

// guard runs fn, turning a panic (bbolt panics on some damaged pages) or a
// memory fault into an error wrapping ErrCorrupt.
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the file is damaged (overwritten or cut short, by a crash or another program): reading it failed (%s): %w",
				strings.TrimPrefix(fmt.Sprint(p), "assertion failed: "), ErrCorrupt)
		}
	}()
	return fn()
}

// plainCheckError is a problem bbolt's check found, without the words of
// its own assertions ("panic: assertion failed: Page expected to be: ...").
func plainCheckError(err error) string {
	s := strings.TrimPrefix(err.Error(), "panic: ")
	return strings.TrimPrefix(s, "assertion failed: ")
}

// checkDB checks that the file is whole and consistent and is an ftlaunch
// replica's, and reads the metadata and raft's stable store.
func checkDB(db *bbolt.DB, fileSize int64, in *Inspection) error {
	return db.View(func(tx *bbolt.Tx) error {
		if need := tx.Size(); fileSize < need {
			return fmt.Errorf("truncated: %d bytes, the database needs %d: %w", fileSize, need, ErrCorrupt)
		}
		var problems []string
		n := 0
		for err := range tx.Check() {
			if n++; len(problems) < 3 {
				problems = append(problems, plainCheckError(err))
			}
		}
		if n > 0 {
			return fmt.Errorf("the file is damaged (overwritten or cut short, by a crash or another program): %d problem(s) in its pages (%s): %w",
				n, strings.Join(problems, "; "), ErrCorrupt)
		}
		if tx.Bucket([]byte(bucketMeta)) == nil {
			what := "a bbolt database without the " + bucketMeta + " bucket"
			if tx.Bucket([]byte(bucketLogs)) != nil {
				what = "another program's raft database"
			}
			return fmt.Errorf("%s: %w", what, ErrForeign)
		}
		m, err := readMeta(tx)
		if err != nil {
			return err
		}
		in.Meta = m
		conf := tx.Bucket([]byte(bucketConf))
		if conf == nil || tx.Bucket([]byte(bucketLogs)) == nil {
			return fmt.Errorf("the %q or %q bucket is missing: %w", bucketLogs, bucketConf, ErrCorrupt)
		}
		for _, k := range []struct {
			key string
			v   *uint64
		}{{confKeyCurrentTerm, &in.CurrentTerm}, {confKeyLastVoteTerm, &in.LastVoteTerm}} {
			b := conf.Get([]byte(k.key))
			if b == nil {
				continue
			}
			if len(b) != 8 {
				return fmt.Errorf("%s is %d bytes, not 8: %w", k.key, len(b), ErrCorrupt)
			}
			*k.v = binary.BigEndian.Uint64(b)
		}
		in.LastVoteCandidate = string(conf.Get([]byte(confKeyLastVoteCand)))
		return nil
	})
}

// readMeta reads the ftlaunch bucket.
func readMeta(tx *bbolt.Tx) (Meta, error) {
	b := tx.Bucket([]byte(bucketMeta))
	if b == nil {
		return Meta{}, fmt.Errorf("no %s bucket: %w", bucketMeta, ErrForeign)
	}
	var m Meta
	d := newDecoder(b.Get([]byte(metaKeyFormat)), "format version")
	m.Format = d.uint()
	if d.err != nil {
		return Meta{}, fmt.Errorf("%w: %w", d.err, ErrCorrupt)
	}
	if m.Format == 0 || m.Format > formatVersion {
		return Meta{}, fmt.Errorf("format version %d, this build reads up to %d: %w", m.Format, formatVersion, ErrForeign)
	}
	m.Node = string(b.Get([]byte(metaKeyNode)))
	if m.Node == "" {
		return Meta{}, fmt.Errorf("no node name recorded: %w", ErrCorrupt)
	}
	if c := b.Get([]byte(metaKeyCreated)); c != nil {
		t, err := time.Parse(time.RFC3339Nano, string(c))
		if err != nil {
			return Meta{}, fmt.Errorf("creation time %q: %w", c, ErrCorrupt)
		}
		m.Created = t
	}
	return m, nil
}

// readLog reads every stored log entry.
func readLog(store *raftboltdb.BoltStore, in *Inspection) ([]*raft.Log, error) {
	first, err := store.FirstIndex()
	if err != nil {
		return nil, fmt.Errorf("first index: %w", err)
	}
	last, err := store.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("last index: %w", err)
	}
	in.FirstIndex, in.LastIndex = first, last
	if last < first {
		return nil, fmt.Errorf("log indexes %d..%d: %w", first, last, ErrCorrupt)
	}
	var logs []*raft.Log
	if last == 0 {
		return nil, nil
	}
	for i := first; i <= last; i++ {
		l := new(raft.Log)
		if err := store.GetLog(i, l); err != nil {
			return nil, fmt.Errorf("log entry %d of %d..%d: %w (%v)", i, first, last, ErrCorrupt, err)
		}
		if l.Index != i {
			return nil, fmt.Errorf("log entry %d records index %d: %w", i, l.Index, ErrCorrupt)
		}
		logs = append(logs, l)
	}
	return logs, nil
}

// snapshotFile is raft's FileSnapshotStore meta.json.
type snapshotFile struct {
	raft.SnapshotMeta
	CRC []byte
}

// listSnapshots lists the snapshots under dir/snapshots, newest first,
// without writing anything (raft's FileSnapshotStore would create the
// directory and a permission-test file).
func listSnapshots(dir string, problems *[]string) []snapshotFile {
	entries, err := os.ReadDir(filepath.Join(dir, snapshotDir))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			*problems = append(*problems, fmt.Sprintf("snapshots: %v", err))
		}
		return nil
	}
	var out []snapshotFile
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue // raft's own temporary directories are unfinished snapshots
		}
		b, err := os.ReadFile(filepath.Join(dir, snapshotDir, e.Name(), "meta.json"))
		var m snapshotFile
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil {
			*problems = append(*problems, fmt.Sprintf("snapshot %s: meta: %v", e.Name(), err))
			continue
		}
		m.ID = e.Name()
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b snapshotFile) int {
		if a.Term != b.Term {
			return cmpUint(b.Term, a.Term)
		}
		if a.Index != b.Index {
			return cmpUint(b.Index, a.Index)
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// loadSnapshot reads and checks one snapshot and restores it.
func loadSnapshot(dir string, m snapshotFile) (*FSM, error) {
	b, err := os.ReadFile(filepath.Join(dir, snapshotDir, m.ID, "state.bin"))
	if err != nil {
		return nil, err
	}
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	h.Write(b)
	if !bytes.Equal(h.Sum(nil), m.CRC) {
		return nil, fmt.Errorf("checksum mismatch: %w", ErrCorrupt)
	}
	f := NewFSM()
	if err := f.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
		return nil, err
	}
	return f, nil
}

// rebuild restores the newest usable snapshot and replays the log after
// it.
func rebuild(in *Inspection, logs []*raft.Log) error {
	var f *FSM
	for _, m := range listSnapshots(in.Dir, &in.Problems) {
		if len(logs) > 0 && m.Index+1 < in.FirstIndex {
			in.Problems = append(in.Problems, fmt.Sprintf("snapshot %s at index %d leaves a gap before the log's first entry %d", m.ID, m.Index, in.FirstIndex))
			continue
		}
		g, err := loadSnapshot(in.Dir, m)
		if err != nil {
			in.Problems = append(in.Problems, fmt.Sprintf("snapshot %s: %v", m.ID, err))
			continue
		}
		f = g
		meta := m.SnapshotMeta
		in.Snapshot = &meta
		in.Configuration, in.ConfigurationIndex = meta.Configuration, meta.ConfigurationIndex
		break
	}
	var from uint64 // entries after this index are replayed
	if f != nil {
		from = in.Snapshot.Index
	} else {
		if in.FirstIndex > 1 {
			why := "none found in " + filepath.Join(in.Dir, snapshotDir)
			if len(in.Problems) > 0 {
				why = strings.Join(in.Problems, "; ")
			}
			return fmt.Errorf("the log starts at entry %d and no snapshot is readable (%s): %w", in.FirstIndex, why, ErrCorrupt)
		}
		f = NewFSM()
	}
	for _, l := range logs {
		e := Entry{Index: l.Index, Term: l.Term, Type: l.Type, Size: len(l.Data), AppendedAt: l.AppendedAt}
		if l.Type == raft.LogCommand && len(l.Data) > 0 {
			e.Command = CommandType(l.Data[0])
		}
		if l.Index > from {
			e.Replayed = true
			switch l.Type {
			case raft.LogCommand:
				if err, ok := f.Apply(l).(error); ok {
					e.Err = err
				}
			case raft.LogConfiguration:
				c, err := decodeConfiguration(l.Data)
				if err != nil {
					return fmt.Errorf("log entry %d: %w", l.Index, err)
				}
				in.Configuration, in.ConfigurationIndex = c, l.Index
			}
		}
		in.Entries = append(in.Entries, e)
	}
	in.State = f.Copy()
	return nil
}

// decodeConfiguration wraps raft.DecodeConfiguration, which panics on bad
// input.
func decodeConfiguration(b []byte) (c raft.Configuration, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("configuration entry: %v: %w", p, ErrCorrupt)
		}
	}()
	return raft.DecodeConfiguration(b), nil
}
