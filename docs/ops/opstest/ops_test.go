package opstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pinmarket/pin/platform/testbed"
)

// Paths relative to this package.
const (
	repoRoot        = "../../.."
	alertsPath      = "../prometheus/promotion-alerts.yml"
	alertTestsPath  = "../prometheus/promotion-alerts.test.yml"
	dashboardPath   = "../grafana/promotion-overview.json"
	provisionPath   = "../grafana/provisioning.yml"
	exportedMetrics = "../exported-metrics.txt"
)

// promTopic is the only outbox topic of the promotion module.
const promTopic = "pin.promotion.purchase-changed.v1"

// plannedMetrics are the metric families the team plan fixes. The dashboard
// and the alerts may use nothing else, so a typo fails here even before the
// list of exported metrics exists.
var plannedMetrics = []string{
	"promotion_expire_run_total",
	"promotion_expire_cycle_duration_seconds",
	"promotion_expire_items_total",
	"promotion_expire_backlog",
	"promotion_expire_skip_locked_total",
	"promotion_expire_errors_total",
	"promotion_expire_poison_purchases",                 // the purchases the job remembers as poison
	"promotion_expire_interval_seconds",                 // for the job-not-running alert
	"promotion_expire_last_completed_timestamp_seconds", // for the job-not-running alert
	"pin_outbox_backlog_messages",
	"pin_outbox_oldest_message_age_seconds",
	"pin_outbox_published_total",
	"pin_outbox_publish_errors_total",
	"pin_outbox_dead_letters",
	"pin_outbox_held_keys",                   // purchases whose events wait behind a dead letter (ADR 0015)
	"pin_outbox_oldest_held_key_age_seconds", // for the held-key alert
	"pin_outbox_relay_active",                // one active relay per topic
	"pin_http_requests_total",
	"pin_http_request_duration_seconds",
	"pin_runner_restarts_total",
	"pin_consumer_apply_delay_seconds",
	"pin_consumer_consumed_total",
	"pin_consumer_duplicates_total",
	"pin_consumer_stale_total",
	"pin_consumer_dead_letters_total",
	"pin_consumer_database_faults_total",
	"pin_consumer_lag_records", // for the not-consuming alert (ADR 0020)
	"pin_kafka_topic_partitions",
	"pin_database_read_only_refusals_total", // for the read-only alert (ADR 0021)
}

// TestPromtool runs `promtool check rules` and the unit tests of the alerts.
func TestPromtool(t *testing.T) {
	t.Parallel()
	promtool := testbed.Tool(t, "promtool", "Debian: apt-get install -y prometheus")
	for _, args := range [][]string{
		{"check", "rules", alertsPath},
		{"test", "rules", alertTestsPath},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
		require.Contains(t, string(out), "SUCCESS")
	}
}

// alertRule is the part of a Prometheus alerting rule the tests look at.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadAlerts(tb testing.TB) []alertRule {
	tb.Helper()
	data, err := os.ReadFile(alertsPath)
	require.NoError(tb, err)
	var doc struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(tb, yaml.Unmarshal(data, &doc))
	var rules []alertRule
	for _, g := range doc.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// TestAlertRules checks the alerts the design document and the plan require
// exist, each with a severity, a summary, a description and a runbook link
// that leads to an existing heading.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	rules := loadAlerts(t)
	var names []string
	for _, r := range rules {
		names = append(names, r.Alert)
		require.Contains(t, []string{"critical", "warning"}, r.Labels["severity"], r.Alert)
		require.NotEmpty(t, r.Annotations["summary"], r.Alert)
		require.NotEmpty(t, r.Annotations["description"], r.Alert)
		requireRunbookExists(t, r.Alert, r.Annotations["runbook_url"])
		if strings.Contains(r.Expr, "pin_outbox_") {
			require.Contains(t, r.Expr, `topic="`+promTopic+`"`, "%s: outbox alerts are about the promotion topic only", r.Alert)
		}
	}
	require.ElementsMatch(t, []string{
		"PromotionExpireJobNotRunning", "PromotionExpireJobNoRuns", "PromotionExpireBacklogHigh", "PromotionExpireErrors",
		"PromotionExpirePoisonPurchases",
		"PromotionOutboxBacklogHigh", "PromotionOutboxDeadLetters", "PromotionOutboxKeyHeld", "PromotionOutboxLagGrowing",
		"PromotionConsumerDelayHigh", "PromotionConsumerDeadLetters", "PromotionConsumerDatabaseFaults",
		"PromotionConsumerNotConsuming",
		"PromotionKafkaTopicMisconfigured",
		"PromotionOutboxNoActiveRelay",
		"PromotionDatabaseReadOnly",
	}, names)
	for _, r := range rules {
		if r.Alert == "PromotionExpireJobNoRuns" {
			require.Contains(t, r.Expr, "promotion_expire_run_total", "the design document's alert: no increase of the run counter")
			require.Contains(t, r.Expr, "2 * promotion_expire_interval_seconds", "for more than two intervals")
		}
	}
}

