// Package architecture holds no code: its test checks the dependency rules
// between Wharf's packages that docs/architecture.md describes (which core
// may import which, what a front end may reach), from the import graph
// `go list` reports.
package architecture
