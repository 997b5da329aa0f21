package raftstore

import (
	"encoding/binary"
	"fmt"
)

// encoder appends the fields of a command payload or a snapshot: unsigned
// and zig-zag varints and length-prefixed byte strings. The zero value is
// ready to use.
type encoder struct {
	buf []byte
}

func (e *encoder) uint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *encoder) int(v int64)   { e.buf = binary.AppendVarint(e.buf, v) }
func (e *encoder) byte(b byte)   { e.buf = append(e.buf, b) }

func (e *encoder) bool(b bool) {
	if b {
		e.byte(1)
	} else {
		e.byte(0)
	}
}

func (e *encoder) bytes(b []byte) {
	e.uint(uint64(len(b)))
	e.buf = append(e.buf, b...)
}

func (e *encoder) string(s string) {
	e.uint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

func (e *encoder) strings(ss []string) {
	e.uint(uint64(len(ss)))
	for _, s := range ss {
		e.string(s)
	}
}

// decoder reads what an encoder wrote. Its first error is sticky: every
// later read returns a zero value, so callers check err once at the end.
// It never panics on malformed input, and it bounds every element count by
// the bytes left, so a forged count cannot make it allocate more than the
// input could describe. Byte strings are copied out of the input.
type decoder struct {
	b    []byte
	what string // what is being decoded, for error messages
	err  error
}

func newDecoder(b []byte, what string) *decoder { return &decoder{b: b, what: what} }

func (d *decoder) fail(field string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: truncated or malformed %s: %w", d.what, field, ErrMalformed)
	}
}

func (d *decoder) uint() uint64 {
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

func (d *decoder) int() int64 {
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

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// bool reads what encoder.bool wrote; any other byte is malformed.
func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("boolean")
	return false
}

// uintMax reads an unsigned varint and fails if it exceeds max.
func (d *decoder) uintMax(max uint64, field string) uint64 {
	v := d.uint()
	if d.err == nil && v > max {
		d.fail(field)
		return 0
	}
	return v
}

// intRange reads a signed varint and fails outside [min, max].
func (d *decoder) intRange(min, max int64, field string) int64 {
	v := d.int()
	if d.err == nil && (v < min || v > max) {
		d.fail(field)
		return 0
	}
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("byte string")
		return nil
	}
	if n == 0 {
		return nil
	}
	v := make([]byte, n)
	copy(v, d.b[:n])
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("string")
		return ""
	}
	v := string(d.b[:n])
	d.b = d.b[n:]
	return v
}

// count reads an element count; each element takes at least min bytes.
func (d *decoder) count(min int, field string) int {
	n := d.uint()
	if d.err != nil {
		return 0
	}
	if min < 1 {
		min = 1
	}
	if n > uint64(len(d.b)/min) {
		d.fail(field + " count")
		return 0
	}
	return int(n)
}

func (d *decoder) strings(field string) []string {
	n := d.count(1, field)
	if n == 0 {
		return nil
	}
	ss := make([]string, 0, n)
	for range n {
		ss = append(ss, d.string())
	}
	if d.err != nil {
		return nil
	}
	return ss
}
