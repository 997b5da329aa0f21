package proto

import (
	"fmt"
	"time"
)

// at prints one phase, reached at t.
func (p *PhaseLog) At(t time.Time, format string, args ...any) {
	if p == nil {
		return
	}
	fmt.Fprintf(p.W, "ftlaunch agent: [%7.3fs] "+format+"\n", append([]any{t.Sub(p.T0).Seconds()}, args...)...)
}

// logf prints one phase, reached now.
func (p *PhaseLog) Logf(format string, args ...any) { p.At(time.Now(), format, args...) }