// requireRunbookExists resolves a repo-relative runbook link (path#anchor)
// to a Markdown file and one of its headings.
func requireRunbookExists(tb testing.TB, alert, link string) {
	tb.Helper()
	path, anchor, ok := strings.Cut(link, "#")
	require.True(tb, ok && strings.HasPrefix(path, "docs/runbooks/"), "%s: runbook_url %q is not docs/runbooks/<file>#<heading>", alert, link)
	data, err := os.ReadFile(filepath.Join(repoRoot, path))
	require.NoError(tb, err, "%s: runbook file", alert)
	require.Contains(tb, headingAnchors(string(data)), anchor, "%s: no heading for #%s in %s", alert, anchor, path)
}

// headingAnchors returns the anchors GitHub generates for the Markdown
// headings of doc: lower case, punctuation dropped, spaces to hyphens.
func headingAnchors(doc string) []string {
	var anchors []string
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for line := range strings.Lines(doc) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		text = drop.ReplaceAllString(strings.ToLower(text), "")
		anchors = append(anchors, strings.ReplaceAll(text, " ", "-"))
	}
	return anchors
}

func TestHeadingAnchors(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"worker-stuck-or-backlog-growing", "dead-letters-outboxdead_letters", "step-2"},
		headingAnchors("# Worker stuck or backlog growing\ntext # not a heading\n### Dead letters (`outbox.dead_letters`)\n## Step 2:\n"))
}

