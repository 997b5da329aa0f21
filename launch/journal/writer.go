package journal

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// writer is the journal goroutine's state: a copy of the node table and
// agents as written, and what the next flush will write. Only the journal
// goroutine touches it.
type writer struct {
	j    *Journal
	r    *raftstore.Replica // nil for a solo log
	solo *raftstore.Solo    // a solo log's (nil: r's)
	// id and seq key a replica's commands (raftstore.Once): unique per
	// writer, so that a successor's are not taken for the front-end's.
	id  string
	seq uint64
	// epoch is the state's epoch as this writer last saw it committed:
	// its plan and recovery commands expect it (raftstore's
	// compare-and-set), so that a root deposed by a takeover it did not
	// see is refused by the state machine.
	epoch uint64
	job   bool // the job is still to be recorded, with the first flush
	rows  []raftstore.Rank
	// agents' incarnations as written.
	agents map[string]raftstore.Agent
	// open failures: the incarnation that failed, by subject, as the
	// state machine tracks them (raftstore.TrackOpen).
	open map[raftstore.Subject]uint64

	// The next flush.
	plan        *raftstore.SetPlan
	recovery    *raftstore.SetRecovery
	dirtyAgents []string
	dirty       []bool
	dirtyRows   []int
	events      []raftstore.Event
	exits       map[exitKey]*exitGroup
	first       time.Time // when the oldest unflushed record was made
	urgent      bool
	syncs       []chan error
	finish      *raftstore.Status
	finishAt    time.Time
	// loseLead: the next flush begins with Config.LoseLeadAt's blip
	// (tests); lostLead: it was had.
	loseLead, lostLead bool
}

// codeNote adds the recorded exit code where the description does not
// say it.
func codeNote(e *RankExit) string {
	if e.Signal == 0 && e.Reason == "" {
		return ""
	}
	return fmt.Sprintf(" (exit code %d)", e.exitCode())
}

// exitKey groups the exits of one flush.
type exitKey struct {
	node string
	code int
	how  string
}

type exitGroup struct {
	event int // index in events
	ranks []int
}

func newWriter(j *Journal, r *raftstore.Replica) *writer {
	n := j.cfg.Job.N
	w := &writer{
		j:      j,
		r:      r,
		rows:   make([]raftstore.Rank, n),
		dirty:  make([]bool, n),
		agents: map[string]raftstore.Agent{},
		open:   map[raftstore.Subject]uint64{},
		exits:  map[exitKey]*exitGroup{},
		id:     writerID(j.cfg.Node),
	}
	for i := range w.rows {
		w.rows[i].Rank = i
	}
	return w
}

// writerID names a writer: its node, the time and a random part.
func writerID(node string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%x", node, time.Now().UnixNano(), b)
}

// seed starts the writer from a replicated state: its rows and agents as
// committed.
func (w *writer) seed(st *raftstore.State) {
	for i := range w.rows {
		if i < len(st.Ranks) {
			w.rows[i] = st.Ranks[i]
		}
	}
	for name, ag := range st.Agents {
		w.agents[name] = ag
	}
	w.epoch = st.Epoch // the takeover's
	// The failures still open: a successor that reports one again is
	// not refused as a batch by the state machine.
	for i := range st.Events {
		raftstore.TrackOpen(w.open, &st.Events[i])
	}
}

// setJob commits the job (with its StepJob event at the job's start).
func (w *writer) setJob(ctx context.Context) error {
	return w.apply(ctx, w.jobCommand())
}

// jobCommand records the job, with its StepJob event at the job's start.
func (w *writer) jobCommand() raftstore.Command {
	job := w.j.cfg.Job
	return &raftstore.SetJob{
		Job: raftstore.JobSpec{ID: job.ID, Size: job.N, Spec: encodeJob(job)},
		Events: []raftstore.Event{{
			Time: job.Start, Kind: raftstore.EventLaunch, Rank: raftstore.NoRank,
			Detail: detail(StepJob, "%d ranks: %s", job.N, strings.Join(job.Argv, " ")),
		}},
	}
}

