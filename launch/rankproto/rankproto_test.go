package rankproto

import (
	"bytes"
	"testing"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

func TestRoundTrips(t *testing.T) {
	in := Info{Rank: 3, Size: 8, LocalRank: 1, LocalSize: 2, Node: "n1", NodeID: 1, JobID: "ft-x"}
	if out, err := DecodeInfo(in.Encode()); err != nil || out != in {
		t.Errorf("info: %+v, %v", out, err)
	}
	alone := Info{Rank: 2, Size: 8, Node: "n1", JobID: "ft-x", Incarnation: 2, Alone: true}
	if out, err := DecodeInfo(alone.Encode()); err != nil || out != alone {
		t.Errorf("info started again alone: %+v, %v", out, err)
	}
	// An agent of before Alone: the payload ends after Restarts.
	var e wire.Encoder
	e.Uint(2).Uint(8).Uint(0).Uint(1).String("n1").Uint(0).String("ft-x").Uint(3).Uint(0)
	if out, err := DecodeInfo(e.Data()); err != nil || out.Incarnation != 3 || out.Alone {
		t.Errorf("an older agent's info: %+v, %v", out, err)
	}
	vs := [][]byte{[]byte("a"), nil, []byte("ccc")}
	if out, err := DecodeValues(EncodeValues(vs)); err != nil || len(out) != 3 || !bytes.Equal(out[2], vs[2]) || len(out[1]) != 0 {
		t.Errorf("values: %q, %v", out, err)
	}
	if k, v, err := DecodeKV(EncodeKV("key", []byte("val"))); err != nil || k != "key" || string(v) != "val" {
		t.Errorf("kv: %q %q %v", k, v, err)
	}
	if f, v, err := DecodeGetOK(EncodeGetOK(true, []byte("v"))); err != nil || !f || string(v) != "v" {
		t.Errorf("get: %v %q %v", f, v, err)
	}
	if c, m, err := DecodeAbort(EncodeAbort(-7, "why")); err != nil || c != -7 || m != "why" {
		t.Errorf("abort: %d %q %v", c, m, err)
	}
}

// FuzzDecode feeds arbitrary payloads to every decoder: none may panic,
// and what decodes must encode back to a payload that decodes the same.
func FuzzDecode(f *testing.F) {
	f.Add(Info{Rank: 1, Size: 2, Node: "n", JobID: "j"}.Encode())
	f.Add(EncodeValues([][]byte{[]byte("x"), nil}))
	f.Add(EncodeKV("k", []byte("v")))
	f.Add(EncodeGetOK(false, nil))
	f.Add(EncodeAbort(3, "m"))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, p []byte) {
		if i, err := DecodeInfo(p); err == nil {
			if j, err := DecodeInfo(i.Encode()); err != nil || j != i {
				t.Fatalf("info re-decode: %+v vs %+v (%v)", j, i, err)
			}
		}
		if vs, err := DecodeValues(p); err == nil {
			if ws, err := DecodeValues(EncodeValues(vs)); err != nil || len(ws) != len(vs) {
				t.Fatalf("values re-decode: %d vs %d (%v)", len(ws), len(vs), err)
			}
		}
		DecodeKV(p)
		DecodeGetOK(p)
		DecodeAbort(p)
	})
}