// dashboard is the part of a Grafana dashboard the tests look at.
type dashboard struct {
	UID        string          `json:"uid"`
	Title      string          `json:"title"`
	Tags       []string        `json:"tags"`
	Inputs     json.RawMessage `json:"__inputs"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

func loadDashboard(tb testing.TB) dashboard {
	tb.Helper()
	data, err := os.ReadFile(dashboardPath)
	require.NoError(tb, err)
	var d dashboard
	require.NoError(tb, json.Unmarshal(data, &d))
	return d
}

// TestDashboard checks what file provisioning and the design document need:
// uid promotion-overview, no __inputs (the data source is a variable), the
// three rows, every panel querying through the data source variable.
func TestDashboard(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	require.Equal(t, "promotion-overview", d.UID)
	require.Equal(t, "Pin promotion overview", d.Title)
	require.NotEmpty(t, d.Tags)
	require.Nil(t, d.Inputs, "__inputs is for UI import; provisioning needs a self-contained dashboard")
	require.Len(t, d.Templating.List, 1)
	require.Equal(t, "datasource", d.Templating.List[0].Name)
	require.Equal(t, "datasource", d.Templating.List[0].Type)
	require.Equal(t, "prometheus", d.Templating.List[0].Query)

	var rows []string
	ids := map[int]bool{}
	rowPanels := map[string][]string{}
	current := ""
	for _, p := range d.Panels {
		require.False(t, ids[p.ID], "duplicate panel id %d", p.ID)
		ids[p.ID] = true
		if p.Type == "row" {
			rows = append(rows, p.Title)
			current = p.Title
			continue
		}
		rowPanels[current] = append(rowPanels[current], p.Title)
		require.NotNil(t, p.Datasource, p.Title)
		require.Equal(t, "${datasource}", p.Datasource.UID, p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, p.Title)
			require.NotEmpty(t, tg.RefID, p.Title)
		}
		require.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, p.Title)
	}
	require.Equal(t, []string{"Background jobs", "Outbox", "API", "Consumers"}, rows)
	require.Len(t, rowPanels["Background jobs"], 6)
	require.Len(t, rowPanels["Outbox"], 4)
	require.GreaterOrEqual(t, len(rowPanels["API"]), 2)
	require.Len(t, rowPanels["Consumers"], 3)

	data, err := os.ReadFile(provisionPath)
	require.NoError(t, err)
	var prov struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Folder string `yaml:"folder"`
			Type   string `yaml:"type"`
		} `yaml:"providers"`
	}
	require.NoError(t, yaml.Unmarshal(data, &prov))
	require.Equal(t, 1, prov.APIVersion)
	require.Len(t, prov.Providers, 1)
	require.Equal(t, "pin-promotion", prov.Providers[0].Folder)
	require.Equal(t, "file", prov.Providers[0].Type)
}

// usedMetrics returns, sorted and without repeats, every metric name that the
// dashboard's queries and the alert rules use.
func usedMetrics(tb testing.TB) []string {
	tb.Helper()
	var exprs []string
	for _, p := range loadDashboard(tb).Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, r := range loadAlerts(tb) {
		exprs = append(exprs, r.Expr)
	}
	var names []string
	for _, e := range exprs {
		ns, err := metricNames(e)
		require.NoError(tb, err, e)
		names = append(names, ns...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// TestMetricNamesArePlanned checks every metric the dashboard and alerts use
// against the names fixed in the plan.
func TestMetricNamesArePlanned(t *testing.T) {
	t.Parallel()
	used := usedMetrics(t)
	require.NotEmpty(t, used)
	require.Empty(t, unknownMetrics(used, plannedMetrics), "metrics outside the plan's fixed list")
}

// TestMetricNamesAreExported checks every metric the dashboard and alerts use
// against docs/ops/exported-metrics.txt: the names scraped from the /metrics
// of a running binary (one per line; family names like
// promotion_expire_cycle_duration_seconds or sample names like
// ..._bucket both work; blank lines and # comments are ignored).
func TestMetricNamesAreExported(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(exportedMetrics)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("docs/ops/exported-metrics.txt does not exist yet: it is generated by the test that scrapes the real /metrics; until then only the plan's names are checked (TestMetricNamesArePlanned)")
	}
	require.NoError(t, err)
	exported := parseMetricList(string(data))
	require.NotEmpty(t, exported, "exported-metrics.txt is empty")
	require.Empty(t, unknownMetrics(usedMetrics(t), exported), "used by dashboard or alerts but not exported by pin")
}

// parseMetricList reads one metric name per line.
func parseMetricList(s string) []string {
	var names []string
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	return names
}

// unknownMetrics returns the used names that are not exported. A histogram
// or summary sample name (_bucket, _sum, _count) counts as exported when its
// family is, and the other way round.
func unknownMetrics(used, exported []string) []string {
	known := make(map[string]bool, len(exported))
	for _, n := range exported {
		known[n] = true
		known[familyName(n)] = true
	}
	var unknown []string
	for _, n := range used {
		if !known[n] && !known[familyName(n)] {
			unknown = append(unknown, n)
		}
	}
	return unknown
}

// familyName strips the sample suffix of a histogram or summary series.
func familyName(n string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(n, suffix); ok {
			return f
		}
	}
	return n
}

// promqlWords are PromQL keywords and aggregation operators: identifiers that
// are never metric names even when no "(" follows them directly.
var promqlWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true, "inf": true, "nan": true,
}

// labelListWords are followed by a parenthesised list of label names.
var labelListWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// metricNames extracts the metric names a PromQL expression selects. It is a
// small lexer rather than a parser: strings, label matchers ({…}), ranges
// ([…]) and Grafana variables ($__rate_interval, ${x}) are blanked; then an
// identifier is a metric name unless it is a keyword or aggregation, a
// function (followed by "("), or inside a by/without/on/ignoring label list.
func metricNames(expr string) ([]string, error) {
	s, err := blankNoise(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	i := 0
	next := func(from int) byte { // first non-space byte at or after from
		for from < len(s) && (s[from] == ' ' || s[from] == '\t' || s[from] == '\n' || s[from] == '\r') {
			from++
		}
		if from < len(s) {
			return s[from]
		}
		return 0
	}
	for i < len(s) {
		c := s[i]
		switch {
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			word := s[i:j]
			i = j
			if labelListWords[strings.ToLower(word)] && next(i) == '(' {
				end := strings.IndexByte(s[i:], ')')
				if end < 0 {
					return nil, fmt.Errorf("unclosed label list after %q in %q", word, expr)
				}
				i += end + 1
				continue
			}
			if promqlWords[strings.ToLower(word)] || next(i) == '(' {
				continue
			}
			names = append(names, word)
		case c >= '0' && c <= '9' || c == '.':
			for i < len(s) && (isIdentChar(s[i]) || s[i] == '.') {
				i++ // a number or a duration, never a name
			}
		default:
			i++
		}
	}
	return names, nil
}

// blankNoise replaces strings, {…}, […] and Grafana variables with spaces.
func blankNoise(expr string) (string, error) {
	b := []byte(expr)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"', '\'', '`':
			j := i + 1
			for j < len(b) && b[j] != c {
				if b[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(b) {
				return "", fmt.Errorf("unclosed string in %q", expr)
			}
			blank(b, i, j)
			i = j
		case '{', '[':
			closing := map[byte]byte{'{': '}', '[': ']'}[c]
			j := i + 1
			for j < len(b) && b[j] != closing {
				if b[j] == '"' || b[j] == '\'' || b[j] == '`' { // a string inside a matcher
					q := b[j]
					j++
					for j < len(b) && b[j] != q {
						if b[j] == '\\' {
							j++
						}
						j++
					}
				}
				j++
			}
			if j >= len(b) {
				return "", fmt.Errorf("unclosed %c in %q", c, expr)
			}
			blank(b, i, j)
			i = j
		case '$':
			j := i + 1
			if j < len(b) && b[j] == '{' {
				for j < len(b) && b[j] != '}' {
					j++
				}
			} else {
				for j+1 < len(b) && isIdentChar(b[j+1]) {
					j++
				}
			}
			blank(b, i, min(j, len(b)-1))
			i = j
		}
	}
	return string(b), nil
}

