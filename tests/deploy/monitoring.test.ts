// deploy/monitoring with the real Prometheus tools: the PrometheusRule's rules pass `promtool check rules` and
// the unit tests in tests/deploy/monitoring/alerts.test.yaml (each alert firing and silent); every dashboard
// expression parses; every metric the alerts and the dashboard name is one plugpool's registry exports or one
// of the cluster-autoscaler metrics listed in tests/deploy/monitoring/cluster-autoscaler-metrics.txt, and that
// list matches cluster-autoscaler's own source where it ships; the PodMonitor selects the example pod.
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { parse, parseAllDocuments } from "yaml";
import type { V1Deployment } from "@kubernetes/client-node";
import { createMetrics } from "../../src/app/metrics.ts";
import { autoscalerArchive } from "../harness/autoscaler/autoscaler.ts";
import { metricNames, promtool, ruleGroupsOf, writeRuleFile, type RuleGroup } from "../harness/prometheus/index.ts";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");
const monitoring = join(root, "deploy", "monitoring");
const fixtures = join(import.meta.dirname, "monitoring");
const read = (path: string) => readFileSync(path, "utf8");

const ruleGroups = ruleGroupsOf(read(join(monitoring, "prometheusrule.yaml")));
const alertRules = ruleGroups.flatMap((g) => g.rules).filter((r) => typeof r.alert === "string");

interface Target {
  readonly expr?: string;
  readonly refId?: string;
}
interface Panel {
  readonly id: number;
  readonly title: string;
  readonly type: string;
  readonly targets?: Target[];
  readonly panels?: Panel[];
}
interface Dashboard {
  readonly uid: string;
  readonly panels: Panel[];
  readonly templating: { list: { name: string; query?: string | { query?: string } }[] };
}
const dashboardMap = parse(read(join(monitoring, "grafana-dashboard.yaml"))) as {
  kind: string;
  metadata: { labels?: Record<string, string> };
  data: Record<string, string>;
};
const dashboardJson = Object.values(dashboardMap.data)[0] ?? "";
const dashboard = JSON.parse(dashboardJson) as Dashboard;
const panelsOf = (panels: readonly Panel[]): Panel[] => panels.flatMap((p) => [p, ...panelsOf(p.panels ?? [])]);
const queries = panelsOf(dashboard.panels).flatMap((p) =>
  (p.targets ?? []).map((t) => ({ where: `panel ${p.id} "${p.title}" ${t.refId ?? ""}`, expr: t.expr ?? "" })),
);

/** Grafana's variables as Prometheus would see them after Grafana's substitution. */
function substituteGrafanaVariables(expr: string): string {
  return expr
    .replaceAll("$__rate_interval", "5m")
    .replaceAll("$__interval", "1m")
    .replaceAll("$__range", "1d")
    .replace(/\$\{?(\w+)\}?/g, ".*");
}

/** The metric names in `label_values(metric, label)` variable queries. */
const variableMetrics = dashboard.templating.list.flatMap((v) => {
  const query = typeof v.query === "string" ? v.query : (v.query?.query ?? "");
  const m = /^label_values\(\s*([a-zA-Z_:][\w:]*)\s*,/.exec(query);
  return m?.[1] === undefined ? [] : [{ where: `variable ${v.name}`, name: m[1] }];
});

/**
 * Every series name plugpool exports: each `# TYPE` line of its registry's exposition (what /metrics serves,
 * families without samples included), a histogram as its _bucket/_sum/_count series.
 */
async function plugpoolSeriesNames(): Promise<Set<string>> {
  const exposition = await createMetrics().registry.metrics();
  return new Set([...exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)].flatMap(([, name = "", type]) => {
    if (type === "histogram") return [`${name}_bucket`, `${name}_sum`, `${name}_count`];
    if (type === "summary") return [name, `${name}_sum`, `${name}_count`];
    return [name];
  }));
}

const caListed = read(join(fixtures, "cluster-autoscaler-metrics.txt"))
  .split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));

