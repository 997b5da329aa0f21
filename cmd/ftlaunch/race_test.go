//go:build race

package main

// raceEnabled makes TestMain build the ftlaunch binary with the race
// detector too, so that `go test -race` checks the front-end and the agents
// that the end-to-end tests run.
const raceEnabled = true
