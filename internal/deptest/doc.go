// Package deptest holds the test that keeps the project's imports pointing
// one way (docs/design.md, "Packages"): leaf packages import nothing of the
// project above them, the launcher composes them, and commands compose
// everything. It has no code of its own.
package deptest
