package launcher

// Retire ends a lost incarnation's process or session for good, once its
// next incarnation is decided: a local agent (killed when it was lost) is
// reaped on a goroutine of goFunc; a session is killed (KillSession),
// since a silent agent (stopped, say) never reads that its session closed.
func (a AgentEnd) Retire(goFunc func(func())) {
	if a.Local != nil {
		goFunc(a.Wait)
	}
	if a.Sess != nil {
		KillSession(a.Sess)
	}
}

// Discard ends a start nobody takes any more (the job ended, or a newer
// incarnation was decided meanwhile): its link is closed and its session
// killed.
func (r LaunchResult) Discard() {
	if r.Link != nil {
		r.Link.Conn.Close()
	}
	if r.Sess != nil {
		KillSession(r.Sess)
	}
}
