//go:build unix

package pmi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// mpichInit is the request sequence MPI_Init of a one-rank MPICH job sends,
// with the answers the server must give.
var mpichInit = [][2]string{
	{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"},
	{"cmd=get_maxes", "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024"},
	{"cmd=get_appnum", "cmd=appnum appnum=0"},
	{"cmd=get_my_kvsname", "cmd=my_kvsname kvsname=kvs_42_0"},
	{"cmd=get kvsname=kvs_42_0 key=PMI_process_mapping", "cmd=get_result rc=0 msg=success value=(vector,(0,1,1))"},
	{"cmd=barrier_in", "cmd=barrier_out"},
	{"cmd=put kvsname=kvs_42_0 key=-allgather-shm-1-0 value=" + strings.Repeat("ab", 215), "cmd=put_result rc=0 msg=success"},
	{"cmd=barrier_in", "cmd=barrier_out"},
	{"cmd=get kvsname=kvs_42_0 key=-allgather-shm-1-0", "cmd=get_result rc=0 msg=success value=" + strings.Repeat("ab", 215)},
	{"cmd=get_universe_size", "cmd=universe_size size=1"},
	{"cmd=barrier_in", "cmd=barrier_out"},
	{"cmd=finalize", "cmd=finalize_ack"},
}

func TestServeSession(t *testing.T) {
	for _, pipe := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipe=%v", pipe), func(t *testing.T) {
			h := start(t, Config{Rank: 0}, pipe)
			for _, rt := range mpichInit {
				h.roundTrip(rt[0], rt[1])
			}
			res := h.closeAndWait()
			if res.err != nil {
				t.Fatalf("Serve: %v", res.err)
			}
			st := res.stats
			if st.Requests != int64(len(mpichInit)) || st.Puts != 1 || st.Gets != 2 || st.Barriers != 3 || st.Garbage != 0 {
				t.Errorf("stats %+v", st)
			}
			var in, out int64
			for _, rt := range mpichInit {
				in += int64(len(rt[0]) + 1)
				out += int64(len(rt[1]) + 1)
			}
			if st.BytesIn != in || st.BytesOut != out {
				t.Errorf("bytes in/out %d/%d, want %d/%d", st.BytesIn, st.BytesOut, in, out)
			}
			if got, want := h.kinds(), []EventKind{EventInit, EventFinalize}; !reflect.DeepEqual(got, want) {
				t.Errorf("events %v, want %v", got, want)
			}
		})
	}
}