// loop folds records into flushes until Close's record is written or ctx
// ends.
func (w *writer) loop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		for _, rec := range w.j.take() {
			w.absorb(rec)
		}
		if w.due() {
			w.flush(ctx)
			if w.finish != nil {
				w.spreadCommit()
				return
			}
			continue
		}
		var tc <-chan time.Time
		switch {
		case w.finish != nil: // waiting for a join under way (due)
			timer.Reset(w.j.cfg.JoinWait - time.Since(w.finishAt))
			tc = timer.C
		case !w.first.IsZero():
			timer.Reset(w.j.cfg.Linger - time.Since(w.first))
			tc = timer.C
		}
		select {
		case <-w.j.wake:
		case <-tc:
		case <-ctx.Done():
			w.answerSyncs(ctx.Err())
			return
		}
	}
}

// spreadCommit makes the followers learn that the final status is
// committed before this leader shuts down: a follower learns the commit
// index only from the leader's next message, and the leader shuts down
// right after the commit, so a replica agent would wait (finalWait, 2 s)
// for a status it already holds. A barrier is one more entry, whose
// replication carries the commit index; bounded by barrierWait.
func (w *writer) spreadCommit() {
	if w.r == nil || len(w.r.Raft().GetConfiguration().Configuration().Servers) < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), barrierWait)
	defer cancel()
	_ = w.r.Barrier(ctx) // a follower that misses it waits finalWait at most
}

// barrierWait bounds spreadCommit.
const barrierWait = 500 * time.Millisecond

// due reports whether the pending records should be flushed now.
func (w *writer) due() bool {
	if w.finish != nil {
		// The final status waits for the join under way, if any, so that
		// it reaches the replica joining (Join).
		return w.j.joinsUnderWay() == 0 || time.Since(w.finishAt) >= w.j.cfg.JoinWait
	}
	if w.urgent || w.finish != nil || len(w.syncs) > 0 || len(w.dirtyRows) >= w.j.cfg.MaxRows {
		return true
	}
	return !w.first.IsZero() && time.Since(w.first) >= w.j.cfg.Linger
}

func (w *writer) pending() {
	if w.first.IsZero() {
		w.first = time.Now()
	}
}

func (w *writer) bad(format string, args ...any) {
	w.j.setErr(fmt.Errorf("journal: "+format, args...))
}

// absorb applies one record to the pending flush.
func (w *writer) absorb(rec record) {
	switch {
	case rec.plan != nil:
		w.absorbPlan(rec.at, rec.plan)
	case rec.agent != nil:
		w.absorbAgent(rec.at, rec.agent)
	case rec.started != nil:
		w.absorbStarted(rec.at, rec.started)
	case rec.table != nil:
		w.absorbTable(rec.at, rec.table)
	case rec.exit != nil:
		w.absorbExit(rec.at, rec.exit)
	case rec.failure != nil:
		w.absorbFailure(rec.at, rec.failure)
	case rec.phase != nil:
		w.absorbPhase(rec.at, rec.phase)
		if rec.sync != nil { // answered once the phase is committed
			w.syncs = append(w.syncs, rec.sync)
		}
	case rec.sync != nil:
		w.syncs = append(w.syncs, rec.sync)
	case rec.finish != nil:
		w.finish, w.finishAt = rec.finish, rec.at
	case rec.model != nil:
		w.absorbMeasured(rec.at, rec.model)
	case rec.colls != nil:
		w.jsonEvent(rec.at, StepCollectives, rec.colls)
	case rec.stranded != nil:
		w.jsonEvent(rec.at, StepStranded, rec.stranded)
	case rec.fence != nil:
		f := rec.fence
		what := "node fenced in " + ms(f.Took) + ": " + f.Result
		if f.Err != "" {
			what = "not fenced: " + f.Err
		}
		// No Incarnation field: the fence ends an older incarnation and
		// may be recorded after the next one's launch, whose incarnations
		// only go up (raftstore's invariants); the detail names it.
		w.event(raftstore.Event{Time: rec.at, Kind: raftstore.EventLaunch, Node: f.Node, Rank: raftstore.NoRank,
			Detail: detail(StepFence, "%s (incarnations up to %d)", what, f.Incarnation)})
	}
}

