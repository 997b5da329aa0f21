module github.com/ftlaunch/ftlaunch

go 1.26.0

require (
	github.com/kevinburke/ssh_config v1.6.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