describe("deploy/monitoring with promtool", () => {
  const dir = mkdtempSync(join(tmpdir(), "plugpool-monitoring-"));
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("the PrometheusRule's rules pass promtool check rules", async () => {
    const file = join(dir, "rules.yaml");
    writeRuleFile(file, ruleGroups);
    const { code, output } = await promtool(["check", "rules", file], dir);
    assert.equal(code, 0, output);
    assert.match(output, new RegExp(`SUCCESS: ${alertRules.length} rules found`));
  });

  it("every alert fires on its series and stays silent on healthy ones (promtool test rules)", async () => {
    // promtool compares every annotation; the long descriptions are left out (their templates are parsed by
    // check rules above), the summaries, which carry the labels and values, are compared.
    const withoutDescriptions: RuleGroup[] = ruleGroups.map((g) => ({
      ...g,
      rules: g.rules.map((r) => {
        const annotations = { ...(r.annotations ?? {}) } as Record<string, string>;
        delete annotations.description;
        return { ...r, annotations };
      }),
    }));
    writeRuleFile(join(dir, "plugpool-rules.yaml"), withoutDescriptions);
    const testText = read(join(fixtures, "alerts.test.yaml"));
    writeFileSync(join(dir, "alerts.test.yaml"), testText);
    const { code, output } = await promtool(["test", "rules", "alerts.test.yaml"], dir);
    assert.equal(code, 0, output);
    assert.match(output, /SUCCESS/);

    // Each alert of the rule file has a case where it fires and one where it is expected silent.
    const cases = (parse(testText) as { tests: { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[] }).tests
      .flatMap((t) => t.alert_rule_test ?? []);
    for (const rule of alertRules) {
      const mine = cases.filter((c) => c.alertname === rule.alert);
      assert.ok(mine.some((c) => (c.exp_alerts ?? []).length > 0), `a case where ${String(rule.alert)} fires`);
      assert.ok(mine.some((c) => (c.exp_alerts ?? []).length === 0), `a case where ${String(rule.alert)} is silent`);
    }
  });

  it("every dashboard expression parses (as a recording rule, promtool check rules)", async () => {
    assert.ok(queries.length >= 20, `the dashboard has its queries (${queries.length})`);
    const rules = queries.map((q, i) => ({ record: `dashboard:query_${i}`, expr: substituteGrafanaVariables(q.expr) }));
    const file = join(dir, "dashboard-rules.yaml");
    writeRuleFile(file, [{ name: "dashboard", rules }]);
    const { code, output } = await promtool(["check", "rules", file], dir);
    assert.equal(code, 0, `${output}\n${queries.map((q, i) => `query_${i}: ${q.where}`).join("\n")}`);
  });
});

describe("deploy/monitoring names only metrics that exist", () => {
  it("finds the metric names of an expression, and only those", () => {
    assert.deepEqual(
      metricNames('sum by (machine, le) (rate(a_total{result!="ok",x=~"y|z"}[5m])) / on(machine) group_left b offset 30m > bool 0.25'),
      ["a_total", "b"],
    );
    assert.deepEqual(metricNames("absent(up) or histogram_quantile(0.9, sum without (pod) (rate(c_bucket[1h])))"), ["c_bucket", "up"]);
    assert.deepEqual(metricNames('count({__name__="d", job="x"}) unless max(e) * 1e3'), ["d", "e"]);
  });

  it("every metric in the alerts and the dashboard is exported by plugpool or listed as cluster-autoscaler's", async () => {
    const exported = await plugpoolSeriesNames();
    const uses = [
      ...alertRules.map((r) => ({ where: `alert ${String(r.alert)}`, expr: String(r.expr) })),
      ...queries.map((q) => ({ where: q.where, expr: substituteGrafanaVariables(q.expr) })),
    ].flatMap(({ where, expr }) => metricNames(expr).map((name) => ({ where, name })));
    const all = [...uses, ...variableMetrics];
    assert.ok(all.some((u) => u.name.startsWith("plugpool_")) && all.some((u) => u.name.startsWith("cluster_autoscaler_")));
    const unknown = all.filter(({ name }) => !exported.has(name) && !caListed.includes(name));
    assert.deepEqual(unknown, [], "metrics neither plugpool exports nor listed in cluster-autoscaler-metrics.txt");
    // The list holds only what is used.
    assert.deepEqual(caListed.filter((name) => !all.some((u) => u.name === name)), [], "listed but unused");
  });

  it("every label a query matches or groups plugpool's metrics by is one they carry", () => {
    // Labels of each family, as declared in the registry; le for buckets; those the PodMonitor's target adds.
    const declared = new Map(createMetrics().registry.getMetricsAsArray().map((m) =>
      [m.name, (m as unknown as { labelNames?: readonly string[] }).labelNames ?? []]));
    const targetLabels = ["job", "instance", "namespace", "pod", "container", "endpoint"];
    const labelsOf = (series: string): readonly string[] | undefined => {
      const family = declared.has(series) ? series : series.replace(/_(bucket|sum|count)$/, "");
      const labels = declared.get(family);
      return labels && [...labels, ...targetLabels, ...(series.endsWith("_bucket") ? ["le"] : [])];
    };
    const exprs = [
      ...alertRules.map((r) => ({ where: `alert ${String(r.alert)}`, expr: String(r.expr) })),
      ...queries.map((q) => ({ where: q.where, expr: q.expr })),
    ];
    const wrong: string[] = [];
    for (const { where, expr } of exprs) {
      for (const [, name = "", matchers = ""] of expr.matchAll(/([a-zA-Z_:][\w:]*)\{([^}]*)\}/g)) {
        const allowed = labelsOf(name);
        for (const [, label = ""] of matchers.matchAll(/(\w+)\s*(?:=~|!~|!=|=)/g)) {
          if (allowed && !allowed.includes(label)) wrong.push(`${where}: ${name} has no label ${label}`);
        }
      }
      // Grouping labels, where the expression reads a single plugpool metric.
      const plugpool = metricNames(substituteGrafanaVariables(expr)).filter((n) => n.startsWith("plugpool_"));
      const allowed = plugpool.length === 1 && metricNames(substituteGrafanaVariables(expr)).length === 1 ? labelsOf(plugpool[0] ?? "") : undefined;
      for (const [, list = ""] of expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)) {
        for (const label of list.split(",").map((l) => l.trim()).filter((l) => l !== "")) {
          if (allowed && !allowed.includes(label)) wrong.push(`${where}: ${plugpool[0] ?? ""} has no label ${label}`);
        }
      }
    }
    assert.ok(exprs.length > 30);
    assert.deepEqual(wrong, []);
  });

  it("the cluster-autoscaler metrics listed are registered by cluster-autoscaler's source", { skip: autoscalerArchive() === undefined && "no cluster-autoscaler source archive here" }, async () => {
    const archive = autoscalerArchive() ?? "";
    const dir = mkdtempSync(join(tmpdir(), "plugpool-ca-metrics-"));
    try {
      await run("tar", ["-xzf", archive, "-C", dir, "--wildcards", "*/cluster-autoscaler/metrics/metrics.go"]);
      const { stdout } = await run("find", [dir, "-path", "*/cluster-autoscaler/metrics/metrics.go"]);
      const source = read(stdout.trim().split("\n")[0] ?? "");
      assert.match(source, /caNamespace\s*=\s*"cluster_autoscaler"/);
      // Each metric is declared with `Namespace: caNamespace, Name: "…"`.
      const declared = new Set([...source.matchAll(/Namespace:\s*caNamespace,\s*Name:\s*"(\w+)"/g)].map((m) => `cluster_autoscaler_${m[1] ?? ""}`));
      assert.ok(declared.size > 30, `metrics found in metrics.go: ${declared.size}`);
      assert.deepEqual(caListed.filter((name) => !declared.has(name)), []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("deploy/monitoring manifests", () => {
  const kustomization = parse(read(join(monitoring, "kustomization.yaml"))) as { resources: string[] };
  const objects = kustomization.resources.flatMap((file) =>
    parseAllDocuments(read(join(monitoring, file))).map((d) => d.toJS() as { kind: string; metadata: { name: string } }),
  );

  it("the kustomization holds the PodMonitor, the PrometheusRule and the dashboard", () => {
    assert.deepEqual(objects.map((o) => o.kind).sort(), ["ConfigMap", "PodMonitor", "PrometheusRule"]);
  });

  it("the PodMonitor selects the example pod and scrapes plugpool's and cluster-autoscaler's named ports", () => {
    const podMonitor = parse(read(join(monitoring, "podmonitor.yaml"))) as {
      metadata: { namespace: string };
      spec: { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port: string; path: string }[] };
    };
    const deployment = parseAllDocuments(read(join(root, "deploy", "examples", "deployment.yaml")))
      .map((d) => d.toJS() as V1Deployment).find((o) => o.kind === "Deployment");
    const template = deployment?.spec?.template;
    assert.equal(podMonitor.metadata.namespace, deployment?.metadata?.namespace);
    for (const [key, value] of Object.entries(podMonitor.spec.selector.matchLabels)) {
      assert.equal(template?.metadata?.labels?.[key], value, `pod label ${key}`);
    }
    const ports = new Map((template?.spec?.containers ?? []).flatMap((c) => (c.ports ?? []).map((p) => [p.name, c.name])));
    assert.deepEqual(podMonitor.spec.podMetricsEndpoints.map((e) => [ports.get(e.port), e.path]), [
      ["plugpool", "/metrics"],
      ["cluster-autoscaler", "/metrics"],
    ]);
    // The backoff alert and panel read a per-group metric cluster-autoscaler emits only when asked.
    const ca = template?.spec?.containers.find((c) => c.name === "cluster-autoscaler");
    assert.ok(ca?.args?.includes("--emit-per-nodegroup-metrics=true"));
  });

  it("the dashboard is a ConfigMap Grafana's sidecar loads, with one valid dashboard", () => {
    assert.equal(dashboardMap.kind, "ConfigMap");
    assert.equal(dashboardMap.metadata.labels?.grafana_dashboard, "1");
    assert.equal(Object.keys(dashboardMap.data).length, 1);
    assert.equal(dashboard.uid, "plugpool");
    const ids = panelsOf(dashboard.panels).map((p) => p.id);
    assert.equal(new Set(ids).size, ids.length, "panel ids are unique");
  });
});
