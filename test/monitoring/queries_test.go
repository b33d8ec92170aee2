package monitoring

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// The files under test, relative to this directory.
const (
	dashboardFile = "../../deploy/grafana/ingress-reactor-dashboard.json"
	alertsFile    = "../../deploy/prometheus/alerts.yaml"
	monitoringDoc = "../../docs/monitoring.md"
	// chartAlertsFile is the Helm chart's copy of alertsFile: a chart cannot read files outside
	// its folder, and its PrometheusRule installs this one.
	chartAlertsFile = "../../deploy/chart/ingress-reactor/files/alerts.yaml"
)

// requestMetricPrefix starts the names of the request metrics NGINX's traffic produces
// (ingress-nginx's names). The test names the queries that depend on them separately, so a
// failure says at once whether the request metrics or the controller's own are missing.
const requestMetricPrefix = "nginx_ingress_controller_"

// dashboardQuery is one PromQL expression of the dashboard: a panel target or a template
// variable's label_values() query.
type dashboardQuery struct {
	// Where names it in messages: the panel title and refId, or the variable.
	Where string
	// Expr is the expression as written in the dashboard, with its $variables.
	Expr string
	// Variable is set for a variable's query: the label whose values it lists.
	Variable string
}

// grafanaDashboard is the part of Grafana's dashboard JSON model this test reads.
type grafanaDashboard struct {
	Title      string         `json:"title"`
	UID        string         `json:"uid"`
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []grafanaVariable `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	ID         int                `json:"id"`
	Type       string             `json:"type"`
	Title      string             `json:"title"`
	Datasource *grafanaDatasource `json:"datasource"`
	Targets    []struct {
		RefID      string             `json:"refId"`
		Expr       string             `json:"expr"`
		Datasource *grafanaDatasource `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's panels
}

type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaVariable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	AllValue   string          `json:"allValue"`
}

// loadDashboard reads the dashboard and returns it with every query in it.
func loadDashboard(t *testing.T) (grafanaDashboard, []dashboardQuery) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var qs []dashboardQuery
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValuesRE.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(selector, label)", v.Name, v.Definition)
		}
		qs = append(qs, dashboardQuery{Where: "variable $" + v.Name, Expr: m[1], Variable: m[2]})
	}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				qs = append(qs, dashboardQuery{Where: fmt.Sprintf("panel %q query %s", p.Title, tg.RefID), Expr: tg.Expr})
			}
		}
	}
	walk(d.Panels)
	return d, qs
}

// labelValuesRE matches Grafana's label_values(selector, label) variable query.
var labelValuesRE = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// substitute replaces the dashboard's template variables the way Grafana does before it
// sends a query: vars gives each variable's value (a regex for the multi-value ones).
func substitute(expr string, vars map[string]string) string {
	return variableRE.ReplaceAllStringFunc(expr, func(v string) string {
		name := strings.Trim(v, "${}")
		if val, ok := vars[name]; ok {
			return val
		}
		return v
	})
}

// variableRE matches $name and ${name}. ${1} in a label_replace replacement is a regexp
// group, not a variable, and Grafana leaves names it does not know alone; so does substitute.
var variableRE = regexp.MustCompile(`\$\{[a-zA-Z_][a-zA-Z0-9_]*\}|\$[a-zA-Z_][a-zA-Z0-9_]*`)

// loadAlerts parses the rules file with Prometheus's own rule-file parser and validator,
// which also parses every expression and template.
func loadAlerts(t *testing.T) []rulefmt.Rule {
	t.Helper()
	groups, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.Default())
	for _, err := range errs {
		t.Errorf("%s: %v", alertsFile, err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	var rules []rulefmt.Rule
	for _, g := range groups.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// selectorNames returns the metric names an expression's selectors read, sorted.
func selectorNames(expr parser.Expr) []string {
	var names []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && !slices.Contains(names, vs.Name) {
			names = append(names, vs.Name)
		}
		return nil
	})
	slices.Sort(names)
	return names
}

// needsRequestMetrics reports whether expr reads one of the request metrics.
func needsRequestMetrics(expr parser.Expr) bool {
	return slices.ContainsFunc(selectorNames(expr), func(n string) bool { return strings.HasPrefix(n, requestMetricPrefix) })
}

// withoutThresholds returns expr with every filtering comparison against a number
// (`x > 0.05`, `0 == x`) replaced by its vector side, so the result has samples whenever
// the series the alert watches exist, whatever their values.
func withoutThresholds(expr parser.Expr) parser.Expr {
	switch e := expr.(type) {
	case *parser.BinaryExpr:
		if e.Op.IsComparisonOperator() && !e.ReturnBool {
			if isNumber(e.RHS) {
				return withoutThresholds(e.LHS)
			}
			if isNumber(e.LHS) {
				return withoutThresholds(e.RHS)
			}
		}
		c := *e
		c.LHS, c.RHS = withoutThresholds(e.LHS), withoutThresholds(e.RHS)
		return &c
	case *parser.ParenExpr:
		return &parser.ParenExpr{Expr: withoutThresholds(e.Expr), PosRange: e.PosRange}
	}
	return expr
}

// isNumber reports whether e is a constant scalar expression such as 0.05 or 14 * 24 * 3600.
func isNumber(e parser.Expr) bool {
	switch e := e.(type) {
	case *parser.NumberLiteral:
		return true
	case *parser.ParenExpr:
		return isNumber(e.Expr)
	case *parser.BinaryExpr:
		return isNumber(e.LHS) && isNumber(e.RHS)
	}
	return false
}