// jsonEvent writes an event of the root whose detail is step and v as
// JSON (read back by Analyze).
func (w *writer) jsonEvent(at time.Time, step string, v any) {
	ev, err := modelEvent(at, step, v)
	if err != nil {
		w.bad("%v", err)
		return
	}
	w.event(ev)
}

func (w *writer) event(ev raftstore.Event) {
	w.events = append(w.events, ev)
	w.pending()
}

func (w *writer) absorbPlan(at time.Time, p *Plan) {
	root := p.Root
	if root == "" {
		root = RootName
	}
	nodes := []raftstore.PlanNode{{Name: root}}
	for _, n := range p.Nodes {
		nodes = append(nodes, raftstore.PlanNode{Name: n.Name, Primary: n.Primary, Backup: n.Backup})
	}
	replicas := make([]string, 0, len(w.j.cfg.Peers)+len(p.Replicas))
	for _, s := range w.j.cfg.Peers {
		replicas = append(replicas, string(s.ID))
	}
	if len(replicas) == 0 { // a solo log: itself
		replicas = append(replicas, w.j.cfg.Node)
	}
	for _, n := range p.Replicas {
		if !slices.Contains(replicas, n) {
			replicas = append(replicas, n)
		}
	}
	kind := p.Kind
	if kind == "" {
		kind = "unknown"
	}
	w.plan = &raftstore.SetPlan{Plan: raftstore.Plan{Nodes: nodes, Replicas: replicas}}
	d := detail(StepPlan, "%s tree, %d nodes below %s", kind, len(p.Nodes), root)
	if p.Change != "" {
		d = detail(StepPlan, "changed: %s", p.Change)
	}
	w.event(raftstore.Event{Time: at, Kind: raftstore.EventLaunch, Node: root, Rank: raftstore.NoRank, Detail: d})
	if p.Model != nil {
		ev, err := modelEvent(at, StepModel, p.Model)
		if err != nil {
			w.bad("%v", err)
		} else {
			w.event(ev)
		}
	}
	w.urgent = true
}

func (w *writer) absorbAgent(at time.Time, a *AgentUp) {
	if a.Node == "" {
		w.bad("agent up without a node name")
		return
	}
	cur, ok := w.agents[a.Node]
	ag := raftstore.Agent{Node: a.Node, Addr: a.Addr, Incarnation: max(cur.Incarnation, a.Incarnation, 1)}
	if !ok || cur != ag {
		w.agents[a.Node] = ag
		if !slices.Contains(w.dirtyAgents, a.Node) {
			w.dirtyAgents = append(w.dirtyAgents, a.Node)
		}
	}
	ev := raftstore.Event{Kind: raftstore.EventLaunch, Node: a.Node, Rank: raftstore.NoRank, Incarnation: ag.Incarnation}
	if !a.Launched.IsZero() {
		ev.Time, ev.Detail = a.Launched, detail(StepLaunch, "agent launch began")
		w.event(ev)
		if a.SSH > 0 {
			switch a.Start {
			case "", StartSSH:
				ev.Detail = detail(StepSSH, "ssh session up after %s", ms(a.SSH))
			case StartSrun:
				ev.Detail = detail(StepStart, "srun step started after %s", ms(a.SSH))
			default:
				ev.Detail = detail(StepStart, "%s started after %s", a.Start, ms(a.SSH))
			}
			ev.Time = a.Launched.Add(a.SSH)
			w.event(ev)
		}
	}
	ev.Time = at
	how := "connected back"
	if a.Addr != "" {
		how += " from " + a.Addr
	}
	if !a.Launched.IsZero() {
		how += fmt.Sprintf(" %s after its launch began", ms(at.Sub(a.Launched)))
	}
	ev.Detail = detail(StepUp, "%s", how)
	w.event(ev)
}

