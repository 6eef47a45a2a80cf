//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package file

import (
	"os"
	"syscall"
)

// linkCount is the number of hard links of the file fi describes.
func linkCount(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
