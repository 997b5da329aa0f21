package output

import (
	"bytes"
	"io"
	"testing"
)

// TestProgress: the launch line is shown only when on, updated while
// ranks start, cleared once every rank runs, and not shown again; a
// failed launch clears it too; not a terminal, or --verbose: none.
func TestProgress(t *testing.T) {
	pushed := func(w *Writer) []Item {
		w.mu.Lock()
		defer w.mu.Unlock()
		q := w.q
		w.q = nil
		return q
	}
	w := NewWriter(io.Discard, io.Discard, false)
	p := Progress{live: true}
	p.Show(w, 1, 2, 0, 4, false)
	p.Show(w, 2, 2, 4, 4, false)
	p.Show(w, 2, 2, 4, 4, false)
	got := pushed(w)
	if len(got) != 2 || !got[0].Progress || string(got[0].Data) != "ftlaunch: 1/2 agents up, 0/4 ranks running" || !got[1].Progress || len(got[1].Data) != 0 {
		t.Errorf("shown, then cleared once: %+v", got)
	}
	p = Progress{live: true}
	p.Show(w, 1, 2, 0, 4, true)
	if got := pushed(w); len(got) != 1 || len(got[0].Data) != 0 {
		t.Errorf("a failed launch: %+v, want the line cleared", got)
	}
	for _, p := range []Progress{ProgressOn(&bytes.Buffer{}, false), {}} {
		p.Show(w, 1, 2, 0, 4, false)
	}
	if got := pushed(w); len(got) != 0 {
		t.Errorf("no terminal: %+v", got)
	}
}