func (w *writer) checkRank(r int, what string) bool {
	if r < 0 || r >= len(w.rows) {
		w.bad("%s: rank %d of a job of %d ranks", what, r, len(w.rows))
		return false
	}
	return true
}

func (w *writer) touch(r int) {
	if !w.dirty[r] {
		w.dirty[r] = true
		w.dirtyRows = append(w.dirtyRows, r)
	}
}

func (w *writer) absorbStarted(at time.Time, s *started) {
	if len(s.pids) != len(s.ranks) {
		w.bad("ranks started on %s: %d ranks, %d pids", s.node, len(s.ranks), len(s.pids))
		return
	}
	for i, r := range s.ranks {
		if !w.checkRank(r, "ranks started") {
			return
		}
		row := &w.rows[r]
		row.Incarnation = max(row.Incarnation, 1)
		if s.incs != nil && s.incs[i] > row.Incarnation {
			// Started again: a new incarnation, running.
			row.Incarnation, row.State, row.ExitCode = s.incs[i], raftstore.RankRunning, 0
		}
		row.Node, row.PID = s.node, s.pids[i]
		if row.State == raftstore.RankUnknown || row.State == raftstore.RankStarting {
			row.State = raftstore.RankRunning
		}
		w.touch(r)
	}
	w.event(raftstore.Event{Time: at, Kind: raftstore.EventLaunch, Node: s.node, Rank: raftstore.NoRank,
		Detail: detail(StepRanks, "%d rank(s) started: %s", len(s.ranks), rankList(s.ranks))})
}

func (w *writer) absorbTable(at time.Time, t *table) {
	if len(t.ituples) != len(w.rows) || (t.nodes != nil && len(t.nodes) != len(w.rows)) {
		w.bad("node table of %d I-tuples and %d nodes for a job of %d ranks", len(t.ituples), len(t.nodes), len(w.rows))
		return
	}
	for r := range w.rows {
		row := &w.rows[r]
		row.ITuple = t.ituples[r]
		if t.nodes != nil && t.nodes[r] != "" {
			row.Node = t.nodes[r]
		}
		if row.State == raftstore.RankUnknown {
			row.State, row.Incarnation = raftstore.RankRunning, max(row.Incarnation, 1)
		}
		w.touch(r)
	}
	w.event(raftstore.Event{Time: at, Kind: raftstore.EventLaunch, Rank: raftstore.NoRank,
		Detail: detail(StepTable, "node table of %d ranks published", len(w.rows))})
	w.urgent = true
}

func (w *writer) absorbExit(at time.Time, e *RankExit) {
	if !w.checkRank(e.Rank, "rank exited") {
		return
	}
	row := &w.rows[e.Rank]
	row.Incarnation = max(row.Incarnation, 1)
	row.State, row.ExitCode = raftstore.RankExited, e.exitCode()
	if e.Reason != "" {
		row.State = raftstore.RankFailed
	}
	w.touch(e.Rank)
	// Ranks of one node that end the same way within one flush share an
	// event (a terminated job's ranks all end by SIGTERM); a rank alone in
	// its group gets an event of its own, unless it exited cleanly.
	key := exitKey{node: row.Node, code: e.exitCode(), how: e.describe()}
	g := w.exits[key]
	if g == nil {
		g = &exitGroup{event: len(w.events)}
		w.exits[key] = g
		w.event(raftstore.Event{Kind: raftstore.EventExit, Node: row.Node})
	}
	g.ranks = append(g.ranks, e.Rank)
	ev := &w.events[g.event]
	ev.Time = at
	clean := e.exitCode() == 0 && e.Reason == ""
	if len(g.ranks) == 1 && !clean {
		ev.Rank, ev.Incarnation = e.Rank, row.Incarnation
		ev.Detail = detail(StepExit, "%s%s", key.how, codeNote(e))
		return
	}
	ev.Rank, ev.Incarnation = raftstore.NoRank, 0
	ev.Detail = detail(StepExit, "%d rank(s) %s%s: %s", len(g.ranks), key.how, codeNote(e), rankList(g.ranks))
}

