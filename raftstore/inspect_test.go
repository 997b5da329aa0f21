package raftstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// stoppedReplica runs a single voter through a small job with a snapshot
// in the middle and a compacted log, stops it, and returns its directory
// and final digest.
func stoppedReplica(t *testing.T) (string, [32]byte) {
	t.Helper()
	addr, tr := raft.NewInmemTransport("")
	defer tr.Close()
	state := t.TempDir()
	r, err := Open(Config{StateDir: state, Name: "n0", Transport: tr, TrailingLogs: 2,
		Peers: []raft.Server{{Suffrage: raft.Voter, ID: "n0", Address: addr}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown()
	if l := <-r.Leadership(); !l.IsLeader {
		t.Fatalf("%+v", l)
	}
	ctx := context.Background()
	if _, err := r.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	setJob(t, r, 256)
	for b := range 4 {
		if _, err := r.Apply(ctx, rankBatch(b*64, 64, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Snapshot(); err != nil {
		t.Fatal(err)
	}
	ev := []Event{{Kind: EventFailure, Node: "node0001", Rank: 17, Incarnation: 1, Detail: "killed"}}
	if _, err := r.Apply(ctx, &AppendEvents{Events: ev}); err != nil {
		t.Fatal(err)
	}
	rec := rankBatch(17, 1, 2)
	rec.Events = append(rec.Events, Event{Kind: EventRecovered, Node: "node0001", Rank: 17, Incarnation: 2})
	if _, err := r.Apply(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(ctx, &Finish{Status: Status{Message: "done"}}); err != nil {
		t.Fatal(err)
	}
	d := r.FSM().Digest()
	if err := r.Shutdown(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(state, "n0"), d
}

func copyFile(t *testing.T, from, to string, n int64) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if n >= 0 && n < int64(len(b)) {
		b = b[:n]
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestInspectSnapshotPlusLog(t *testing.T) {
	dir, digest := stoppedReplica(t)
	in, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	if in.Snapshot == nil || in.FirstIndex <= 1 {
		t.Fatalf("snapshot %v, first index %d: want a compacted log", in.Snapshot, in.FirstIndex)
	}
	if in.State.Digest() != digest {
		t.Fatal("rebuilt state differs")
	}
	if err := in.State.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	replayed := 0
	for _, e := range in.Entries {
		if e.Replayed {
			replayed++
		}
	}
	if replayed < 3 || len(in.Problems) != 0 || len(in.Configuration.Servers) != 1 {
		t.Errorf("%d entries replayed, problems %v, configuration %+v", replayed, in.Problems, in.Configuration)
	}
	// Inspection changed nothing on disk.
	if _, err := os.Stat(filepath.Join(dir, snapshotDir, "permTest")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("inspection wrote into the snapshot directory: %v", err)
	}

	// A damaged snapshot with a compacted log cannot be rebuilt.
	snaps, _ := os.ReadDir(filepath.Join(dir, snapshotDir))
	for _, s := range snaps {
		p := filepath.Join(dir, snapshotDir, s.Name(), "state.bin")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := OpenReadOnly(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged snapshot: %v", err)
	}
}

func TestInspectBadFiles(t *testing.T) {
	dir, _ := stoppedReplica(t)
	db := filepath.Join(dir, dbFile)
	fi, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 7))

	check := func(name string, want error) {
		t.Helper()
		_, err := OpenReadOnly(filepath.Join(scratch, name))
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
			return
		}
		t.Logf("%s: %v", name, err)
	}
	// Truncated copies.
	for _, n := range []int64{fi.Size() / 2, 3 * 4096} {
		name := "truncated.db"
		copyFile(t, db, filepath.Join(scratch, name), n)
		check(name, ErrCorrupt)
	}
	// A whole copy without the snapshots its compacted log needs.
	copyFile(t, db, filepath.Join(scratch, "alone.db"), -1)
	check("alone.db", ErrCorrupt)
	// Too short to hold the header, and empty.
	copyFile(t, db, filepath.Join(scratch, "short.db"), 100)
	check("short.db", ErrCorrupt)
	if err := os.WriteFile(filepath.Join(scratch, "empty.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	check("empty.db", ErrCorrupt)
	// Random bytes.
	junk := make([]byte, 64<<10)
	for i := range junk {
		junk[i] = byte(rng.UintN(256))
	}
	if err := os.WriteFile(filepath.Join(scratch, "random.db"), junk, 0o600); err != nil {
		t.Fatal(err)
	}
	check("random.db", ErrCorrupt)
	// Random bytes over each data page in turn, headers intact: always an
	// error or a state, never a panic.
	orig, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	caught := 0
	for page := 2; page < len(orig)/4096; page++ {
		b := append([]byte(nil), orig...)
		for i := page * 4096; i < (page+1)*4096; i++ {
			b[i] = byte(rng.UintN(256))
		}
		p := filepath.Join(scratch, "pages.db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenReadOnly(p); err != nil {
			caught++
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrForeign) {
				t.Errorf("page %d overwritten: %v", page, err)
			}
			// People's words: a damaged file is said to be damaged, never
			// with bbolt's assertions.
			if s := err.Error(); strings.Contains(s, "panic") || strings.Contains(s, "assertion failed") {
				t.Errorf("page %d overwritten: %v", page, err)
			}
		}
	}
	t.Logf("%d of %d overwritten pages detected", caught, len(orig)/4096-2)
	if caught == 0 {
		t.Error("no overwritten page was detected")
	}

	// A bbolt file of some other program, and another program's raft store.
	other, err := bbolt.Open(filepath.Join(scratch, "other.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("x")); return err }); err != nil {
		t.Fatal(err)
	}
	other.Close()
	check("other.db", ErrForeign)
	rs, err := raftboltdb.NewBoltStore(filepath.Join(scratch, "raft-other.db"))
	if err != nil {
		t.Fatal(err)
	}
	rs.Close()
	check("raft-other.db", ErrForeign)
	if _, err := OpenReadOnly(filepath.Join(scratch, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
