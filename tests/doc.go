// Package tests holds Lemo's end-to-end tests: they build the real lemo
// binary, run it as a separate process on temporary data folders, and check
// it from the outside (exit codes, messages, files on disk, and, through
// the remote API, Tasks and their histories).
package tests
