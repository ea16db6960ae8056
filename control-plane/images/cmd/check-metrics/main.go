// Command check-metrics parses a Prometheus exposition from stdin with the Prometheus
// project's own text parser (github.com/prometheus/common/expfmt) and prints one line
// per sample: its name and labels, sorted. It fails, naming the line, when the text
// does not parse or when one metric family is described twice (two HELP or TYPE lines
// for one name, which a scraper rejects). The host's tests feed it /metrics.
//
//	curl -s host:8080/metrics | check-metrics
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "check-metrics:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	text, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	if err := describedOnce(text); err != nil {
		return err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return err
	}
	var lines []string
	for name, family := range families {
		for _, m := range family.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			lines = append(lines, name+"{"+strings.Join(labels, ",")+"}")
		}
	}
	sort.Strings(lines)
	for _, line := range lines {
		fmt.Fprintln(out, line)
	}
	return nil
}

// describedOnce fails on a second HELP or TYPE line for one metric name.
func describedOnce(text []byte) error {
	seen := map[string]int{}
	scanner := bufio.NewScanner(bytes.NewReader(text))
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; scanner.Scan(); n++ {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 3 || fields[0] != "#" || (fields[1] != "HELP" && fields[1] != "TYPE") {
			continue
		}
		key := fields[1] + " " + fields[2]
		if first, ok := seen[key]; ok {
			return fmt.Errorf("line %d: a second %s line for %s (the first is line %d)", n, fields[1], fields[2], first)
		}
		seen[key] = n
	}
	return scanner.Err()
}
