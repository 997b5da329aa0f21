// Package wire is the one frame codec of every ftlaunch link: rank to agent,
// agent to agent, agent to front-end.
//
// A frame is a 6-byte header followed by a payload:
//
//	+----------------+---------+------+------------------+
//	| length (4, BE) | version | type | payload (length) |
//	+----------------+---------+------+------------------+
//
// length counts the payload only. version is [Version]; a frame of another
// version is rejected. type is the message type, interpreted by the protocol
// that owns the link. A reader bounds the payload (by default [MaxPayload]);
// a larger frame is rejected before any of it is read, so a peer cannot make
// a reader allocate more than the bound.
//
// Payloads are built with [Encoder] and read with [Decoder]: unsigned and
// signed varints, length-prefixed byte strings. A Decoder never panics: the
// first malformed field sets a sticky error that [Decoder.Err] reports, and
// every later read returns a zero value. Trailing bytes after the fields a
// reader knows are ignored, so a newer sender may append fields.
package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is the frame format version written by this package.
const Version = 1

// MaxPayload is the default bound on a frame's payload: 16 MiB.
const MaxPayload = 16 << 20

// HeaderLen is the size of a frame header in bytes.
const HeaderLen = 6

// ErrTooLarge is wrapped by the error a Reader returns for a frame whose
// declared payload exceeds its bound.
var ErrTooLarge = errors.New("frame too large")

// ErrVersion is wrapped by the error a Reader returns for a frame of an
// unknown version.
var ErrVersion = errors.New("unknown frame version")

// Frame is one decoded frame.
type Frame struct {
	Type    uint8
	Payload []byte
}

// AppendFrame appends the encoding of a frame to dst and returns it.
func AppendFrame(dst []byte, typ uint8, payload []byte) []byte {
	var h [HeaderLen]byte
	binary.BigEndian.PutUint32(h[:4], uint32(len(payload)))
	h[4] = Version
	h[5] = typ
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}

// WriteFrame writes one frame to w in a single Write call, so that frames
// written by one goroutine at a time are never interleaved.
func WriteFrame(w io.Writer, typ uint8, payload []byte) error {
	if len(payload) > 1<<32-1 {
		return fmt.Errorf("write frame: payload of %d bytes: %w", len(payload), ErrTooLarge)
	}
	_, err := w.Write(AppendFrame(make([]byte, 0, HeaderLen+len(payload)), typ, payload))
	return err
}

// Reader reads frames from a stream. It is not safe for concurrent use.
type Reader struct {
	r   *bufio.Reader
	max int
}

// NewReader returns a Reader that rejects payloads larger than max bytes
// (max <= 0 means [MaxPayload]).
func NewReader(r io.Reader, max int) *Reader {
	return NewReaderSize(r, max, 64<<10)
}

// NewReaderSize is NewReader with a read buffer of size bytes (a frame
// larger than the buffer is read through it all the same).
func NewReaderSize(r io.Reader, max, size int) *Reader {
	if max <= 0 {
		max = MaxPayload
	}
	return &Reader{r: bufio.NewReaderSize(r, size), max: max}
}

// Next reads the next frame. At a clean end of stream (no byte of a new
// frame read) it returns io.EOF; a frame cut short returns
// io.ErrUnexpectedEOF. The payload is freshly allocated and owned by the
// caller.
func (r *Reader) Next() (Frame, error) {
	return ReadFrame(r.r, r.max)
}

// ReadFrame reads one frame of at most max payload bytes from r, and no
// byte beyond it: for a connection whose first frame is read before
// another reader takes it over. Its results are those of Reader.Next.
func ReadFrame(r io.Reader, max int) (Frame, error) {
	var h [HeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(h[:4])
	if h[4] != Version {
		return Frame{}, fmt.Errorf("read frame: version %d (want %d): %w", h[4], Version, ErrVersion)
	}
	if uint64(n) > uint64(max) {
		return Frame{}, fmt.Errorf("read frame: payload of %d bytes exceeds the limit of %d: %w", n, max, ErrTooLarge)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, fmt.Errorf("read frame payload: %w", err)
	}
	return Frame{Type: h[5], Payload: p}, nil
}

// Encoder builds a payload. The zero value is ready to use.
type Encoder struct {
	buf []byte
}

// Uint appends an unsigned varint.
func (e *Encoder) Uint(v uint64) *Encoder {
	e.buf = binary.AppendUvarint(e.buf, v)
	return e
}

// Int appends a signed (zig-zag) varint.
func (e *Encoder) Int(v int64) *Encoder {
	e.buf = binary.AppendVarint(e.buf, v)
	return e
}

// Bool appends a boolean as one byte.
func (e *Encoder) Bool(v bool) *Encoder {
	b := byte(0)
	if v {
		b = 1
	}
	e.buf = append(e.buf, b)
	return e
}

// Bytes appends a length-prefixed byte string.
func (e *Encoder) Bytes(b []byte) *Encoder {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(b)))
	e.buf = append(e.buf, b...)
	return e
}

// String appends a length-prefixed string.
func (e *Encoder) String(s string) *Encoder {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(s)))
	e.buf = append(e.buf, s...)
	return e
}

// Strings appends a count followed by each string.
func (e *Encoder) Strings(ss []string) *Encoder {
	e.Uint(uint64(len(ss)))
	for _, s := range ss {
		e.String(s)
	}
	return e
}

// Data returns the payload built so far.
func (e *Encoder) Data() []byte { return e.buf }

// Decoder reads a payload built by an Encoder. Its first error is sticky.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder returns a Decoder over b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Err returns the first decoding error, if any.
func (d *Decoder) Err() error { return d.err }

func (d *Decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("decode: malformed or truncated %s", what)
	}
}

// Uint reads an unsigned varint.
func (d *Decoder) Uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("unsigned integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Int reads a signed varint.
func (d *Decoder) Int() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Bool reads a boolean.
func (d *Decoder) Bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < 1 || d.b[0] > 1 {
		d.fail("boolean")
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

// Bytes reads a length-prefixed byte string. The result aliases the
// payload.
func (d *Decoder) Bytes() []byte {
	n := d.Uint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("byte string")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// String reads a length-prefixed string.
func (d *Decoder) String() string { return string(d.Bytes()) }

// Count reads an element count and checks that at least min bytes per
// element remain, so a forged count cannot make the caller allocate more
// than the payload could hold.
func (d *Decoder) Count(min int) int {
	n := d.Uint()
	if d.err != nil {
		return 0
	}
	if min < 1 {
		min = 1
	}
	if n > uint64(len(d.b)/min) {
		d.fail("element count")
		return 0
	}
	return int(n)
}

// Strings reads a count followed by that many strings.
func (d *Decoder) Strings() []string {
	n := d.Count(1)
	if n == 0 {
		return nil
	}
	ss := make([]string, 0, n)
	for range n {
		ss = append(ss, d.String())
	}
	if d.err != nil {
		return nil
	}
	return ss
}

// Len is the number of bytes not yet decoded: a field appended by a newer
// encoder is read only when there is one.
func (d *Decoder) Len() int { return len(d.b) }

// Rest returns the bytes not yet decoded (aliasing the payload) and
// consumes them.
func (d *Decoder) Rest() []byte {
	if d.err != nil {
		return nil
	}
	v := d.b
	d.b = nil
	return v
}
