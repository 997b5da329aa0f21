package proto

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// Prestaging (--prestage): the program's file travels down the launch
// tree, once over each link, into a private directory on every node's
// local storage, and the ranks run it from there instead of from the
// shared file system (Moody et al.: loading a binary from a shared file
// system cost 27 s at scale). The front-end sends the file to each of its
// children before the child's job spec; an interior agent sends its copy
// to each of its children just before passing on the child's spec.

// prestageChunkSize bounds one chunk.
const prestageChunkSize = 1 << 20

// MaxPrestage bounds the size of a prestaged program.
const MaxPrestage = 1 << 30

// PrestageChunk is one piece of the file.
type PrestageChunk struct {
	Name   string // the program's base name
	Mode   os.FileMode
	Total  int64
	Offset int64
	Data   []byte
}

func (c PrestageChunk) encode() []byte {
	var e wire.Encoder
	e.String(c.Name).Uint(uint64(c.Mode.Perm())).Uint(uint64(c.Total)).Uint(uint64(c.Offset)).Bytes(c.Data)
	return e.Data()
}

func DecodePrestageChunk(p []byte) (PrestageChunk, error) {
	d := wire.NewDecoder(p)
	c := PrestageChunk{Name: d.String(), Mode: os.FileMode(d.Uint()) & os.ModePerm, Total: int64(d.Uint()), Offset: int64(d.Uint()), Data: d.Bytes()}
	if err := d.Err(); err != nil {
		return c, fmt.Errorf("prestage chunk: %w", err)
	}
	if c.Name == "" || c.Name != filepath.Base(c.Name) || c.Name == "." || c.Name == ".." ||
		c.Total < 0 || c.Total > MaxPrestage || c.Offset < 0 || c.Offset+int64(len(c.Data)) > c.Total {
		return c, fmt.Errorf("prestage chunk: bad name %q or range %d+%d of %d", c.Name, c.Offset, len(c.Data), c.Total)
	}
	return c, nil
}

// SendPrestaged sends a whole file in chunks with send.
func SendPrestaged(send func(typ uint8, p []byte) error, name string, mode os.FileMode, r io.ReaderAt, total int64) error {
	buf := make([]byte, prestageChunkSize)
	for off := int64(0); off < total || off == 0; {
		n, err := r.ReadAt(buf[:min(int64(len(buf)), total-off)], off)
		if err != nil && err != io.EOF {
			return fmt.Errorf("prestage %s: %w", name, err)
		}
		if err := send(MPrestage, PrestageChunk{Name: name, Mode: mode, Total: total, Offset: off, Data: buf[:n]}.encode()); err != nil {
			return err
		}
		off += int64(n)
		if total == 0 || n == 0 {
			break
		}
	}
	return nil
}

// Prestaged is an agent's copy of the prestaged program.
type Prestaged struct {
	dir, Path string
	f         *os.File
	mode      os.FileMode
	total     int64
	got       int64
	Done      bool
}

// Add writes one chunk; the first creates the node-local directory.
func (ps *Prestaged) Add(c PrestageChunk) error {
	if ps.Done {
		return fmt.Errorf("prestage: %s is complete; got more", ps.Path)
	}
	if ps.f == nil {
		dir, err := os.MkdirTemp("", "ftlaunch-prestage-")
		if err != nil {
			return fmt.Errorf("prestage: %w", err)
		}
		ps.dir, ps.Path, ps.mode, ps.total = dir, filepath.Join(dir, c.Name), c.Mode, c.Total
		if ps.f, err = os.OpenFile(ps.Path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o700); err != nil {
			return fmt.Errorf("prestage: %w", err)
		}
	}
	if c.Total != ps.total || c.Offset != ps.got {
		return fmt.Errorf("prestage: chunk at %d of %d, want %d of %d", c.Offset, c.Total, ps.got, ps.total)
	}
	if _, err := ps.f.Write(c.Data); err != nil {
		return fmt.Errorf("prestage: write %s: %w", ps.Path, err)
	}
	ps.got += int64(len(c.Data))
	if ps.got == ps.total {
		if err := ps.f.Chmod(ps.mode | 0o500); err != nil {
			return fmt.Errorf("prestage: %w", err)
		}
		if err := ps.f.Close(); err != nil {
			return fmt.Errorf("prestage: %w", err)
		}
		ps.f, ps.Done = nil, true
	}
	return nil
}

// Forward sends the complete copy to a child.
func (ps *Prestaged) Forward(l *Link) error {
	f, err := os.Open(ps.Path)
	if err != nil {
		return fmt.Errorf("prestage: %w", err)
	}
	defer f.Close()
	return SendPrestaged(l.Send, filepath.Base(ps.Path), ps.mode, f, ps.total)
}

// Remove deletes the node-local copy.
func (ps *Prestaged) Remove() {
	if ps.f != nil {
		ps.f.Close()
	}
	if ps.dir != "" {
		os.RemoveAll(ps.dir)
	}
}

// Staged is the program file a front-end prestages.
type Staged struct {
	Name string // its base name
	Mode os.FileMode
	Data []byte
}

// ReadStaged reads the program prog for prestaging, resolved as a rank's
// would be (in wdir, on the ranks' PATH path), at most MaxPrestage bytes.
func ReadStaged(prog, wdir, path string) (*Staged, error) {
	p, err := ResolveProgram(prog, wdir, path)
	if err != nil {
		return nil, fmt.Errorf("--prestage: %w", err)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(wdir, p)
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("--prestage: %w", err)
	}
	if st.Size() > MaxPrestage {
		return nil, fmt.Errorf("--prestage: %s is %d bytes, more than the limit of %d", p, st.Size(), MaxPrestage)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("--prestage: %w", err)
	}
	return &Staged{Name: filepath.Base(p), Mode: st.Mode().Perm(), Data: data}, nil
}

// Send sends the program to a child, in chunks (SendPrestaged).
func (s *Staged) Send(send func(typ uint8, p []byte) error) error {
	return SendPrestaged(send, s.Name, s.Mode, bytes.NewReader(s.Data), int64(len(s.Data)))
}
