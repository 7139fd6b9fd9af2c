//go:build unix

package fairschedsqlite

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockOwner takes the lock that makes this process the file's one owner:
// an exclusive flock on path+"-lock", held while the returned file is
// open. The kernel releases it when the process dies, kill -9 included,
// so a restart never waits for a stale owner.
func lockOwner(path string) (*os.File, error) {
	f, err := os.OpenFile(path+"-lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fairschedsqlite: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrInUse, path)
		}
		return nil, fmt.Errorf("fairschedsqlite: locking %s-lock: %w", path, err)
	}
	return f, nil
}
