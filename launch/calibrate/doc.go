// Package calibrate keeps what launches over SSH measured of the
// launch-time model's parameters (docs/model.md), in the user's cache
// directory, for --tree auto and `ftlaunch plan`.
package calibrate
