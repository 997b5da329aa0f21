package main

import (
	"fmt"
	"io"
)

// planCommand is being written with the overlay/plan package.
func planCommand(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "ftlaunch plan: not built yet")
	return 2
}