func (w *writer) absorbFailure(at time.Time, f *Failure) {
	ev := raftstore.Event{Time: at, Kind: raftstore.EventFailure, Node: f.Node, Rank: f.Rank, Detail: f.Message}
	if f.Rank != raftstore.NoRank {
		if !w.checkRank(f.Rank, "failure") {
			return
		}
		ev.Incarnation = w.rows[f.Rank].Incarnation
		if ev.Node == "" {
			ev.Node = w.rows[f.Rank].Node
		}
	} else {
		ev.Incarnation = w.agents[f.Node].Incarnation
	}
	subj := ev.Subject()
	if inc, ok := w.open[subj]; ok && ev.Incarnation <= inc {
		// The state machine takes one failure per subject and incarnation:
		// a second report is kept as a launch event. A later incarnation's
		// failure (an agent started again and lost again) is a failure.
		ev.Kind, ev.Detail = raftstore.EventLaunch, detail(StepFailure, "%s", f.Message)
	} else {
		w.open[subj] = ev.Incarnation
	}
	w.event(ev)
	w.urgent = true
}

// flush writes the pending records: the plan, the agents, the changed
// rows (at most MaxRows per entry), with the events on the last entry
// (or alone), then the final status with the events still pending if
// Close was called. A solo log writes them in one batch, the job's record
// first if it is still to be written.
func (w *writer) flush(ctx context.Context) {
	var cmds []raftstore.Command
	if w.job {
		cmds = append(cmds, w.jobCommand())
		w.job = false
	}
	if w.plan != nil {
		w.plan.ExpectEpoch = w.epoch
		cmds = append(cmds, w.plan)
	}
	if w.recovery != nil {
		w.recovery.ExpectEpoch = w.epoch // the plan before it does not move it
		cmds = append(cmds, w.recovery)
		w.recovery = nil
	}
	if len(w.dirtyAgents) > 0 {
		c := &raftstore.UpdateAgents{}
		for _, n := range w.dirtyAgents {
			c.Agents = append(c.Agents, w.agents[n])
		}
		cmds = append(cmds, c)
	}
	slices.Sort(w.dirtyRows)
	rows := 0
	for len(w.dirtyRows) > 0 {
		k := min(len(w.dirtyRows), w.j.cfg.MaxRows)
		c := &raftstore.UpdateRanks{Ranks: make([]raftstore.Rank, 0, k)}
		for _, r := range w.dirtyRows[:k] {
			c.Ranks = append(c.Ranks, w.rows[r])
			w.dirty[r] = false
		}
		rows += k
		w.dirtyRows = w.dirtyRows[k:]
		cmds = append(cmds, c)
	}
	w.dirtyRows = nil
	events := w.events
	if len(events) > 0 && w.finish == nil {
		switch c := lastOr(cmds).(type) {
		case *raftstore.SetPlan:
			c.Events = events
		case *raftstore.UpdateAgents:
			c.Events = events
		case *raftstore.UpdateRanks:
			c.Events = events
		case *raftstore.SetRecovery:
			c.Events = events
		default:
			cmds = append(cmds, &raftstore.AppendEvents{Events: events})
		}
	}
	if w.finish != nil {
		cmds = append(cmds, &raftstore.Finish{Time: w.finishAt, Status: *w.finish, Events: events})
	}
	if w.loseLead {
		w.loseLead = false
		w.handLeadAway(ctx)
	}
	err := w.applyAll(ctx, cmds)
	w.j.mu.Lock()
	w.j.stats.Flushes++
	w.j.stats.Rows += rows
	w.j.stats.Events += len(events)
	if w.finish != nil {
		w.j.stats.Events++ // the final status's own
	}
	w.j.mu.Unlock()
	w.events = nil
	w.plan, w.dirtyAgents = nil, nil
	clear(w.exits)
	w.first, w.urgent = time.Time{}, false
	w.answerSyncs(err)
}

