package raftstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestSoloLog: a solo log of a small job reads back as a replica's
// (inspection, invariants, the same state as applied), a refused command
// is committed and refused as under raft, and a raft server opened on the
// directory afterwards leads with that state.
func TestSoloLog(t *testing.T) {
	state := t.TempDir()
	s, err := OpenSolo(SoloConfig{StateDir: state, Name: "n0"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.ApplyBatch([]Command{
		&SetJob{Job: JobSpec{ID: "job-7", Size: 32, Spec: []byte("./a.out")}},
		&UpdateAgents{Agents: []Agent{{Node: "node0000", Addr: "10.1.0.0:7000", Incarnation: 1}, {Node: "node0001", Addr: "10.1.0.1:7000", Incarnation: 1}}},
		rankBatch(0, 32, 1),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil || o.Result == nil {
			t.Fatalf("command %d: %+v", i, o)
		}
	}
	if _, err := s.Apply(&Finish{Status: Status{Done: true, Message: "done"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(&Finish{Status: Status{Done: true, Message: "again"}}); !errors.Is(err, ErrRefused) {
		t.Fatalf("a second final status: %v, want ErrRefused", err)
	}
	digest := s.FSM().Digest()
	if _, err := OpenSolo(SoloConfig{StateDir: state, Name: "n0"}); err == nil {
		t.Fatal("a second solo log opened on the same directory")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(&AppendEvents{}); !errors.Is(err, ErrShutdown) {
		t.Fatalf("apply after close: %v, want ErrShutdown", err)
	}

	dir := filepath.Join(state, "n0")
	in, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	if in.State.Digest() != digest {
		t.Fatal("inspection rebuilt another state")
	}
	if err := in.State.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if in.Meta.Node != "n0" || in.CurrentTerm != soloTerm || in.FirstIndex != 1 || in.LastIndex != 7 || len(in.Problems) != 0 ||
		len(in.Configuration.Servers) != 1 || in.Configuration.Servers[0].ID != "n0" {
		t.Fatalf("inspection: %+v", in)
	}
	if !in.State.Status.Done || in.State.Status.Message != "done" {
		t.Fatalf("final status %+v", in.State.Status)
	}

	// raft takes the directory over: it elects its voter and replays the
	// log into the same state.
	_, tr := raft.NewInmemTransport(soloAddr("n0"))
	defer tr.Close()
	r, err := Open(Config{StateDir: state, Name: "n0", Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown()
	for l := range r.Leadership() {
		if l.IsLeader {
			break
		}
	}
	if err := r.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.FSM().Digest() != digest {
		t.Fatal("raft replayed the solo log into another state")
	}
	if err := r.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

// TestSoloInMemory: a solo log in memory writes no file.
func TestSoloInMemory(t *testing.T) {
	state := t.TempDir()
	s, err := OpenSolo(SoloConfig{StateDir: state, Name: "n0", InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(&SetJob{Job: JobSpec{ID: "job-7", Size: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(state); len(ents) != 0 || s.Dir() != "" {
		t.Fatalf("files %v, dir %q", ents, s.Dir())
	}
}

// TestSoloAfterBootstrap: a single voter's raft server that never led
// (its timers far off), or led and wrote nothing, leaves a log a solo log
// continues; one with a command does not.
func TestSoloAfterBootstrap(t *testing.T) {
	slow := Timing{HeartbeatTimeout: time.Hour, ElectionTimeout: time.Hour, LeaderLeaseTimeout: time.Hour, CommitTimeout: time.Second}
	t.Run("never led", func(t *testing.T) { testSoloAfterBootstrap(t, slow, false, 4) })
	t.Run("led", func(t *testing.T) { testSoloAfterBootstrap(t, DefaultTiming(1), true, 6) })
}

func testSoloAfterBootstrap(t *testing.T, timing Timing, lead bool, last uint64) {
	state := t.TempDir()
	addr, tr := raft.NewInmemTransport("")
	defer tr.Close()
	r, err := Open(Config{StateDir: state, Name: "n0", Transport: tr, Timing: timing,
		Peers: []raft.Server{{Suffrage: raft.Voter, ID: "n0", Address: addr}}})
	if err != nil {
		t.Fatal(err)
	}
	if lead {
		for l := range r.Leadership() {
			if l.IsLeader {
				break
			}
		}
		if err := r.Barrier(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Shutdown(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSolo(SoloConfig{StateDir: state, Name: "n0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyBatch([]Command{&SetJob{Job: JobSpec{ID: "job-7", Size: 2}}, &Finish{Status: Status{Done: true}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := OpenReadOnly(filepath.Join(state, "n0"))
	if err != nil {
		t.Fatal(err)
	}
	if in.LastIndex != last || !in.State.Status.Done || in.State.Job.ID != "job-7" || len(in.Configuration.Servers) != 1 || in.Configuration.Servers[0].Address != addr {
		t.Fatalf("inspection: %+v", in)
	}
	if _, err := OpenSolo(SoloConfig{StateDir: state, Name: "n0"}); !errors.Is(err, os.ErrExist) {
		t.Fatalf("a solo log over a written log: %v, want os.ErrExist", err)
	}
}
