package recovery

// Status is the planner's state as the root reads it between steps: a
// snapshot, taken by value, that the root cannot change. The root asks the
// planner nothing else but Step, this and the rank ledger (Ledger): what
// it must do comes as actions (the record of a recovery carried out, too:
// RecoveryOver).
type Status struct {
	Phase Phase
	// Failure is the failure that ended the job, or nil.
	Failure *Failure
	// Resumed: the planner serves a root that took over from a lost one.
	Resumed bool
	// Epoch is the recovery epoch, Stage the stage of the recovery in
	// progress (0: none), Version the node table's version.
	Epoch   uint64
	Stage   Stage
	Version uint64
	// Suspends: the recovery under way holds every rank suspended (an
	// agent started again now joins the suspension).
	Suspends bool
	// EndSignal is the user's signal that ends the job (0: none): a rank
	// it killed did not fail by itself.
	EndSignal int
	// relaunching are the agents lost and being started again.
	relaunching []int
}

// Ending reports whether the job is being terminated or is over: no
// failure starts anything any more.
func (s Status) Ending() bool { return s.Phase == Ending || s.Phase == Over }

// Final is the job's final status as the state log commits it: the
// failure that ended it (its code, its words), else success with code
// (the root's: its loop's exit code).
func (s Status) Final(code int) (int, string) {
	if f := s.Failure; f != nil {
		return f.Code, f.Why.Words()
	}
	return code, "success"
}

// Relaunching reports whether agent a is lost and being started again: its
// ranks are not the job's end, and its old incarnation is declared lost.
func (s Status) Relaunching(a int) bool {
	for _, x := range s.relaunching {
		if x == a {
			return true
		}
	}
	return false
}

// Status is a snapshot of the planner's state for the root.
func (p *Planner) Status() Status {
	s := Status{Phase: p.phase, Failure: p.failure, Resumed: p.cfg.Resumed, Epoch: p.epoch, Stage: p.Stage(),
		Version: p.version, Suspends: p.Suspends(), EndSignal: p.endSignal}
	for a := range p.agents {
		if p.Relaunching(a) {
			s.relaunching = append(s.relaunching, a)
		}
	}
	return s
}