func lastOr(cmds []raftstore.Command) raftstore.Command {
	if len(cmds) == 0 {
		return nil
	}
	return cmds[len(cmds)-1]
}

func (w *writer) answerSyncs(err error) {
	if err == nil {
		err = w.j.Err()
	}
	for _, ch := range w.syncs {
		ch <- err
	}
	w.syncs = nil
}

// applyAll commits commands in order and returns the first error: a
// solo log's in one batch, a replica's one by one.
func (w *writer) applyAll(ctx context.Context, cmds []raftstore.Command) error {
	var first error
	keep := func(e error) {
		if e != nil && first == nil {
			first = e
		}
	}
	if w.solo == nil {
		for _, c := range cmds {
			keep(w.apply(ctx, c))
		}
		return first
	}
	if len(cmds) == 0 {
		return nil
	}
	out, err := w.solo.ApplyBatch(cmds)
	if err != nil {
		err = fmt.Errorf("journal: %w", err)
		w.j.setErr(err)
		return err
	}
	for i, o := range out {
		w.saw(o.Result)
		w.count(o.Err)
		if o.Err != nil {
			keep(w.refused(ctx, cmds[i], o.Err))
		}
	}
	return first
}

// commit commits one command through the solo log, or the replica as
// write does (refused's, for the parts of a refused command).
func (w *writer) commit(ctx context.Context, c raftstore.Command) error {
	if w.solo == nil {
		return w.write(ctx, c)
	}
	res, err := w.solo.Apply(c)
	w.saw(res)
	w.count(err)
	return err
}

// saw keeps the state's epoch after a command this writer committed.
func (w *writer) saw(res *raftstore.Result) {
	if res != nil {
		w.epoch = res.Epoch
	}
}

// apply commits one command through the replica (write). If the state
// machine refuses a command that carries events, the command is retried
// without them and the events are appended one by one, so that one bad
// event costs only itself.
func (w *writer) apply(ctx context.Context, c raftstore.Command) error {
	err := w.write(ctx, c)
	if err == nil {
		return nil
	}
	return w.refused(ctx, c, err)
}

// write commits one command through the replica under a Once key of its
// own, and again, with the same key, each time its replica leads again
// after the command found it deposed (regain). It returns the last
// error: nil, the state machine's refusal, or why it gave up waiting for
// the lead.
func (w *writer) write(ctx context.Context, c raftstore.Command) error {
	w.seq++
	once := raftstore.Once{Writer: w.id, Seq: w.seq}
	res, err := w.r.ApplyOnce(ctx, c, once)
	w.saw(res)
	w.count(err)
	watched := w.j.isWatched()
	for try := 0; err != nil && (watched || try < 5); try++ {
		if err = w.regain(ctx, err); err != nil {
			break
		}
		// Leadership went to another replica and came back (a loaded
		// machine delays heartbeats): write again, with the same key, so
		// that a command that was committed after all is not applied
		// (its events not appended) twice. A watched journal tries as
		// long as it lasts: on a loaded machine the lead may come and go
		// more than five times in one write, and a recovery's phase that
		// could not be committed ended the job.
		res, err = w.r.ApplyOnce(ctx, c, once)
		w.saw(res)
		w.count(err)
	}
	return err
}

// refused handles a command that was not committed (err is the journal's)
// or that the state machine refused: one refused with events is committed
// again without them, and its events one by one.
func (w *writer) refused(ctx context.Context, c raftstore.Command, err error) error {
	if !errors.Is(err, raftstore.ErrRefused) {
		err = fmt.Errorf("journal: %w", err)
		w.j.setErr(err)
		return err
	}
	evs := takeEvents(c)
	if len(evs) == 0 {
		err = fmt.Errorf("journal: %w", err)
		w.j.setErr(err)
		return err
	}
	var first error
	keep := func(e error) {
		if e != nil && first == nil {
			first = fmt.Errorf("journal: %w", e)
			w.j.setErr(first)
		}
	}
	if _, ok := c.(*raftstore.AppendEvents); !ok {
		keep(w.commit(ctx, c))
	}
	for _, ev := range evs {
		keep(w.commit(ctx, &raftstore.AppendEvents{Events: []raftstore.Event{ev}}))
	}
	return first
}

