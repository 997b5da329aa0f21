// Package output writes a job's output for the root: the ranks' lines
// (labelled, or to per-rank files with --output-dir), ftlaunch's own
// messages and the progress line, from a goroutine of its own (Writer.Start:
// stopped and joined by Close), acknowledging to each source what it wrote.
package output
