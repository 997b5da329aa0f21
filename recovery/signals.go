package recovery

import (
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The user's signals (docs/guide.md): SIGINT, SIGTERM and SIGHUP to the
// front-end end the job, as mpiexec's do: the signal goes to every rank,
// then SIGTERM, then SIGKILL after --kill-after, and the job's exit
// status is 128 plus the signal's number; the same signal again, or
// another of the three, kills every rank at once. Other signals (SIGUSR1,
// SIGUSR2, SIGCONT) are only forwarded. ftlaunch kill's SIGQUIT and
// SIGKILL end the job too, and ftlaunch cancel ends it as SIGTERM does;
// another signal sent with ftlaunch kill is delivered, and a rank it
// kills was ended by the user: the job ends as the user's signal, not as
// a failure to recover. A replicated front-end that can leave the job to
// its root replicas (Detach) does so on SIGHUP once their group is up,
// unless the job is ending; before, SIGHUP ends the job, with a warning.

// Signaled: the user sent Signal: to the front-end (its terminal: From
// is ""), with ftlaunch kill (From: who sent it), or asked ftlaunch cancel
// (Cancel; Signal is SIGTERM). Detach: the front-end can leave a
// replicated job to its root replicas (Options.Detach); GroupUp: their
// group is up (every replica, and the root's children know where they
// are), as the root found it on SIGHUP.
type Signaled struct {
	Signal          int
	From            string
	Cancel          bool
	Detach, GroupUp bool
}

// Detach: the front-end leaves the job to its root replicas (one of them
// takes the root over); it ends its process.
type Detach struct{}

// SignalRanks: send Signal to every rank (the user's, as Signaled said;
// Ends: it ends the job).
type SignalRanks struct {
	Signal int
	From   string
	Ends   bool
}

// KillRanks: the user asked again to end a job that is ending (Signaled,
// as the event said): every rank is killed at once.
type KillRanks struct {
	Signal int
	From   string
	Cancel bool
}

func (SignalRanks) isAction() {}
func (KillRanks) isAction()   {}
func (Detach) isAction()      {}

// signaled decides what the user's signal does.
func (p *Planner) signaled(ev Signaled) []Action {
	s := syscall.Signal(ev.Signal)
	if s == syscall.SIGHUP && ev.Detach && !p.Ending() {
		if ev.GroupUp {
			return []Action{Detach{}}
		}
		early := Reason{Kind: ReasonDetachEarly, Rank: NoRank, Signal: ev.Signal}
		return append([]Action{Report{Why: early}}, p.signaled(Signaled{Signal: ev.Signal, From: ev.From, Cancel: ev.Cancel})...)
	}
	ends := ev.Cancel || s == syscall.SIGINT || s == syscall.SIGTERM || s == syscall.SIGHUP ||
		ev.From != "" && (s == syscall.SIGQUIT || s == syscall.SIGKILL)
	switch {
	case !ends:
		if ev.From != "" {
			p.userSignals[ev.Signal] = true // a rank it kills was ended by the user
		}
		return []Action{SignalRanks{Signal: ev.Signal, From: ev.From}}
	case p.phase == Over:
		return nil // every rank ended already: the job's end stands
	case p.phase == Ending:
		return []Action{KillRanks{Signal: ev.Signal, From: ev.From, Cancel: ev.Cancel}}
	}
	p.endSignal = ev.Signal
	why := Reason{Kind: ReasonSignal, Rank: NoRank, Signal: ev.Signal, Limit: p.cfg.KillAfter, Text: ev.From}
	if ev.Cancel {
		why.Kind = ReasonCancel
	}
	return append([]Action{SignalRanks{Signal: ev.Signal, From: ev.From, Ends: true}}, p.endJob(128+ev.Signal, why)...)
}

// endedByUser ends the job as the user's signal when a rank died of a
// signal the user sent with ftlaunch kill (before its end is taken: then
// as part of the end, not as a failure to recover).
func (p *Planner) endedByUser(ev RankExited) []Action {
	if ev.Signal == 0 || !p.userSignals[ev.Signal] || p.Ending() {
		return nil
	}
	p.endSignal = ev.Signal
	return p.endJob(128+ev.Signal, Reason{Kind: ReasonSignalRank, Rank: ev.Rank, Signal: ev.Signal})
}

// notItsFailure reports whether the end ev of a rank is not a failure of
// its own, for the job's summary of failed ranks: the rank was skipped
// (never started), killed by the user's signal (after, the status once ev
// was stepped, names it as the job's end), or killed by the termination
// the job's end started (SIGTERM, SIGKILL, or the user's signal the end
// forwards) while the job was ending (before: the status before ev).
func notItsFailure(ev RankExited, before, after Status) bool {
	s := ev.Signal
	byEnd := before.Ending() && (s == int(syscall.SIGTERM) || s == int(syscall.SIGKILL) || before.EndSignal != 0 && s == before.EndSignal)
	byUser := after.Failure != nil && after.Failure.Why.Kind == ReasonSignalRank && after.Failure.Why.Rank == ev.Rank
	return byEnd || ev.Skipped || byUser
}

// signalWords says how the user's signal ends the job (ReasonSignal,
// ReasonCancel, ReasonSignalRank).
func (r Reason) signalWords() string {
	name := unix.SignalName(syscall.Signal(r.Signal))
	switch {
	case r.Kind == ReasonSignalRank:
		return fmt.Sprintf("rank %d was ended by the user's %s: ending the job", r.Rank, name)
	case r.Kind == ReasonCancel:
		return fmt.Sprintf("job cancelled by %s: ending the job (%s)", r.Text, EndingSteps(syscall.SIGTERM, r.Limit))
	case r.Text != "":
		return fmt.Sprintf("%s from %s: ending the job (%s)", name, r.Text, EndingSteps(syscall.Signal(r.Signal), r.Limit))
	}
	return fmt.Sprintf("%s: ending the job (%s; %s again kills at once)", name, EndingSteps(syscall.Signal(r.Signal), r.Limit), name)
}

// EndingSteps says how a job ends after the user's signal s: s to every
// rank, then SIGTERM (unless s was SIGTERM), SIGKILL after killAfter.
func EndingSteps(s syscall.Signal, killAfter time.Duration) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL to every rank"
	case syscall.SIGTERM:
		return fmt.Sprintf("SIGTERM to every rank, SIGKILL after %v", killAfter)
	}
	return fmt.Sprintf("%s to every rank, then SIGTERM, SIGKILL after %v", unix.SignalName(s), killAfter)
}

// signalNarration says what SignalRanks and KillRanks do (Narrate).
func signalNarration(act Action) (string, bool) {
	switch a := act.(type) {
	case SignalRanks:
		name := unix.SignalName(syscall.Signal(a.Signal))
		switch {
		case a.From == "":
			return fmt.Sprintf("forwarding signal %d (%v) to every rank", a.Signal, syscall.Signal(a.Signal)), false
		case !a.Ends:
			return fmt.Sprintf("%s from %s: forwarding it to every rank", name, a.From), false
		}
	case KillRanks:
		name := unix.SignalName(syscall.Signal(a.Signal))
		switch {
		case a.Cancel:
			return fmt.Sprintf("job cancelled by %s again: killing every rank", a.From), true
		case a.From != "":
			return fmt.Sprintf("%s from %s again: killing every rank", name, a.From), true
		}
		return fmt.Sprintf("%s again: killing every rank", name), true
	}
	return "", false
}
