package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fsmHarness applies commands to an FSM at consecutive log indexes.
type fsmHarness struct {
	t     *testing.T
	f     *FSM
	index uint64
	term  uint64
}

func newHarness(t *testing.T) *fsmHarness {
	return &fsmHarness{t: t, f: NewFSM(), term: 1}
}

func (h *fsmHarness) raw(data []byte) interface{} {
	h.index++
	return h.f.Apply(&raft.Log{Index: h.index, Term: h.term, Type: raft.LogCommand, Data: data})
}

// ok applies c and fails the test unless it is accepted.
func (h *fsmHarness) ok(c Command) *Result {
	h.t.Helper()
	switch r := h.raw(Encode(c)).(type) {
	case *Result:
		return r
	case error:
		h.t.Fatalf("apply %T: %v", c, r)
	default:
		h.t.Fatalf("apply %T: response %T", c, r)
	}
	return nil
}

// refused applies c and fails the test unless it is refused with want.
func (h *fsmHarness) refused(c Command, want error) {
	h.t.Helper()
	before := h.f.Digest()
	resp := h.raw(Encode(c))
	err, isErr := resp.(error)
	if !isErr || !errors.Is(err, want) {
		h.t.Fatalf("apply %T: got %v, want an error wrapping %v", c, resp, want)
	}
	if h.f.Digest() != before {
		h.t.Fatalf("apply %T: refused command changed the state", c)
	}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ev(kind EventKind, node string, rank int, inc uint64, detail string) Event {
	return Event{Time: t0, Kind: kind, Node: node, Rank: rank, Incarnation: inc, Detail: detail}
}

// launch sets a job of n ranks on n/4 nodes with agents and running ranks.
func (h *fsmHarness) launch(n int) {
	h.t.Helper()
	h.ok(&SetJob{Job: JobSpec{ID: "job-1", Size: n, Spec: []byte("argv")}, Events: []Event{ev(EventLaunch, "n0", NoRank, 0, "job submitted")}})
	nodes := (n + 3) / 4
	var plan Plan
	var agents []Agent
	for i := range nodes {
		name := fmt.Sprintf("n%d", i)
		pn := PlanNode{Name: name}
		if i > 0 {
			pn.Primary = fmt.Sprintf("n%d", (i-1)/2)
			pn.Backup = "n0"
		}
		plan.Nodes = append(plan.Nodes, pn)
		agents = append(agents, Agent{Node: name, Addr: fmt.Sprintf("10.0.0.%d:7000", i), Incarnation: 1})
	}
	plan.Replicas = []string{"n0"}
	h.ok(&SetPlan{Plan: plan})
	h.ok(&UpdateAgents{Agents: agents})
	var ranks []Rank
	for r := range n {
		ranks = append(ranks, Rank{Rank: r, Node: fmt.Sprintf("n%d", r/4), PID: 1000 + r, ITuple: []byte(fmt.Sprintf("10.0.0.%d:%d", r/4, 9000+r)), Incarnation: 1, State: RankRunning})
	}
	h.ok(&UpdateRanks{Ranks: ranks, Events: []Event{ev(EventLaunch, "", NoRank, 0, "node table complete")}})
}

func TestFSMLaunch(t *testing.T) {
	h := newHarness(t)
	h.launch(16)
	s := h.f.Copy()
	if s.Version != 4 {
		t.Errorf("version %d, want 4 (job, plan, agents, ranks)", s.Version)
	}
	if got := len(s.Ranks); got != 16 {
		t.Fatalf("%d ranks", got)
	}
	r := s.Ranks[13]
	if r.Rank != 13 || r.Node != "n3" || r.PID != 1013 || string(r.ITuple) != "10.0.0.3:9013" || r.State != RankRunning || r.Incarnation != 1 {
		t.Errorf("rank 13: %+v", r)
	}
	if len(s.Agents) != 4 || s.Agents["n2"].Addr != "10.0.0.2:7000" {
		t.Errorf("agents: %+v", s.Agents)
	}
	if len(s.Events) != 2 || s.Events[1].Index != 4 || s.Events[1].Version != 4 || !s.Events[1].Time.Equal(t0) {
		t.Errorf("events: %+v", s.Events)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
	// A retried SetJob is harmless; a different one is refused.
	h.ok(&SetJob{Job: JobSpec{ID: "job-1", Size: 16, Spec: []byte("argv")}})
	h.refused(&SetJob{Job: JobSpec{ID: "job-2", Size: 16}}, ErrRefused)
	if v := h.f.Copy().Version; v != 4 {
		t.Errorf("version %d after a retried SetJob", v)
	}
}

func TestFSMBeforeJob(t *testing.T) {
	h := newHarness(t)
	h.refused(&UpdateRanks{Ranks: []Rank{{Rank: 0, State: RankRunning}}}, ErrRefused)
	h.refused(&SetPlan{}, ErrRefused)
	h.refused(&UpdateAgents{Agents: []Agent{{Node: "a"}}}, ErrRefused)
	h.refused(&SetJob{Job: JobSpec{ID: "j", Size: 0}}, ErrRefused)
	h.refused(&SetJob{Job: JobSpec{ID: "", Size: 3}}, ErrRefused)
}

func TestFSMStaleRowsAndVersionCheck(t *testing.T) {
	h := newHarness(t)
	h.launch(8)
	v := h.f.Copy().Version

	// A patch computed against an old table is refused as a whole.
	h.refused(&UpdateRanks{ExpectVersion: v - 1, Ranks: []Rank{{Rank: 1, Node: "n0", Incarnation: 2, State: RankStarting}}}, ErrRefused)
	// A rank outside the job is refused.
	h.refused(&UpdateRanks{Ranks: []Rank{{Rank: 8, Node: "n0", Incarnation: 1, State: RankRunning}}}, ErrRefused)

	// Rank 2 exits; then a late "running" of the same incarnation and a
	// report from incarnation 0 are skipped, rank 3's new incarnation is not.
	res := h.ok(&UpdateRanks{ExpectVersion: v, Ranks: []Rank{{Rank: 2, Node: "n0", PID: 1002, ITuple: []byte("10.0.0.0:9002"), Incarnation: 1, State: RankExited, ExitCode: 3}}})
	if res.Version != v+1 || len(res.Stale) != 0 {
		t.Fatalf("exit: %+v", res)
	}
	res = h.ok(&UpdateRanks{Ranks: []Rank{
		{Rank: 2, Node: "n0", PID: 1002, Incarnation: 1, State: RankRunning},
		{Rank: 1, Node: "n0", PID: 1, Incarnation: 0, State: RankRunning},
		{Rank: 3, Node: "n1", PID: 2003, ITuple: []byte("x"), Incarnation: 2, State: RankStarting},
	}})
	if res.Version != v+2 || fmt.Sprint(res.Stale) != "[0 1]" {
		t.Fatalf("mixed update: %+v", res)
	}
	s := h.f.Copy()
	if s.Ranks[2].State != RankExited || s.Ranks[2].ExitCode != 3 || s.Ranks[1].Incarnation != 1 || s.Ranks[3].Incarnation != 2 || s.Ranks[3].Node != "n1" {
		t.Errorf("rows: %+v %+v %+v", s.Ranks[1], s.Ranks[2], s.Ranks[3])
	}
	// An update that changes nothing does not advance the version.
	res = h.ok(&UpdateRanks{Ranks: []Rank{s.Ranks[3]}})
	if res.Version != v+2 {
		t.Errorf("no-op update moved the version to %d", res.Version)
	}
	// Agents: a lower incarnation is stale.
	res = h.ok(&UpdateAgents{Agents: []Agent{{Node: "n1", Addr: "old", Incarnation: 0}, {Node: "n1", Addr: "new", Incarnation: 2}}})
	if fmt.Sprint(res.Stale) != "[0]" || h.f.Copy().Agents["n1"].Addr != "new" {
		t.Errorf("agents: %+v %+v", res, h.f.Copy().Agents["n1"])
	}
	h.refused(&UpdateAgents{Agents: []Agent{{Node: ""}}}, ErrRefused)
}

func TestFSMFailureRecovery(t *testing.T) {
	h := newHarness(t)
	h.launch(8)
	h.ok(&AppendEvents{Events: []Event{ev(EventFailure, "n1", 5, 1, "waitpid: signal 9")}})
	if err := h.f.CheckInvariants(); !errors.Is(err, ErrInvariant) {
		t.Fatalf("open failure not reported: %v", err)
	}
	// The root de-duplicates: a second report of the same failure, or one
	// about an older incarnation, is refused.
	h.refused(&AppendEvents{Events: []Event{ev(EventFailure, "n1", 5, 1, "again")}}, ErrRefused)
	h.refused(&AppendEvents{Events: []Event{ev(EventFailure, "n1", 5, 0, "stale")}}, ErrRefused)
	// A recovery without a failure, or not to a newer incarnation, is refused.
	h.refused(&AppendEvents{Events: []Event{ev(EventRecovered, "n1", 4, 2, "")}}, ErrRefused)
	h.refused(&AppendEvents{Events: []Event{ev(EventRecovered, "n1", 5, 1, "")}}, ErrRefused)
	// Leader and job-end events come from their commands only.
	h.refused(&AppendEvents{Events: []Event{ev(EventJobEnd, "", NoRank, 0, "")}}, ErrRefused)

	e := h.ok(&BumpEpoch{ExpectEpoch: 0, Reason: "failure of rank 5"}).Epoch
	h.refused(&BumpEpoch{ExpectEpoch: 0}, ErrRefused)
	for _, step := range []string{"suspend", "respawn"} {
		h.ok(&AppendEvents{Events: []Event{{Time: t0, Kind: EventRecovery, Rank: NoRank, Detail: step}}})
	}
	v := h.f.Copy().Version
	h.ok(&UpdateRanks{ExpectVersion: v, Ranks: []Rank{{Rank: 5, Node: "n2", PID: 77, ITuple: []byte("new"), Incarnation: 2, State: RankRunning}},
		Events: []Event{{Time: t0, Kind: EventRecovery, Rank: NoRank, Detail: "patch"}, ev(EventRecovered, "n2", 5, 2, "respawned on n2")}})
	if err := h.f.CheckInvariants(); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	// A node failure during the job, never recovered, is closed by the end.
	h.ok(&AppendEvents{Events: []Event{ev(EventFailure, "n3", NoRank, 1, "heartbeat timeout")}})
	res := h.ok(&Finish{Time: t0, Status: Status{ExitCode: 1, Message: "rank 5 failed twice"}})
	if err := h.f.CheckInvariants(); err != nil {
		t.Fatalf("after the end: %v", err)
	}
	h.ok(&Finish{Time: t0, Status: Status{Done: true, ExitCode: 1, Message: "rank 5 failed twice"}}) // a retry
	h.refused(&Finish{Status: Status{ExitCode: 0}}, ErrRefused)
	h.refused(&AppendEvents{Events: []Event{ev(EventFailure, "n1", 1, 1, "late")}}, ErrRefused)
	s := h.f.Copy()
	if !s.Status.Done || s.Status.ExitCode != 1 || s.Epoch != e || res.Epoch != 1 {
		t.Errorf("status %+v epoch %d", s.Status, s.Epoch)
	}
	if last := s.Events[len(s.Events)-1]; last.Kind != EventJobEnd || last.Detail != "rank 5 failed twice" {
		t.Errorf("last event %+v", last)
	}
}

func TestFSMSupersedingFailure(t *testing.T) {
	h := newHarness(t)
	h.launch(4)
	h.ok(&AppendEvents{Events: []Event{ev(EventFailure, "n0", 1, 1, "")}})
	h.ok(&UpdateRanks{Ranks: []Rank{{Rank: 1, Node: "n0", Incarnation: 2, State: RankStarting}}})
	// The respawned incarnation fails before the recovery closed.
	h.ok(&AppendEvents{Events: []Event{ev(EventFailure, "n0", 1, 2, "failed during recovery")}})
	h.ok(&UpdateRanks{Ranks: []Rank{{Rank: 1, Node: "n0", Incarnation: 3, State: RankRunning}}, Events: []Event{ev(EventRecovered, "n0", 1, 3, "")}})
	if err := h.f.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestFSMUnknownCommand(t *testing.T) {
	h := newHarness(t)
	h.launch(4)
	before := h.f.Digest()
	payload := []byte{1, 0, 42, 42} // version 1, no events, fields this build does not know

	resp := h.raw(append([]byte{0x55}, payload...))
	if err, ok := resp.(error); !ok || !errors.Is(err, ErrUnknownCommand) {
		t.Fatalf("unknown type without the bit: %v", resp)
	}
	resp = h.raw(append([]byte{0x55 | byte(IgnoreUnknown)}, payload...))
	if r, ok := resp.(*Result); !ok || !r.Ignored {
		t.Fatalf("unknown type with the bit: %v", resp)
	}
	if h.f.Digest() != before {
		t.Fatal("an unknown command changed the state")
	}
	if got := h.f.AppliedIndex(); got != h.index {
		t.Errorf("applied index %d, want %d", got, h.index)
	}
	// A known type with the bit set is applied as usual.
	data := Encode(&AppendEvents{Events: []Event{ev(EventLaunch, "n0", NoRank, 0, "x")}})
	data[0] |= byte(IgnoreUnknown)
	if r, ok := h.raw(data).(*Result); !ok || r.Ignored {
		t.Fatalf("known type with the bit: %v", r)
	}
	// Non-command entries are not the FSM's business.
	if resp := h.f.Apply(&raft.Log{Index: 100, Type: raft.LogConfiguration}); resp != nil {
		t.Errorf("configuration entry: %v", resp)
	}
}

func TestFSMNewerPayloadFields(t *testing.T) {
	h := newHarness(t)
	h.launch(4)
	// A newer leader appends a field: an older replica reads what it knows.
	data := Encode(&BumpEpoch{ExpectEpoch: 0, Leader: "n1", Reason: "takeover"})
	data = append(data, 0x07, 0x01)
	r, ok := h.raw(data).(*Result)
	if !ok || r.Epoch != 1 {
		t.Fatalf("got %v", r)
	}
	if s := h.f.Copy(); s.Leader != "n1" || s.LeaderTerm != h.term {
		t.Errorf("leader %q term %d", s.Leader, s.LeaderTerm)
	}
}

func TestDecodeMalformed(t *testing.T) {
	cmds := []Command{
		&SetJob{Job: JobSpec{ID: "j", Size: 3, Spec: []byte("spec")}, Events: []Event{ev(EventLaunch, "n", NoRank, 0, "d")}},
		&SetPlan{Plan: Plan{Nodes: []PlanNode{{Name: "a", Primary: "b", Backup: "c"}}, Replicas: []string{"a"}}},
		&UpdateAgents{Agents: []Agent{{Node: "a", Addr: "x", Incarnation: 3}}},
		&UpdateRanks{ExpectVersion: 9, Ranks: []Rank{{Rank: 1, Node: "a", PID: 5, ITuple: []byte("it"), Incarnation: 2, State: RankRunning, ExitCode: -1}}},
		&AppendEvents{Events: []Event{ev(EventFailure, "n", 2, 1, "d")}},
		&BumpEpoch{Time: t0, ExpectEpoch: 4, Leader: "l", Reason: "r"},
		&Finish{Time: t0, Status: Status{ExitCode: 2, Message: "m"}},
	}
	for _, c := range cmds {
		data := Encode(c)
		got, err := Decode(data)
		if err != nil {
			t.Fatalf("%T: %v", c, err)
		}
		if !bytes.Equal(Encode(got), data) {
			t.Errorf("%T: round trip differs", c)
		}
		// Every strict prefix is an error, never a panic. (A prefix that
		// ends exactly where an optional field would begin is still a
		// full command of an older version; the cases above have none.)
		for n := 0; n < len(data); n++ {
			if _, err := Decode(data[:n]); err == nil {
				t.Errorf("%T: prefix of %d/%d bytes decoded", c, n, len(data))
			}
		}
	}
	// Forged counts and rank states.
	for _, data := range [][]byte{
		{byte(TypeUpdateRanks), 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		{byte(TypeUpdateRanks), 1, 0, 0, 1, 1, 'a', 1, 0, 0, 0, 1, 0, 9, 0, 0}, // state 9
		{byte(TypeUpdateRanks), 1, 0, 0, 1, 1, 'a', 1, 0, 5, 0, 1, 2, 0, 0},    // node index 5
		{byte(TypeSetJob), 0},
	} {
		if _, err := Decode(data); !errors.Is(err, ErrMalformed) {
			t.Errorf("% x: %v", data, err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, rng.IntN(64))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		_, _ = Decode(b)
		_, _ = unmarshalState(b)
	}
}

// snapshotRoundTrip persists f's snapshot into an in-memory store and
// restores it into a new FSM.
func snapshotRoundTrip(t *testing.T, f *FSM) *FSM {
	t.Helper()
	store := raft.NewInmemSnapshotStore()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink, err := store.Create(raft.SnapshotVersionMax, f.AppliedIndex(), 1, raft.Configuration{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	_, rc, err := store.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	g := NewFSM()
	if err := g.Restore(rc); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestFSMSnapshotRestore(t *testing.T) {
	h := newHarness(t)
	h.launch(64)
	h.ok(&AppendEvents{Events: []Event{ev(EventFailure, "n1", 5, 1, "x")}})
	h.ok(&BumpEpoch{ExpectEpoch: 0, Leader: "n0", Reason: "takeover"})

	g := snapshotRoundTrip(t, h.f)
	if g.Digest() != h.f.Digest() {
		t.Fatal("restored state has another digest")
	}
	if g.AppliedIndex() != h.f.AppliedIndex() {
		t.Errorf("applied index %d, want %d", g.AppliedIndex(), h.f.AppliedIndex())
	}
	// The restored FSM knows the open failure: a duplicate is refused, the
	// recovery is accepted, on both.
	h2 := &fsmHarness{t: t, f: g, index: h.index, term: h.term}
	for _, x := range []*fsmHarness{h, h2} {
		x.refused(&AppendEvents{Events: []Event{ev(EventFailure, "n1", 5, 1, "again")}}, ErrRefused)
		x.ok(&UpdateRanks{Ranks: []Rank{{Rank: 5, Node: "n1", Incarnation: 2, State: RankRunning}}, Events: []Event{ev(EventRecovered, "n1", 5, 2, "")}})
	}
	if g.Digest() != h.f.Digest() {
		t.Fatal("digests differ after the same command")
	}
	if err := g.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// A damaged snapshot is an error.
	data := h.f.Copy().marshal()
	for _, bad := range [][]byte{data[:len(data)/2], append([]byte("XXXX"), data[4:]...), append(data[:len(data):len(data)], 0)} {
		if _, err := unmarshalState(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("damaged snapshot: %v", err)
		}
	}
}

func TestFSMApplyBatchMatchesApply(t *testing.T) {
	h := newHarness(t)
	h.launch(32)
	var logs []*raft.Log
	for i := range 10 {
		c := &UpdateRanks{Ranks: []Rank{{Rank: i, Node: "n9", Incarnation: 2, State: RankStarting}}}
		logs = append(logs, &raft.Log{Index: h.index + 1 + uint64(i), Term: 2, Type: raft.LogCommand, Data: Encode(c)})
	}
	logs = append(logs, &raft.Log{Index: h.index + 11, Term: 2, Type: raft.LogNoop})
	g := snapshotRoundTrip(t, h.f)
	for _, l := range logs {
		g.Apply(l)
	}
	out := h.f.ApplyBatch(logs)
	if len(out) != len(logs) || out[10] != nil {
		t.Fatalf("batch responses: %v", out)
	}
	if r, ok := out[9].(*Result); !ok || r.Index != logs[9].Index {
		t.Fatalf("batch response 9: %v", out[9])
	}
	if g.Digest() != h.f.Digest() {
		t.Fatal("ApplyBatch and Apply disagree")
	}
}

func TestCheckInvariantsDetects(t *testing.T) {
	h := newHarness(t)
	h.launch(4)
	h.ok(&UpdateRanks{Ranks: []Rank{{Rank: 1, Node: "n0", Incarnation: 3, State: RankRunning}}, Events: []Event{ev(EventLaunch, "n0", 1, 3, "")}})
	good := h.f.Copy()
	if err := good.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(s *State){
		"version back": func(s *State) { s.Events[1].Version = 0 },
		"epoch back": func(s *State) {
			s.Events = append(s.Events, s.Events[len(s.Events)-1])
			s.Epoch = 5
			s.Events[1].Epoch = 5
		},
		"incarnation back in table": func(s *State) {
			s.Ranks = append([]Rank(nil), s.Ranks...)
			s.Ranks[1].Incarnation = 2
		},
		"incarnation back in events": func(s *State) {
			s.Events = append(s.Events, ev(EventExit, "n0", 1, 1, ""))
			s.Events[len(s.Events)-1].Index, s.Events[len(s.Events)-1].Version = 99, s.Version
		},
		"open failure": func(s *State) {
			s.Events = append(s.Events, ev(EventFailure, "n0", 2, 1, ""))
			s.Events[len(s.Events)-1].Index, s.Events[len(s.Events)-1].Version = 99, s.Version
		},
		"job end without status": func(s *State) {
			s.Events = append(s.Events, ev(EventJobEnd, "", NoRank, 0, ""))
			s.Events[len(s.Events)-1].Index, s.Events[len(s.Events)-1].Version = 99, s.Version
		},
		"row order": func(s *State) {
			s.Ranks = append([]Rank(nil), s.Ranks...)
			s.Ranks[0].Rank = 3
		},
	}
	for name, damage := range cases {
		s := good.Copy()
		s.Events = slices.Clone(s.Events) // Copy shares them; the damage must not
		damage(s)
		if err := s.CheckInvariants(); !errors.Is(err, ErrInvariant) {
			t.Errorf("%s: not detected (%v)", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode(&UpdateRanks{ExpectVersion: 2, Ranks: []Rank{{Rank: 1, Node: "a", PID: 5, ITuple: []byte("it"), Incarnation: 2, State: RankRunning}}}))
	f.Add(Encode(&AppendEvents{Events: []Event{ev(EventFailure, "n", 2, 1, "d")}}))
	st := &State{Job: JobSpec{ID: "j", Size: 2}, Ranks: []Rank{{Rank: 0, Node: "a", State: RankRunning}, {Rank: 1}},
		Agents: map[string]Agent{"a": {Node: "a", Addr: "x", Incarnation: 1}}, Version: 3,
		Events: []Event{ev(EventLaunch, "a", 0, 1, "d")}}
	f.Add(st.marshal())
	f.Add(Encode(&SetRecovery{ExpectEpoch: 1, Recovery: sampleRecovery(2, "patch")}))
	f.Add(Encode(&SetPlan{ExpectEpoch: 3, Plan: Plan{Nodes: []PlanNode{{Name: "a", Primary: "r", Backup: "b"}}, Replicas: []string{"a"}}}))
	st.Recovery = &Recovery{Stage: "resume", Ranks: []RecoveryRank{{Rank: 1, Addr: []byte{}}}}
	f.Add(st.marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := Decode(b); err == nil && c != nil {
			if _, err := Decode(Encode(c)); err != nil {
				t.Fatalf("re-encoded command does not decode: %v", err)
			}
		}
		if s, err := unmarshalState(b); err == nil {
			if _, err := unmarshalState(s.marshal()); err != nil {
				t.Fatalf("re-encoded state does not decode: %v", err)
			}
		}
		g := NewFSM()
		g.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: b})
	})
}

// A command retried with its Once key (its writer could not tell whether
// it was committed) is applied once: its events are not appended twice.
// Another writer's key of the same number is its own; the keys survive a
// snapshot.
func TestFSMOnce(t *testing.T) {
	h := newHarness(t)
	h.launch(8)
	once := func(c Command, o Once) *Result {
		t.Helper()
		r, ok := h.raw(EncodeOnce(c, o)).(*Result)
		if !ok {
			t.Fatalf("apply %T with %+v: not accepted", c, o)
		}
		return r
	}
	events := func() int { return len(h.f.Copy().Events) }
	a := Once{Writer: "fe/1", Seq: 1}
	cmd := &UpdateRanks{Ranks: []Rank{{Rank: 1, Node: "n0", Incarnation: 1, State: RankExited}}, Events: []Event{ev(EventLaunch, "", 1, 1, "rank 1 done")}}
	n := events()
	if r := once(cmd, a); r.Repeat {
		t.Fatal("first apply reported as a repeat")
	}
	digest := h.f.Digest()
	if r := once(cmd, a); !r.Repeat {
		t.Fatal("retried command applied again")
	}
	if events() != n+1 || h.f.Digest() != digest {
		t.Fatalf("events %d (want %d), digest changed: %v", events(), n+1, h.f.Digest() != digest)
	}
	// The same number from another writer (a successor) is applied.
	if r := once(&AppendEvents{Events: []Event{ev(EventLaunch, "", NoRank, 0, "successor")}}, Once{Writer: "succ/2", Seq: 1}); r.Repeat {
		t.Fatal("another writer's key taken for a repeat")
	}
	// A refused command does not use up its key: retried, it is refused
	// again, not reported as applied.
	bad := &UpdateRanks{ExpectVersion: 1, Ranks: []Rank{{Rank: 2, Node: "n0", Incarnation: 1, State: RankRunning}}}
	if _, isErr := h.raw(EncodeOnce(bad, Once{Writer: "fe/1", Seq: 2})).(error); !isErr {
		t.Fatal("stale command accepted")
	}
	if _, isErr := h.raw(EncodeOnce(bad, Once{Writer: "fe/1", Seq: 2})).(error); !isErr {
		t.Fatal("a refused command's retry was taken for a repeat")
	}
	g := snapshotRoundTrip(t, h.f)
	if g.Digest() != h.f.Digest() {
		t.Fatal("restored state has another digest")
	}
	h2 := &fsmHarness{t: t, f: g, index: h.index, term: h.term}
	if r, ok := h2.raw(EncodeOnce(cmd, a)).(*Result); !ok || !r.Repeat {
		t.Fatalf("after a snapshot, the retry is applied again: %v", r)
	}
	if c, err := Decode(EncodeOnce(cmd, a)); err != nil || len(c.(*UpdateRanks).Ranks) != 1 {
		t.Fatalf("decode of a keyed command: %v", err)
	}
}

func TestAgentLost(t *testing.T) {
	s := &State{Events: []Event{
		{Kind: EventFailure, Node: "n1", Rank: NoRank, Incarnation: 2},
		{Kind: EventFailure, Node: "n2", Rank: 3, Incarnation: 5}, // a rank's failure
		{Kind: EventRecovery, Node: "n3", Rank: NoRank, Incarnation: 1},
		{Kind: EventFailure, Node: "n4", Rank: NoRank}, // recorded before incarnations were known: the first
	}}
	for _, tc := range []struct {
		node string
		inc  uint64
		want bool
	}{
		{"n1", 1, true}, {"n1", 2, true}, {"n1", 3, false},
		{"n2", 1, false}, {"n3", 1, false}, {"n4", 0, true}, {"n4", 1, true}, {"n4", 2, false}, {"n5", 1, false},
	} {
		if got := s.AgentLost(tc.node, tc.inc); got != tc.want {
			t.Errorf("AgentLost(%s, %d) = %v, want %v", tc.node, tc.inc, got, tc.want)
		}
	}
}