func blank(b []byte, from, to int) {
	for k := from; k <= to; k++ {
		b[k] = ' '
	}
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// TestMetricNames pins the extractor on the shapes of query used here and a
// few more.
func TestMetricNames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		expr string
		want []string
	}{
		{`promotion_expire_backlog`, []string{"promotion_expire_backlog"}},
		{`max without (instance, pod) (promotion_expire_backlog) > 100`, []string{"promotion_expire_backlog"}},
		{`sum by (le) (rate(promotion_expire_cycle_duration_seconds_bucket[$__rate_interval]))`, []string{"promotion_expire_cycle_duration_seconds_bucket"}},
		{`histogram_quantile(0.99, sum by (le, route) (rate(pin_http_request_duration_seconds_bucket{route=~".*promotion.*"}[5m])))`,
			[]string{"pin_http_request_duration_seconds_bucket"}},
		{`increase(promotion_expire_run_total[3m]) == 0 or absent(promotion_expire_run_total)`,
			[]string{"promotion_expire_run_total", "promotion_expire_run_total"}},
		{`deriv(a_seconds{topic="x{y}"}[10m]) > 0 and b_seconds{topic="x"} > 60`, []string{"a_seconds", "b_seconds"}},
		{`sum(rate(x_total{status=~"5.."}[${__range}])) / on (job) group_left (team) sum(y_total offset 1h)`, []string{"x_total", "y_total"}},
		{`{__name__="hidden"} + 1e3 * z:recorded:rate5m`, []string{"z:recorded:rate5m"}},
		{`topk(5, w_total) unless bool v_total`, []string{"w_total", "v_total"}},
		{`count_values("le", k_total)`, []string{"k_total"}},
	}
	for _, tc := range cases {
		got, err := metricNames(tc.expr)
		require.NoError(t, err, tc.expr)
		require.Equal(t, tc.want, got, tc.expr)
	}
	for _, bad := range []string{`rate(x[5m)`, `x{a="b}`, `sum by (le x`} {
		_, err := metricNames(bad)
		require.Error(t, err, bad)
	}
}

// TestUnknownMetricsReportsPlanted proves the comparison catches a metric
// that is not exported, in a query shaped like the dashboard's.
func TestUnknownMetricsReportsPlanted(t *testing.T) {
	t.Parallel()
	exported := []string{"promotion_expire_run_total", "promotion_expire_cycle_duration_seconds", "pin_http_requests_total"}
	names, err := metricNames(`sum(rate(promotion_expire_runs_total[5m])) + histogram_quantile(0.5, sum by (le) (rate(promotion_expire_cycle_duration_seconds_bucket[5m]))) + sum(pin_http_requests_total)`)
	require.NoError(t, err)
	require.Equal(t, []string{"promotion_expire_runs_total"}, unknownMetrics(names, exported))
	require.Empty(t, unknownMetrics([]string{"promotion_expire_cycle_duration_seconds_count"}, exported))
	require.Empty(t, unknownMetrics([]string{"promotion_expire_cycle_duration_seconds"}, []string{"promotion_expire_cycle_duration_seconds_bucket"}))
	require.Equal(t, []string{"a", "b_bucket"}, parseMetricList("# scraped\na\n\n  b_bucket \n"))
}
