package opstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pinmarket/pin/platform/testbed"
)

// supportedScrapeIntervals are the Prometheus scrape intervals, in seconds,
// docs/ops/README.md promises the expiry alerts hold at.
var supportedScrapeIntervals = []int{5, 10, 15, 30, 60}

// expireIntervals are PIN_EXPIRE_INTERVAL values in seconds: the bounds of
// its range, and 90 s, which no scrape interval above 30 s divides.
var expireIntervals = []int{60, 90, 300}

// ruleEvalStep is how often, in seconds, promtool evaluates the rules here
// (a common evaluation interval; an alert is late by at most one of them).
const ruleEvalStep = 15

// stopAfter is when a stopped job starts its last cycle: after three
// intervals and a minute, and past the no-runs rule's 15 min window for the
// 5 min interval, so that its fallback is tried too.
func stopAfter(interval int) int { return 3*interval + 60 }

// runEnd is when the checks are made: late enough for a stopped job to fire
// (two intervals, two scrapes and an evaluation after its last cycle, which
// may take 6 s) and, at a 5 min interval, for the errors alert's 15 min.
func runEnd(scrape, interval int) int {
	return stopAfter(interval) + 6 + 2*interval + 2*scrape + ruleEvalStep + 60
}

// TestExpireAlertsAtEveryScrapeInterval runs promtool over a simulated
// expiry job at each supported scrape interval and every phase of the
// job's cycles against the scrapes (1 s apart), with cycles taking 0 to 6 s.
// A healthy job never fires PromotionExpireJobNoRuns or
// PromotionExpireJobNotRunning; a stopped one fires both, never before two
// intervals after its last cycle and at most two scrapes and one
// evaluation later; a job whose every cycle fails fires
// PromotionExpireErrors.
func TestExpireAlertsAtEveryScrapeInterval(t *testing.T) {
	t.Parallel()
	promtool := testbed.Tool(t, "promtool", "Debian: apt-get install -y prometheus")
	rules, err := filepath.Abs(alertsPath)
	require.NoError(t, err)
	for _, scrape := range supportedScrapeIntervals {
		for _, interval := range expireIntervals {
			t.Run(fmt.Sprintf("scrape=%ds/interval=%ds", scrape, interval), func(t *testing.T) {
				t.Parallel()
				file := filepath.Join(t.TempDir(), "alerts.test.yml")
				data, err := yaml.Marshal(scrapeTestFile(rules, scrape, interval))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(file, data, 0o600))
				out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput()
				require.NoError(t, err, "promtool test rules:\n%s", out)
			})
		}
	}
}

// promtoolTests is the layout of a `promtool test rules` file, the parts
// used here.
type promtoolTests struct {
	RuleFiles          []string        `yaml:"rule_files"`
	EvaluationInterval string          `yaml:"evaluation_interval"`
	Tests              []promtoolGroup `yaml:"tests"`
}

type promtoolGroup struct {
	Interval    string          `yaml:"interval"`
	InputSeries []promtoolInput `yaml:"input_series"`
	ExprTests   []promtoolExpr  `yaml:"promql_expr_test"`
}

type promtoolInput struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type promtoolExpr struct {
	Expr       string           `yaml:"expr"`
	EvalTime   string           `yaml:"eval_time"`
	ExpSamples []promtoolSample `yaml:"exp_samples"`
}

type promtoolSample struct {
	Labels string  `yaml:"labels"`
	Value  float64 `yaml:"value"`
}

// simulatedJob is one instance of the expiry runner, scraped every scrape
// seconds from scrapePhase on, from 0 to end. It starts its cycles at
// cycleOffset (one at once, then one a tick) and, when stopped, starts none
// after stopAfter.
type simulatedJob struct {
	scrape, scrapePhase, cycleOffset, interval, end int
	stopped                                         bool
}

// cycleEnds lists when each cycle completes (and the run counter grows):
// its tick plus a duration of 0 to 6 s that varies from cycle to cycle.
func (j simulatedJob) cycleEnds() []int {
	var ends []int
	for k := 0; ; k++ {
		tick := j.cycleOffset + k*j.interval
		done := tick + (k*5+j.cycleOffset*3)%7
		if done > j.end || (j.stopped && tick > stopAfter(j.interval)) {
			return ends
		}
		ends = append(ends, done)
	}
}

// series renders one metric as promtool values at a 1 s input interval:
// a sample at each scrape, value(t) for the scrape at t, nothing between.
func (j simulatedJob) series(value func(at int) int) string {
	var b strings.Builder
	last := -1
	for at := j.scrapePhase; at <= j.end; at += j.scrape {
		if gap := at - last - 1; gap > 0 {
			fmt.Fprintf(&b, "_x%d ", gap)
		}
		b.WriteString(strconv.Itoa(value(at)) + " ")
		last = at
	}
	return strings.TrimSpace(b.String())
}