func TestServeFraming(t *testing.T) {
	h := start(t, Config{Rank: 0}, false)
	// Several requests in one write are answered in order.
	h.send("cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_appnum\ncmd=get_my_kvsname\n")
	h.expect("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	h.expect("cmd=appnum appnum=0")
	h.expect("cmd=my_kvsname kvsname=kvs_42_0")
	// A request split across writes, even inside a token.
	h.send("cmd=get_ap")
	h.send("pn")
	h.send("um\n")
	h.expect("cmd=appnum appnum=0")
	// A write that ends a request and starts the next.
	h.send("cmd=get_maxes\ncmd=get_univ")
	h.expect("cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024")
	h.send("erse_size\n")
	h.expect("cmd=universe_size size=1")
	// Values may contain '=', extra spaces are ignored.
	h.roundTrip("cmd=put  kvsname=kvs_42_0 key=k value=segments=2=x", "cmd=put_result rc=0 msg=success")
	h.roundTrip("cmd=barrier_in", "cmd=barrier_out")
	h.roundTrip("cmd=get kvsname=kvs_42_0 key=k", "cmd=get_result rc=0 msg=success value=segments=2=x")
	// An empty value is a value.
	h.roundTrip("cmd=put kvsname=kvs_42_0 key=e value=", "cmd=put_result rc=0 msg=success")
	h.roundTrip("cmd=barrier_in", "cmd=barrier_out")
	h.roundTrip("cmd=get kvsname=kvs_42_0 key=e", "cmd=get_result rc=0 msg=success value=")
	// A carriage return before the newline is tolerated.
	h.roundTrip("cmd=get_appnum\r", "cmd=appnum appnum=0")
}

func TestServeLineLimit(t *testing.T) {
	h := start(t, Config{Rank: 0}, false)
	h.roundTrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	// A line of exactly MaxLine bytes (newline included) is a request.
	prefix := "cmd=get kvsname=kvs_42_0 key=k pad="
	exact := prefix + strings.Repeat("p", MaxLine-len(prefix)-1) + "\n"
	if len(exact) != MaxLine {
		t.Fatalf("test line is %d bytes", len(exact))
	}
	h.send(exact)
	h.expect("cmd=get_result rc=-1 msg=key_k_not_found value=unknown")
	// One byte more is garbage, answered with one error line, sent in pieces.
	long := "cmd=get_appnum pad=" + strings.Repeat("q", 3000) + "\n"
	h.send(long[:700])
	h.send(long[700:2100])
	h.send(long[2100:] + "cmd=get_appnum\n")
	h.expect("cmd=error rc=-1 msg=line_too_long")
	h.expect("cmd=appnum appnum=0") // the connection goes on
	ev := h.nextEvent()
	if ev.Kind != EventInit {
		t.Fatalf("first event %v", ev)
	}
	if ev = h.nextEvent(); ev.Kind != EventGarbage || !strings.Contains(ev.Detail, "longer than 1024") {
		t.Fatalf("event %+v, want garbage about the line length", ev)
	}
	h.roundTrip("cmd=put kvsname=kvs_42_0 key="+strings.Repeat("k", MaxKeyLen+1)+" value=1", "cmd=put_result rc=-1 msg=bad_key_length")
	h.roundTrip("cmd=get kvsname=kvs_42_0 key="+strings.Repeat("k", 900), "cmd=get_result rc=-1 msg=bad_key_length value=unknown")
	if st := h.closeAndWait(); !errors.Is(st.err, ErrLost) || st.stats.Garbage != 1 {
		t.Fatalf("result %+v", st)
	}

	// A put whose get_result would not fit in one line is refused (a short
	// kvsname leaves room for such a put line).
	h = start(t, Config{Job: Job{Size: 1, KVSName: "k"}, Rank: 0}, false)
	val := strings.Repeat("v", MaxLine-len("cmd=get_result rc=0 msg=success value=\n")+1)
	h.roundTrip("cmd=put kvsname=k key=big value="+val, "cmd=put_result rc=-1 msg=value_too_long")
	h.roundTrip("cmd=put kvsname=k key=fits value="+val[1:], "cmd=put_result rc=0 msg=success")
	h.roundTrip("cmd=barrier_in", "cmd=barrier_out")
	h.send("cmd=get kvsname=k key=fits\n")
	if got := h.line() + "\n"; len(got) != MaxLine || got != "cmd=get_result rc=0 msg=success value="+val[1:]+"\n" {
		t.Fatalf("get of the largest value: %d bytes %.60q...", len(got), got)
	}
}

func TestServeGarbage(t *testing.T) {
	h := start(t, Config{Rank: 0}, false)
	h.roundTrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	tests := [][2]string{
		{"hello", "cmd=error rc=-1 msg=malformed_request"},
		{"", "cmd=error rc=-1 msg=malformed_request"},
		{"   ", "cmd=error rc=-1 msg=malformed_request"},
		{"=x", "cmd=error rc=-1 msg=malformed_request"},
		{"cmd=get_appnum cmd=get_appnum", "cmd=error rc=-1 msg=malformed_request"},
		{"cmd=get_appnum\x00", "cmd=error rc=-1 msg=malformed_request"},
		{"key=value", "cmd=error rc=-1 msg=missing_cmd"},
		{"cmd=frobnicate", "cmd=error rc=-1 msg=unknown_command"},
		{"cmd=", "cmd=error rc=-1 msg=missing_cmd"},
		{"cmd=put kvsname=kvs_42_0 key=k", "cmd=put_result rc=-1 msg=missing_field"},
		{"cmd=put kvsname=other key=k value=v", "cmd=put_result rc=-1 msg=unknown_kvsname"},
		{"cmd=get key=k", "cmd=get_result rc=-1 msg=missing_field value=unknown"},
		{"cmd=get kvsname=other key=k", "cmd=get_result rc=-1 msg=unknown_kvsname value=unknown"},
		{"cmd=init pmi_version=2 pmi_subversion=0", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1"},
		{"cmd=init", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1"},
		{"cmd=publish_name service=s port=p", "cmd=publish_result rc=-1 msg=not_supported"},
		{"cmd=lookup_name service=s", "cmd=lookup_result rc=-1 msg=not_supported"},
		{"cmd=unpublish_name service=s", "cmd=unpublish_result rc=-1 msg=not_supported"},
		{"\xff\xfe", "cmd=error rc=-1 msg=malformed_request"},
	}
	for _, tc := range tests {
		h.roundTrip(tc[0], tc[1])
	}
	// Reserved and duplicate keys are refused, missing keys are reported as
	// MPICH expects.
	h.roundTrip("cmd=put kvsname=kvs_42_0 key=PMI_process_mapping value=x", "cmd=put_result rc=-1 msg=reserved_key")
	h.roundTrip("cmd=put kvsname=kvs_42_0 key=a value=1", "cmd=put_result rc=0 msg=success")
	h.roundTrip("cmd=put kvsname=kvs_42_0 key=a value=2", "cmd=put_result rc=-1 msg=duplicate_key_a")
	h.roundTrip("cmd=get kvsname=kvs_42_0 key=nope", "cmd=get_result rc=-1 msg=key_nope_not_found value=unknown")
	// A multi-line spawn request is answered once, after its last block.
	h.send("mcmd=spawn\nnprocs=1\nexecname=/bin/x\ntotspawns=2\nspawnssofar=1\narg1=a b\nendcmd\n")
	h.send("mcmd=spawn\nnprocs=1\nexecname=/bin/y\ntotspawns=2\nspawnssofar=2\nendcmd\n")
	h.expect("cmd=spawn_result rc=-1 errmsg=spawn_not_supported")
	h.roundTrip("cmd=get_appnum", "cmd=appnum appnum=0") // still in step
	h.roundTrip("cmd=finalize", "cmd=finalize_ack")
	h.roundTrip("cmd=get_appnum", "cmd=error rc=-1 msg=after_finalize")
	res := h.closeAndWait()
	if res.err != nil {
		t.Fatalf("Serve: %v", res.err)
	}
	garbage := 0
	for _, k := range h.kinds() {
		if k == EventGarbage {
			garbage++
		}
	}
	// Every test line but the duplicate put is garbage, plus the spawn and
	// the request after finalize.
	if res.stats.Garbage != int64(garbage) || garbage != len(tests)+2 {
		t.Errorf("garbage count %d, events %d, want %d", res.stats.Garbage, garbage, len(tests)+2)
	}
}

func TestServeLost(t *testing.T) {
	h := start(t, Config{Rank: 0}, false)
	h.roundTrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	h.send("cmd=barr") // dies in the middle of a request
	res := h.closeAndWait()
	if !errors.Is(res.err, ErrLost) {
		t.Fatalf("Serve returned %v, want ErrLost", res.err)
	}
	if got := h.kinds(); !reflect.DeepEqual(got, []EventKind{EventInit, EventLost}) {
		t.Fatalf("events %v", got)
	}
}

func TestServeEOFBeforeInit(t *testing.T) {
	h := start(t, Config{Rank: 0}, false)
	if res := h.closeAndWait(); res.err != nil || len(h.kinds()) != 0 {
		t.Fatalf("Serve: %v, events %v", res.err, h.kinds())
	}
}

func TestServeAbort(t *testing.T) {
	var mu sync.Mutex
	var got []string
	kvs := NewKVS(2, func(rank, code int, msg string) {
		mu.Lock()
		got = append(got, fmt.Sprintf("%d/%d/%s", rank, code, msg))
		mu.Unlock()
	})
	job := Job{Size: 2, KVSName: "k"}
	h := start(t, Config{Job: job, Rank: 1, Backend: kvs}, false)
	h.roundTrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	h.send("cmd=abort exitcode=741985807\n")
	res := h.wait()
	var ae *AbortError
	if !errors.As(res.err, &ae) || ae.Rank != 1 || ae.Code != 741985807 || ae.Code&0xff != 15 {
		t.Fatalf("Serve returned %v, want AbortError rank 1 code 741985807", res.err)
	}
	mu.Lock()
	if !reflect.DeepEqual(got, []string{"1/741985807/"}) {
		t.Errorf("onAbort calls %v", got)
	}
	mu.Unlock()
	<-kvs.Done()
	// The rank got no answer: after the server end closes it reads EOF only.
	h.server.Close()
	rest, err := io.ReadAll(h.r)
	if len(rest) != 0 || err != nil {
		t.Fatalf("client read %q, %v after abort; want nothing", rest, err)
	}
	// The other rank's barrier fails with the abort.
	if err := kvs.Barrier(context.Background(), 0); !errors.As(err, &ae) {
		t.Fatalf("barrier after abort: %v", err)
	}
}

func TestServeAbortMessage(t *testing.T) {
	h := start(t, Config{Rank: 0}, false)
	h.send("cmd=abort exitcode=x error_msg=bad_things\n")
	res := h.wait()
	var ae *AbortError
	if !errors.As(res.err, &ae) || ae.Code != 1 || ae.Msg != "bad_things" {
		t.Fatalf("Serve returned %v", res.err)
	}
	if got := h.kinds(); !reflect.DeepEqual(got, []EventKind{EventGarbage, EventAbort}) {
		t.Fatalf("events %v", got)
	}
}

func TestServeTCPMode(t *testing.T) {
	claimed := map[int]bool{}
	var mu sync.Mutex
	claim := func(id int) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if claimed[id] {
			return 0, fmt.Errorf("pmiid %d already connected", id)
		}
		claimed[id] = true
		return id, nil
	}
	job := Job{Size: 4, KVSName: "k"}
	kvs := NewKVS(4, nil)
	h := start(t, Config{Job: job, Rank: -1, ClaimID: claim, Backend: kvs}, false)
	h.send("cmd=initack pmiid=2\n")
	for _, want := range []string{"cmd=initack", "cmd=set size=4", "cmd=set rank=2", "cmd=set debug=0"} {
		h.expect(want)
	}
	h.roundTrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	if ev := h.nextEvent(); ev.Kind != EventInit || ev.Rank != 2 {
		t.Fatalf("event %+v", ev)
	}
	// A second connection claiming the same id is refused.
	h2 := start(t, Config{Job: job, Rank: -1, ClaimID: claim, Backend: kvs}, false)
	h2.send("cmd=initack pmiid=2\n")
	if res := h2.wait(); !errors.Is(res.err, ErrProtocol) {
		t.Fatalf("duplicate pmiid: %v", res.err)
	}
	// Without initack the client cannot be told apart.
	h3 := start(t, Config{Job: job, Rank: -1, Backend: kvs}, false)
	h3.send("cmd=init pmi_version=1 pmi_subversion=1\n")
	if res := h3.wait(); !errors.Is(res.err, ErrProtocol) {
		t.Fatalf("init before initack: %v", res.err)
	}
	// Ids outside the job are refused.
	h4 := start(t, Config{Job: job, Rank: -1, Backend: kvs}, false)
	h4.send("cmd=initack pmiid=4\n")
	if res := h4.wait(); !errors.Is(res.err, ErrProtocol) {
		t.Fatalf("pmiid 4 of 4: %v", res.err)
	}
	// In socket mode a matching initack is answered, a wrong one refused.
	h5 := start(t, Config{Job: job, Rank: 3, Backend: kvs}, false)
	h5.send("cmd=initack pmiid=3\n")
	for _, want := range []string{"cmd=initack", "cmd=set size=4", "cmd=set rank=3", "cmd=set debug=0"} {
		h5.expect(want)
	}
	h6 := start(t, Config{Job: job, Rank: 3, Backend: kvs}, false)
	h6.send("cmd=initack pmiid=1\n")
	if res := h6.wait(); !errors.Is(res.err, ErrProtocol) {
		t.Fatalf("wrong pmiid in socket mode: %v", res.err)
	}
}

func TestServeJobWide(t *testing.T) {
	const n = 5
	job := Job{Size: n, KVSName: "job", ProcessMapping: "(vector,(0,1,5))"}
	kvs := NewKVS(n, nil)
	hs := make([]*harness, n)
	for r := range hs {
		hs[r] = start(t, Config{Job: job, Rank: r, Backend: kvs}, r%2 == 0)
	}
	for r, h := range hs {
		h.roundTrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
		h.roundTrip(fmt.Sprintf("cmd=put kvsname=job key=addr-%d value=a=%d", r, r), "cmd=put_result rc=0 msg=success")
		// Not visible before the barrier.
		h.roundTrip(fmt.Sprintf("cmd=get kvsname=job key=addr-%d", r),
			fmt.Sprintf("cmd=get_result rc=-1 msg=key_addr-%d_not_found value=unknown", r))
	}
	// All ranks enter the barrier; nobody is released before the last.
	for _, h := range hs {
		h.send("cmd=barrier_in\n")
	}
	for _, h := range hs {
		h.expect("cmd=barrier_out")
	}
	for _, h := range hs {
		for r := range n {
			h.roundTrip(fmt.Sprintf("cmd=get kvsname=job key=addr-%d", r),
				fmt.Sprintf("cmd=get_result rc=0 msg=success value=a=%d", r))
		}
	}
	if kvs.Barriers() != 1 {
		t.Fatalf("%d barriers completed", kvs.Barriers())
	}
	// A failure while ranks wait in a barrier ends their Serve unanswered.
	for _, h := range hs[:n-1] {
		h.send("cmd=barrier_in\n")
	}
	kvs.Fail(errors.New("rank 4 lost"))
	for _, h := range hs[:n-1] {
		if res := h.wait(); res.err == nil || !strings.Contains(res.err.Error(), "rank 4 lost") {
			t.Fatalf("Serve after Fail: %v", res.err)
		}
	}
}

// barrierSignal is a Backend that reports when a rank enters Barrier.
type barrierSignal struct {
	*KVS
	entered chan int
}

func (b barrierSignal) Barrier(ctx context.Context, rank int) error {
	b.entered <- rank
	return b.KVS.Barrier(ctx, rank)
}

func TestServeCancel(t *testing.T) {
	for _, inBarrier := range []bool{false, true} {
		be := barrierSignal{NewKVS(2, nil), make(chan int, 1)}
		h := start(t, Config{Job: Job{Size: 2, KVSName: "k"}, Rank: 0, Backend: be}, false)
		if inBarrier {
			h.roundTrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
			h.send("cmd=barrier_in\n")
			<-be.entered // rank 1 never comes: the barrier blocks
		}
		h.cancel()
		if res := h.wait(); !errors.Is(res.err, context.Canceled) {
			t.Fatalf("inBarrier=%v: Serve returned %v, want context.Canceled", inBarrier, res.err)
		}
	}
}

func TestServeConfigErrors(t *testing.T) {
	rw := struct {
		io.Reader
		io.Writer
	}{strings.NewReader(""), io.Discard}
	kvs := NewKVS(1, nil)
	for _, cfg := range []Config{
		{Job: Job{Size: 0, KVSName: "k"}, Backend: kvs},
		{Job: Job{Size: 1, KVSName: ""}, Backend: kvs},
		{Job: Job{Size: 1, KVSName: "a b"}, Backend: kvs},
		{Job: Job{Size: 1, KVSName: "a=b"}, Backend: kvs},
		{Job: Job{Size: 1, KVSName: "k", UniverseSize: -1}, Backend: kvs},
		{Job: Job{Size: 1, KVSName: "k"}},
		{Job: Job{Size: 1, KVSName: "k"}, Backend: kvs, Rank: 1},
		{Job: Job{Size: 1, KVSName: "k"}, Backend: kvs, Rank: -2},
	} {
		if _, err := Serve(context.Background(), rw, cfg); err == nil {
			t.Errorf("Serve accepted %+v", cfg)
		}
	}
}

func TestServeProcessMappingTooLong(t *testing.T) {
	job := Job{Size: 1, KVSName: "k", ProcessMapping: "(vector" + strings.Repeat(",(0,1,1)", 200) + ")"}
	h := start(t, Config{Job: job, Rank: 0}, false)
	h.roundTrip("cmd=get kvsname=k key=PMI_process_mapping",
		"cmd=get_result rc=-1 msg=key_PMI_process_mapping_not_found value=unknown")
}

// TestServeWithoutDeadlines runs Serve over a plain reader/writer pair.
func TestServeWithoutDeadlines(t *testing.T) {
	in := strings.NewReader("cmd=init pmi_version=1 pmi_subversion=1\ncmd=barrier_in\ncmd=finalize\n")
	var out strings.Builder
	rw := struct {
		io.Reader
		io.Writer
	}{in, &out}
	st, err := Serve(context.Background(), rw, Config{Job: testJob, Backend: NewKVS(1, nil)})
	if err != nil {
		t.Fatal(err)
	}
	want := "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\ncmd=barrier_out\ncmd=finalize_ack\n"
	if out.String() != want || st.BytesOut != int64(len(want)) {
		t.Fatalf("output %q (stats %+v)", out.String(), st)
	}
}

// An MPMD job answers get_appnum with each rank's app context, also for a
// TCP-mode client once initack told its rank.
func TestServeAppNumPerRank(t *testing.T) {
	job := Job{Size: 4, KVSName: "k", AppOf: func(rank int) int { return min(rank, 1) }}
	kvs := NewKVS(4, nil)
	for rank, want := range []string{"0", "1", "1"} {
		h := start(t, Config{Job: job, Rank: rank, Backend: kvs}, false)
		h.roundTrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
		h.roundTrip("cmd=get_appnum", "cmd=appnum appnum="+want)
	}
	h := start(t, Config{Job: job, Rank: -1, ClaimID: func(id int) (int, error) { return id, nil }, Backend: kvs}, false)
	h.send("cmd=initack pmiid=3\n")
	for _, want := range []string{"cmd=initack", "cmd=set size=4", "cmd=set rank=3", "cmd=set debug=0"} {
		h.expect(want)
	}
	h.roundTrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	h.roundTrip("cmd=get_appnum", "cmd=appnum appnum=1")
}