// regain waits, after a write failed with err because the replica does
// not lead (or stopped leading while it wrote), for it to lead again. It
// returns nil if it does, else the error to report: ErrFenced (with err)
// once another replica took the root over; ErrNoMajority (with err) as
// soon as the replica has known no leader for NoLeader: the group lost
// its majority, and waiting would only hold the job (and its end) without
// a state log; err if ctx ends (Close's bound, Abandon), or, unless the
// journal is watched, if the replica does not lead within Regain while
// another member leads. A watched journal's caller holds its events while
// deposed and steps aside (Abandon) when it cannot lead again
// (docs/state.md): its write waits for that rather than fail — a
// recovery's phase that could not be committed ended the job, although
// the lead came back (chaos-interior, a load of 30).
func (w *writer) regain(ctx context.Context, err error) error {
	if !errors.Is(err, raftstore.ErrNotLeader) && !errors.Is(err, raftstore.ErrIndeterminate) {
		return err
	}
	watched := w.j.isWatched()
	deadline := time.Now().Add(w.j.cfg.Regain)
	for {
		if t := w.j.takenOver(); t != nil {
			// Deposed for good: the root that took over writes from now
			// on, and this one must not wait to lead again.
			return fmt.Errorf("%w: %v: %w", ErrFenced, t, err)
		}
		if w.r.IsLeader() {
			return nil
		}
		if lost := w.j.noMajority(w.r.Leaderless()); lost != nil {
			return fmt.Errorf("%w: %w", lost, err)
		}
		if !watched && !time.Now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond): // polling raft's state
		}
	}
}

// handLeadAway is Config.LoseLeadAt's leadership blip (tests): the
// replica hands its lead to another voter, and the writer waits (5 s at
// most) until it no longer leads, so that the flush that follows finds
// it deposed. Without another voter to take it, nothing happens.
func (w *writer) handLeadAway(ctx context.Context) {
	if w.r == nil {
		return
	}
	if err := w.r.TransferLeadership(ctx, "", ""); err != nil {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.r.IsLeader() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond): // polling raft's state
		}
	}
}

// takeEvents removes and returns a command's events.
func takeEvents(c raftstore.Command) []raftstore.Event {
	var evs []raftstore.Event
	switch c := c.(type) {
	case *raftstore.SetJob:
		evs, c.Events = c.Events, nil
	case *raftstore.SetPlan:
		evs, c.Events = c.Events, nil
	case *raftstore.SetRecovery:
		evs, c.Events = c.Events, nil
	case *raftstore.UpdateAgents:
		evs, c.Events = c.Events, nil
	case *raftstore.UpdateRanks:
		evs, c.Events = c.Events, nil
	case *raftstore.AppendEvents:
		evs, c.Events = c.Events, nil
	case *raftstore.Finish:
		evs, c.Events = c.Events, nil
	}
	return evs
}

// count records one Apply's outcome: committed (possibly refused) or not.
func (w *writer) count(err error) {
	committed := err == nil || errors.Is(err, raftstore.ErrRefused)
	w.j.mu.Lock()
	defer w.j.mu.Unlock()
	if committed {
		w.j.stats.Entries++
	}
	if errors.Is(err, raftstore.ErrRefused) {
		w.j.stats.Refused++
	}
}

// rankList shows a list of ranks compactly: "0-7", "0,2,4".
func rankList(ranks []int) string {
	var b strings.Builder
	for i := 0; i < len(ranks); {
		k := i
		for k+1 < len(ranks) && ranks[k+1] == ranks[k]+1 {
			k++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if b.Len() > 200 {
			b.WriteString("...")
			break
		}
		if k > i {
			fmt.Fprintf(&b, "%d-%d", ranks[i], ranks[k])
		} else {
			fmt.Fprintf(&b, "%d", ranks[i])
		}
		i = k + 1
	}
	return b.String()
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}
