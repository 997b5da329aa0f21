package membership

import (
	"bytes"
	"strings"
	"testing"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []nodeMeta{
		{Incarnation: 1, Role: "agent"},
		{Incarnation: 1<<64 - 1, Role: ""},
		{Incarnation: 300, Role: strings.Repeat("r", MaxRoleLen)},
		{Incarnation: 2, Role: "root", Leaving: true},
	} {
		b, err := encodeMeta(m)
		if err != nil {
			t.Fatalf("encode %+v: %v", m, err)
		}
		got, err := decodeMeta(b)
		if err != nil || got != m {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", m, got, err)
		}
	}
	if _, err := encodeMeta(nodeMeta{Role: strings.Repeat("r", MaxRoleLen+1)}); err == nil {
		t.Fatal("encode accepted an oversized role")
	}
}

func TestMetaRejectsMalformed(t *testing.T) {
	good, err := encodeMeta(nodeMeta{Incarnation: 7, Role: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	bad := [][]byte{
		nil,
		{},
		{2, 0, 7, 0},                       // unknown version
		{metaVersion},                      // no flags
		{metaVersion, 2, 7, 0},             // unknown flag
		{metaVersion, 0},                   // no incarnation
		{metaVersion, 0, 0x80},             // truncated varint
		{metaVersion, 0, 7},                // no role length
		{metaVersion, 0, 7, 3, 'a'},        // role shorter than its length
		append(bytes.Clone(good), 'x'),     // trailing byte
		{metaVersion, 0, 7, 0xff, 0xff, 3}, // absurd role length
	}
	for _, b := range bad {
		if m, err := decodeMeta(b); err == nil {
			t.Errorf("decodeMeta(%v) = %+v, want error", b, m)
		}
	}
}

func FuzzDecodeMeta(f *testing.F) {
	good, _ := encodeMeta(nodeMeta{Incarnation: 42, Role: "root"})
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{metaVersion, 0, 0x80, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		again, err := encodeMeta(m)
		if err != nil {
			t.Fatalf("decoded %+v does not re-encode: %v", m, err)
		}
		if !bytes.Equal(again, b) {
			// Uvarint accepts non-minimal encodings; the decoded value
			// must still round-trip.
			if m2, err := decodeMeta(again); err != nil || m2 != m {
				t.Fatalf("round trip of %+v: %+v, %v", m, m2, err)
			}
		}
	})
}

func TestLeaveNotice(t *testing.T) {
	meta, err := encodeMeta(nodeMeta{Incarnation: 9, Role: "agent", Leaving: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := encodeLeaveNotice("agent-7", meta)
	if err != nil {
		t.Fatal(err)
	}
	name, m, err := decodeLeaveNotice(b)
	if err != nil || name != "agent-7" || m.Incarnation != 9 || !m.Leaving {
		t.Fatalf("decode = %q %+v %v", name, m, err)
	}
	for _, bad := range [][]byte{nil, {'X'}, {leaveNoticeType}, {leaveNoticeType, 0}, {leaveNoticeType, 9, 'a'}, b[:len(b)-1]} {
		if _, _, err := decodeLeaveNotice(bad); err == nil {
			t.Errorf("decodeLeaveNotice(%v) accepted", bad)
		}
	}
	if _, err := encodeLeaveNotice(strings.Repeat("n", maxNameLen+1), meta); err == nil {
		t.Error("oversized name accepted")
	}
}

func FuzzDecodeLeaveNotice(f *testing.F) {
	meta, _ := encodeMeta(nodeMeta{Incarnation: 3, Role: "root", Leaving: true})
	b, _ := encodeLeaveNotice("root", meta)
	f.Add(b)
	f.Add([]byte{leaveNoticeType, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		name, m, err := decodeLeaveNotice(b)
		if err != nil {
			return
		}
		meta, err := encodeMeta(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := encodeLeaveNotice(name, meta); err != nil {
			t.Fatal(err)
		}
	})
}
