package launcher

import (
	"fmt"
)

// add tells the guard of a rank's process group.
func (g *OrphanGuard) Add(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w != nil {
		_, _ = fmt.Fprintf(g.w, "%d\n", pgid)
	}
}

// release ends the guard without signalling anything, and reaps it.
func (g *OrphanGuard) Release() {
	g.mu.Lock()
	w := g.w
	g.w = nil
	g.mu.Unlock()
	if w == nil {
		return
	}
	_, _ = w.WriteString("end\n")
	w.Close()
	_ = g.cmd.Wait()
}
