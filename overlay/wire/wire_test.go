package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	payloads := [][]byte{nil, []byte("x"), bytes.Repeat([]byte("ab"), 70000)}
	for i, p := range payloads {
		if err := WriteFrame(&buf, uint8(i+1), p); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(&buf, 0)
	for i, p := range payloads {
		f, err := r.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if f.Type != uint8(i+1) || !bytes.Equal(f.Payload, p) {
			t.Fatalf("frame %d: got type %d len %d", i, f.Type, len(f.Payload))
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after last frame: got %v, want io.EOF", err)
	}
}

func TestFrameErrors(t *testing.T) {
	big := AppendFrame(nil, 1, make([]byte, 100))
	if _, err := NewReader(bytes.NewReader(big), 99).Next(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized: got %v", err)
	}
	// A forged 4 GiB header is refused without reading or allocating.
	forged := []byte{0xff, 0xff, 0xff, 0xff, Version, 1}
	if _, err := NewReader(bytes.NewReader(forged), 0).Next(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("forged length: got %v", err)
	}
	bad := AppendFrame(nil, 1, []byte("x"))
	bad[4] = 9
	if _, err := NewReader(bytes.NewReader(bad), 0).Next(); !errors.Is(err, ErrVersion) {
		t.Errorf("version: got %v", err)
	}
	cut := AppendFrame(nil, 1, []byte("hello"))[:8]
	if _, err := NewReader(bytes.NewReader(cut), 0).Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated payload: got %v", err)
	}
	if _, err := NewReader(bytes.NewReader(cut[:3]), 0).Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated header: got %v", err)
	}
}

func TestEncoderDecoder(t *testing.T) {
	var e Encoder
	e.Uint(300).Int(-7).Bool(true).String("héllo").Bytes([]byte{0, 1}).Strings([]string{"a", "", "c"})
	d := NewDecoder(e.Data())
	if v := d.Uint(); v != 300 {
		t.Errorf("Uint = %d", v)
	}
	if v := d.Int(); v != -7 {
		t.Errorf("Int = %d", v)
	}
	if !d.Bool() {
		t.Error("Bool = false")
	}
	if v := d.String(); v != "héllo" {
		t.Errorf("String = %q", v)
	}
	if v := d.Bytes(); !bytes.Equal(v, []byte{0, 1}) {
		t.Errorf("Bytes = %v", v)
	}
	if v := d.Strings(); len(v) != 3 || v[0] != "a" || v[1] != "" || v[2] != "c" {
		t.Errorf("Strings = %q", v)
	}
	if d.Err() != nil {
		t.Fatal(d.Err())
	}
	// Reading past the end is a sticky error, not a panic.
	_ = d.String()
	if d.Err() == nil {
		t.Fatal("read past end: no error")
	}
	if d.Uint() != 0 {
		t.Fatal("read after error returned data")
	}
}

func TestDecoderForgedCount(t *testing.T) {
	var e Encoder
	e.Uint(1 << 40)
	d := NewDecoder(e.Data())
	if n := d.Count(1); n != 0 || d.Err() == nil {
		t.Fatalf("forged count accepted: %d, %v", n, d.Err())
	}
	d = NewDecoder(e.Data())
	if b := d.Bytes(); b != nil || d.Err() == nil {
		t.Fatalf("forged length accepted: %d bytes, %v", len(b), d.Err())
	}
}

// FuzzReader feeds arbitrary bytes to the frame reader and to a decoder of
// every frame it yields: neither may panic or allocate beyond the bound.
func FuzzReader(f *testing.F) {
	f.Add(AppendFrame(nil, 1, []byte("hello")))
	f.Add(AppendFrame(AppendFrame(nil, 2, nil), 3, []byte{0x80}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, Version, 1})
	f.Add([]byte{0, 0, 0, 2, 2, 1, 0, 0})
	var e Encoder
	e.Uint(5).String("k").Strings([]string{"a", "b"})
	f.Add(AppendFrame(nil, 4, e.Data()))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data), 1<<16)
		for {
			fr, err := r.Next()
			if err != nil {
				return
			}
			if len(fr.Payload) > 1<<16 {
				t.Fatalf("payload of %d bytes passed a 64 KiB bound", len(fr.Payload))
			}
			d := NewDecoder(fr.Payload)
			for d.Err() == nil && len(d.b) > 0 {
				_ = d.Strings()
				_ = d.Int()
				_ = d.Bool()
			}
		}
	})
}