// inputs are the job's metrics as the scrapes see them; a stopped job also
// exports when its last cycle ended, for the checks.
func (j simulatedJob) inputs(labels string) []promtoolInput {
	ends := j.cycleEnds()
	runs := func(at int) int { return endedBy(ends, at) }
	lastCompleted := func(at int) int {
		if n := runs(at); n > 0 {
			return ends[n-1]
		}
		return 0 // the runner's start
	}
	in := []promtoolInput{
		{Series: "promotion_expire_interval_seconds" + labels, Values: j.series(func(int) int { return j.interval })},
		{Series: "promotion_expire_run_total" + labels, Values: j.series(runs)},
		{Series: "promotion_expire_last_completed_timestamp_seconds" + labels, Values: j.series(lastCompleted)},
	}
	if j.stopped {
		in = append(in, promtoolInput{Series: "simulated_last_cycle_end_seconds" + labels,
			Values: j.series(func(int) int { return ends[len(ends)-1] })})
	}
	return in
}

// failingInputs are the metrics of a job whose every cycle fails: its
// error counter grows with each (the errors alert reads nothing else).
func (j simulatedJob) failingInputs(labels string) []promtoolInput {
	ends := j.cycleEnds()
	return []promtoolInput{{Series: "promotion_expire_errors_total" + labels,
		Values: j.series(func(at int) int { return endedBy(ends, at) })}}
}

// endedBy counts the cycles ended at or before at: the run counter a scrape
// at that time reads.
func endedBy(ends []int, at int) int {
	n := 0
	for n < len(ends) && ends[n] <= at {
		n++
	}
	return n
}

// phasesPerGroup keeps each promtool group under the sample limit of
// promtool's query engine (the no-runs subquery holds 180 steps a series).
const phasesPerGroup = 5

// scrapeTestFile has, for every phase, a healthy and a stopped job, each its
// own instance, and at the longest interval a failing one (its own job, as
// the errors alert sums over instances). The phase is the offset of the
// job's cycles against its scrapes, every second of the scrape interval;
// the scrapes' own offset against the rules' 5 s steps goes round with it.
func scrapeTestFile(rules string, scrape, interval int) promtoolTests {
	file := promtoolTests{RuleFiles: []string{rules}, EvaluationInterval: strconv.Itoa(ruleEvalStep) + "s"}
	failing := interval == slices.Max(expireIntervals)
	for first := 0; first < scrape; first += phasesPerGroup {
		phases := min(phasesPerGroup, scrape-first)
		group := promtoolGroup{Interval: "1s"}
		for offset := first; offset < first+phases; offset++ {
			job := simulatedJob{scrape: scrape, scrapePhase: offset % 5, cycleOffset: offset%5 + offset,
				interval: interval, end: runEnd(scrape, interval)}
			name := fmt.Sprintf("p%d-o%d", job.scrapePhase, offset)
			group.InputSeries = append(group.InputSeries, job.inputs(`{job="pin",instance="healthy-`+name+`"}`)...)
			if failing {
				group.InputSeries = append(group.InputSeries, job.failingInputs(`{job="failing-`+name+`",instance="failing"}`)...)
			}
			job.stopped = true
			group.InputSeries = append(group.InputSeries, job.inputs(`{job="pin",instance="stopped-`+name+`"}`)...)
		}
		group.ExprTests = scrapeChecks(scrape, interval, phases, failing)
		file.Tests = append(file.Tests, group)
	}
	return file
}

// scrapeChecks are the expectations of one group of phases, all read from
// the ALERTS series promtool records as it evaluates the rules.
func scrapeChecks(scrape, interval, phases int, failing bool) []promtoolExpr {
	end := runEnd(scrape, interval)
	at := strconv.Itoa(end) + "s"
	whole := strconv.Itoa(end+1) + "s"
	var checks []promtoolExpr
	for _, alert := range []string{"PromotionExpireJobNoRuns", "PromotionExpireJobNotRunning"} {
		firing := `ALERTS{alertname="` + alert + `",alertstate="firing",job="pin"`
		sinceLastCycle := `min_over_time(timestamp(` + firing + `,instance=~"stopped-.*"})[` + whole + `:1s])` +
			` - on (instance) simulated_last_cycle_end_seconds`
		checks = append(checks,
			// A healthy job never fires.
			promtoolExpr{Expr: `count_over_time(` + firing + `,instance=~"healthy-.*"}[` + whole + `])`, EvalTime: at},
			// A stopped one fires, in every phase, and is still firing at the end...
			promtoolExpr{Expr: `count(` + firing + `,instance=~"stopped-.*"})`, EvalTime: at,
				ExpSamples: []promtoolSample{{Labels: "{}", Value: float64(phases)}}},
			// ...not before two intervals have passed since its last cycle...
			promtoolExpr{Expr: sinceLastCycle + ` <= ` + strconv.Itoa(2*interval), EvalTime: at},
			// ...and at most two scrapes and one evaluation after that.
			promtoolExpr{Expr: sinceLastCycle + ` > ` + strconv.Itoa(2*interval+2*scrape+ruleEvalStep), EvalTime: at},
		)
	}
	if failing {
		checks = append(checks, promtoolExpr{
			Expr:     `count(ALERTS{alertname="PromotionExpireErrors",alertstate="firing",job=~"failing-.*"})`,
			EvalTime: at, ExpSamples: []promtoolSample{{Labels: "{}", Value: float64(phases)}},
		})
	}
	return checks
}
