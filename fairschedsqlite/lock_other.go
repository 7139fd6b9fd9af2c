//go:build !unix

package fairschedsqlite

import "os"

// lockOwner does nothing where flock is not available: there, keeping a
// second process off the file is up to the user.
func lockOwner(path string) (*os.File, error) { return nil, nil }
