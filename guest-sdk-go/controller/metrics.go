package controller

// Metrics updates the metrics declared with Registration.Counter, .Gauge and
// .Histogram: one label value per declared label, in order. An update the host
// refuses (an undeclared name, a wrong number of labels, past the plugin's series
// bound) returns an Invalid error naming the cause.
var Metrics metrics

type metrics struct{}

// The contract's metric operations.
const (
	metricAdd uint8 = iota
	metricSet
	metricObserve
)

// Add adds value to a counter (at least 0) or a gauge.
func (metrics) Add(name string, value float64, labels ...string) error {
	return updateMetric(metricAdd, name, labels, value)
}

// Inc adds 1 to a counter.
func (metrics) Inc(name string, labels ...string) error {
	return updateMetric(metricAdd, name, labels, 1)
}

// Set sets a gauge.
func (metrics) Set(name string, value float64, labels ...string) error {
	return updateMetric(metricSet, name, labels, value)
}

// Observe observes one value of a histogram.
func (metrics) Observe(name string, value float64, labels ...string) error {
	return updateMetric(metricObserve, name, labels, value)
}
