// Package version holds build information stamped in by the Makefile.
package version

// Commit is the git commit kpbench was built from (set with -ldflags -X).
var Commit = "unknown"
