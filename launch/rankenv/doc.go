// Package rankenv is what a rank starts with on its node besides its
// program: its CPU binding (--bind-to core|socket) and the limits that say
// how many ranks a node has room for (file descriptors, tasks). Pure
// functions over the machine's own files; the agent calls them.
package rankenv