// TestDashboardAndAlertsAreWellFormed checks what needs no running controller: the
// dashboard's structure (every panel on the chosen data source, every variable it uses
// defined, unique panel ids and refIds), that every query, after substitution, and every
// alert (through Prometheus's rule-file validator) parses, that docs/monitoring.md
// explains every alert, and that the Helm chart carries the same rules.
func TestDashboardAndAlertsAreWellFormed(t *testing.T) {
	d, qs := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard needs a uid and a title; got uid %q title %q", d.UID, d.Title)
	}
	defined := map[string]bool{"__rate_interval": true, "__range": true, "__interval": true}
	hasDatasourceVar := false
	for _, v := range d.Templating.List {
		defined[v.Name] = true
		if v.Type == "datasource" && v.Name == "datasource" {
			hasDatasourceVar = true
		}
	}
	if !hasDatasourceVar {
		t.Error("dashboard has no datasource variable named datasource")
	}
	for _, want := range []string{"namespace", "ingress"} {
		if !defined[want] {
			t.Errorf("dashboard has no template variable %s", want)
		}
	}

	ids := map[int]string{}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if other, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: datasource %+v, want uid ${datasource}", p.Title, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if refs[tg.RefID] || tg.RefID == "" {
					t.Errorf("panel %q: refId %q empty or repeated", p.Title, tg.RefID)
				}
				refs[tg.RefID] = true
				if tg.Datasource != nil && tg.Datasource.UID != "${datasource}" {
					t.Errorf("panel %q query %s: datasource %+v, want uid ${datasource}", p.Title, tg.RefID, tg.Datasource)
				}
			}
		}
	}
	walk(d.Panels)

	vars := testVariables("some-namespace")
	p := parser.NewParser(parser.Options{})
	for _, q := range qs {
		for _, v := range variableRE.FindAllString(q.Expr, -1) {
			if name := strings.Trim(v, "${}"); !defined[name] {
				t.Errorf("%s: uses undefined variable %s", q.Where, v)
			}
		}
		if _, err := p.ParseExpr(substitute(q.Expr, vars)); err != nil {
			t.Errorf("%s: %q does not parse: %v", q.Where, q.Expr, err)
		}
	}

	rules := loadAlerts(t)
	if len(rules) == 0 {
		t.Fatal("no alerting rules")
	}
	doc, err := os.ReadFile(monitoringDoc)
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	if chartAlerts, err := os.ReadFile(chartAlertsFile); err != nil || !bytes.Equal(chartAlerts, alerts) {
		t.Errorf("%s must be a copy of %s (read error: %v)", chartAlertsFile, alertsFile, err)
	}
	for _, r := range rules {
		if r.Alert == "" {
			t.Errorf("rule %q is not an alert", r.Record)
			continue
		}
		for _, k := range []string{"summary", "description"} {
			if r.Annotations[k] == "" {
				t.Errorf("alert %s has no %s annotation", r.Alert, k)
			}
		}
		if r.For == 0 {
			t.Errorf("alert %s has no for:", r.Alert)
		}
		if r.Labels["severity"] == "" {
			t.Errorf("alert %s has no severity label", r.Alert)
		}
		if !strings.Contains(string(doc), "`"+r.Alert+"`") {
			t.Errorf("%s does not explain alert %s", monitoringDoc, r.Alert)
		}
	}
}

// testVariables are the values the tests give the dashboard's variables: the namespace
// under test, every Ingress (Grafana's "All", the variable's allValue), and the intervals
// Grafana computes for a 30 s scrape interval ($__rate_interval is at least four of them).
func testVariables(namespace string) map[string]string {
	return map[string]string{
		"namespace":       namespace,
		"ingress":         ".*",
		"__rate_interval": "2m",
		"__range":         "1h",
		"__interval":      "30s",
	}
}

// TestWithoutThresholds: the alert check removes comparisons against numbers and keeps
// everything else, so "returns samples" means "the watched series exist".
func TestWithoutThresholds(t *testing.T) {
	for in, want := range map[string]string{
		`x > 0`:                                  `x`,
		`0 == x`:                                 `x`,
		`sum by (a) (rate(x[5m])) > 0`:           `sum by (a) (rate(x[5m]))`,
		`x - time() < 14 * 24 * 3600`:            `x - time()`,
		`(a / b) > 0.05 and c > 0.1`:             `(a / b) and c`,
		`min by (i) (up) == (0)`:                 `min by (i) (up)`,
		`x > bool 1`:                             `x > bool 1`,
		`a > b`:                                  `a > b`,
		`max(a) > 0 or max(nginx_ingress_x) > 1`: `max(a) or max(nginx_ingress_x)`,
	} {
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(in)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := withoutThresholds(expr).String(); got != want {
			t.Errorf("withoutThresholds(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestNeedsRequestMetrics: queries are told apart by the metrics their selectors read.
func TestNeedsRequestMetrics(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	for in, want := range map[string]bool{
		`sum(rate(nginx_ingress_controller_requests{status=~"5.."}[5m])) / sum(rate(ingress_reactor_renders_total[5m]))`: true,
		`ingress_reactor_last_reload_success == 0`: false,
		`histogram_quantile(0.9, sum by (le) (rate(nginx_ingress_controller_request_duration_seconds_bucket[2m])))`: true,
	} {
		expr, err := p.ParseExpr(in)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := needsRequestMetrics(expr); got != want {
			t.Errorf("needsRequestMetrics(%s) = %v, want %v (selectors %v)", in, got, want, selectorNames(expr))
		}
	}
}
