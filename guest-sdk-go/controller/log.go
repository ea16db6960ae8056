//go:build wasip1

package controller

import "fmt"

//go:wasmimport wcm:controller/log@0.2.0 log
func hostLog(level, ptr, n uint32)

func logAt(level uint32, format string, args ...any) {
	p, n := flatString(fmt.Sprintf(format, args...))
	hostLog(level, p, n)
}

// Debugf logs at debug level, in the host's log with the plugin's name and key.
func Debugf(format string, args ...any) { logAt(1, format, args...) }

// Infof logs at info level.
func Infof(format string, args ...any) { logAt(2, format, args...) }

// Warnf logs at warn level.
func Warnf(format string, args ...any) { logAt(3, format, args...) }

// Errorf logs at error level.
func Errorf(format string, args ...any) { logAt(4, format, args...) }
