// Prometheus and promtool for the monitoring tests, built by tests/harness/prometheus/build.sh, and the two
// things the tests need to read deploy/monitoring: a PrometheusRule as a rule file, and the metric names an
// expression selects.
import { execFile } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { parse, stringify } from "yaml";
import { toolBinaryDir } from "../control-plane/index.ts";
import { startProcess, type ManagedProcess } from "../control-plane/process.ts";
import { answersOk, freePorts, waitUntilReady } from "../control-plane/readiness.ts";

const run = promisify(execFile);
const moduleDir = import.meta.dirname;

/** Where build.sh put `name`; throws, saying how to build it, when it is not there. */
export function prometheusBinary(name: "prometheus" | "promtool"): string {
  const path = join(toolBinaryDir(moduleDir), name);
  if (!existsSync(path)) {
    throw new Error(`${name} not found at ${path}: run tests/harness/prometheus/build.sh (scripts/dev.sh setup does)`);
  }
  return path;
}

export interface ToolResult {
  readonly code: number;
  readonly output: string;
}

/** Runs promtool; resolves with its exit code and its stdout and stderr together (it splits them oddly). */
export async function promtool(args: readonly string[], cwd: string): Promise<ToolResult> {
  try {
    const { stdout, stderr } = await run(prometheusBinary("promtool"), args, { cwd, timeout: 60_000 });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const { code, stdout, stderr } = error as { code?: number | string; stdout?: string; stderr?: string };
    if (typeof code !== "number") throw error;
    return { code, output: `${stdout ?? ""}${stderr ?? ""}` };
  }
}

export interface RuleGroup {
  readonly name: string;
  readonly rules: Record<string, unknown>[];
}

/** The rule groups of a PrometheusRule manifest (its spec is a Prometheus rule file). */
export function ruleGroupsOf(prometheusRuleYaml: string): RuleGroup[] {
  const manifest = parse(prometheusRuleYaml) as { kind?: string; spec?: { groups?: RuleGroup[] } };
  if (manifest.kind !== "PrometheusRule" || !Array.isArray(manifest.spec?.groups)) {
    throw new Error("not a PrometheusRule with spec.groups");
  }
  return manifest.spec.groups;
}

/** Writes rule groups as a Prometheus rule file. */
export function writeRuleFile(path: string, groups: readonly RuleGroup[]): void {
  writeFileSync(path, stringify({ groups }));
}

// Words of PromQL that are not metric names: aggregations, keywords and the @ modifier's functions.
const keywords = new Set([
  "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile",
  "limitk", "limit_ratio", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and",
  "or", "unless", "atan2", "start", "end", "inf", "nan",
]);

/**
 * The metric names an expression selects (`name`, `name{…}`, `name[5m]`, `{__name__="name"}`). Strings, label
 * matchers and grouping label lists are taken out first; what then stands as a word not followed by `(` and
 * not a keyword is a metric name. Grafana variables must be replaced before.
 */
export function metricNames(expr: string): string[] {
  const names = new Set<string>();
  for (const m of expr.matchAll(/__name__\s*=\s*"([^"]+)"/g)) names.add(m[1] ?? "");
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, "{}")
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ");
  for (const m of bare.matchAll(/(?<![\w:.$])[a-zA-Z_:][\w:]*(?![\w:])(?!\s*\()/g)) {
    if (!keywords.has(m[0].toLowerCase())) names.add(m[0]);
  }
  return [...names].sort();
}

export interface PrometheusAlert {
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  readonly state: "pending" | "firing";
}

export interface PrometheusRuleStatus {
  readonly name: string;
  readonly health: string;
  readonly lastError?: string;
}

export interface RunningPrometheus {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  readonly process: ManagedProcess;
  /** The `data` of a successful answer of the HTTP API at `path` (/api/v1/...); throws on any other. */
  api<T>(path: string): Promise<T>;
  /** Pending and firing alerts (/api/v1/alerts). */
  alerts(): Promise<PrometheusAlert[]>;
  /** Every loaded rule with its health (/api/v1/rules). */
  rules(): Promise<PrometheusRuleStatus[]>;
  stop(): Promise<void>;
}

export interface ScrapeTarget {
  readonly job: string;
  /** host:port; scraped at /metrics. */
  readonly address: string;
  /** Target labels, as the PodMonitor's service discovery would add (namespace, pod). */
  readonly labels?: Readonly<Record<string, string>>;
}

/**
 * Writes a Prometheus config into `dir` that loads the rule groups and scrapes the targets, both every second;
 * returns its path, for startPrometheus.
 */
export function writePrometheusConfig(dir: string, options: { readonly rules: readonly RuleGroup[]; readonly targets: readonly ScrapeTarget[] }): string {
  writeRuleFile(join(dir, "rules.yaml"), options.rules);
  const configFile = join(dir, "prometheus.yaml");
  writeFileSync(configFile, stringify({
    global: { scrape_interval: "1s", evaluation_interval: "1s" },
    rule_files: ["rules.yaml"],
    scrape_configs: options.targets.map((t) => ({
      job_name: t.job,
      static_configs: [{ targets: [t.address], labels: { ...t.labels } }],
    })),
  }));
  return configFile;
}

/** Starts Prometheus on a free loopback port with `configFile`, its data in `dir`; resolves once it is ready. */
export async function startPrometheus(configFile: string, dir: string): Promise<RunningPrometheus> {
  const { web } = await freePorts(["web"]);
  const url = `http://127.0.0.1:${web}`;
  const child = startProcess("prometheus", prometheusBinary("prometheus"), [
    `--config.file=${configFile}`,
    `--storage.tsdb.path=${join(dir, "data")}`,
    `--web.listen-address=127.0.0.1:${web}`,
    "--log.level=warn",
  ], join(dir, "prometheus.log"));
  try {
    await waitUntilReady(child, "readiness", () => answersOk(`${url}/-/ready`), 60_000);
  } catch (error) {
    await child.stop();
    throw error;
  }
  const api = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${url}${path}`);
    const body = (await response.json()) as { status: string; data: T };
    if (body.status !== "success") throw new Error(`Prometheus ${path}: ${JSON.stringify(body)}`);
    return body.data;
  };
  return {
    url,
    process: child,
    api,
    alerts: async () => (await api<{ alerts: PrometheusAlert[] }>("/api/v1/alerts")).alerts,
    rules: async () => (await api<{ groups: { rules: PrometheusRuleStatus[] }[] }>("/api/v1/rules")).groups.flatMap((g) => g.rules),
    stop: () => child.stop(),
  };
}
