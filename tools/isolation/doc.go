// Package isolation keeps the daemon's secrets from the processes its
// tools start.
package isolation
