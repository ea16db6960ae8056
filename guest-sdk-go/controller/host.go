//go:build wasip1

package controller

import "unsafe"

//go:wasmimport wcm:controller/log@0.3.1 log
func hostLog(level, message, messagen, fields, fieldsn uint32)

//go:wasmimport wcm:controller/metrics@0.3.1 add
func hostMetricAdd(name, namen, labels, labelsn uint32, value float64, ret unsafe.Pointer)

//go:wasmimport wcm:controller/metrics@0.3.1 set
func hostMetricSet(name, namen, labels, labelsn uint32, value float64, ret unsafe.Pointer)

//go:wasmimport wcm:controller/metrics@0.3.1 observe
func hostMetricObserve(name, namen, labels, labelsn uint32, value float64, ret unsafe.Pointer)

//go:wasmimport wcm:controller/config@0.3.1 settings
func hostSettings(ret unsafe.Pointer)

// writeLog sends one line with its fields (a list<tuple<string, string>>).
func writeLog(level uint32, message string, fields [][2]string) {
	m, mn := flatString(message)
	f, fn := flatPairs(fields)
	hostLog(level, m, mn, f, fn)
}

// updateMetric calls the metrics import op names.
func updateMetric(op uint8, name string, labels []string, value float64) error {
	n, nn := flatString(name)
	l, ln := flatStrings(labels)
	ret := resultArea()
	call := [...]func(uint32, uint32, uint32, uint32, float64, unsafe.Pointer){
		hostMetricAdd, hostMetricSet, hostMetricObserve,
	}[op]
	call(n, nn, l, ln, value, unsafe.Pointer(&ret[0]))
	return unitResult(ret)
}

// SettingsJSON is the plugin's settings from the operator as JSON, and whether there
// are any (the host turns a YAML file into JSON).
func SettingsJSON() (string, bool) {
	// option<string>: 12 bytes, the tag at 0, the string at 4.
	ret := alloc(12, 4)
	hostSettings(unsafe.Pointer(&ret[0]))
	if ret[0] == 0 {
		return "", false
	}
	return readString(ret[4:]), true
}
