package controller

import "fmt"

// The contract's log levels.
const (
	levelTrace uint32 = iota
	levelDebug
	levelInfo
	levelWarn
	levelError
)

// Debugf logs at debug level, in the host's log with the plugin's name and key.
func Debugf(format string, args ...any) { writeLog(levelDebug, fmt.Sprintf(format, args...), nil) }

// Infof logs at info level.
func Infof(format string, args ...any) { writeLog(levelInfo, fmt.Sprintf(format, args...), nil) }

// Warnf logs at warn level.
func Warnf(format string, args ...any) { writeLog(levelWarn, fmt.Sprintf(format, args...), nil) }

// Errorf logs at error level.
func Errorf(format string, args ...any) { writeLog(levelError, fmt.Sprintf(format, args...), nil) }

// Debugw logs message at debug level with fields given as key-value pairs
// (`Debugw("counted", "pods", 3)`), which reach the host's log as fields.
func Debugw(message string, keysAndValues ...any) {
	writeLog(levelDebug, message, pairs(keysAndValues))
}

// Infow logs message at info level with key-value fields.
func Infow(message string, keysAndValues ...any) {
	writeLog(levelInfo, message, pairs(keysAndValues))
}

// Warnw logs message at warn level with key-value fields.
func Warnw(message string, keysAndValues ...any) {
	writeLog(levelWarn, message, pairs(keysAndValues))
}

// Errorw logs message at error level with key-value fields.
func Errorw(message string, keysAndValues ...any) {
	writeLog(levelError, message, pairs(keysAndValues))
}

// pairs are key-value arguments as strings; a key without a value gets "(missing)",
// as zap's sugared logger says.
func pairs(keysAndValues []any) [][2]string {
	out := make([][2]string, 0, (len(keysAndValues)+1)/2)
	for i := 0; i < len(keysAndValues); i += 2 {
		value := "(missing)"
		if i+1 < len(keysAndValues) {
			value = fmt.Sprint(keysAndValues[i+1])
		}
		out = append(out, [2]string{fmt.Sprint(keysAndValues[i]), value})
	}
	return out
}
