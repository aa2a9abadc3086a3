// What Grafana does with deploy/monitoring/grafana-dashboard.yaml before it asks Prometheus: the dashboard JSON
// out of its ConfigMap, panels found by title, the query window (step and the $__interval, $__rate_interval and
// $__range variables) computed as Grafana's Prometheus data source does, template variables replaced, and
// legends formatted from `legendFormat`.
import { parse } from "yaml";

export interface DashboardTarget {
  readonly expr: string;
  readonly refId: string;
  readonly legendFormat?: string;
  /** An instant query at the end of the range (bar gauges and stats), not a range query. */
  readonly instant?: boolean;
}

export interface ValueMapping {
  readonly type: string;
  readonly options: Readonly<Record<string, { readonly text?: string; readonly color?: string }>>;
}

export interface DashboardPanel {
  readonly id: number;
  readonly type: string;
  readonly title: string;
  readonly targets?: readonly DashboardTarget[];
  readonly panels?: readonly DashboardPanel[];
  readonly fieldConfig?: { readonly defaults?: { readonly unit?: string; readonly mappings?: readonly ValueMapping[] } };
}

export interface DashboardVariable {
  readonly name: string;
  readonly type: string;
  readonly includeAll?: boolean;
  readonly allValue?: string;
  readonly current?: { readonly value?: unknown };
}

export interface Dashboard {
  readonly title: string;
  readonly panels: readonly DashboardPanel[];
  readonly templating: { readonly list: readonly DashboardVariable[] };
}

/** The dashboard JSON of a ConfigMap manifest (its only data key). */
export function dashboardOf(configMapYaml: string): Dashboard {
  const manifest = parse(configMapYaml) as { kind?: string; data?: Record<string, string> };
  const json = Object.values(manifest.data ?? {});
  if (manifest.kind !== "ConfigMap" || json.length !== 1 || json[0] === undefined) throw new Error("not a ConfigMap with one dashboard JSON");
  return JSON.parse(json[0]) as Dashboard;
}

/** The panel titled `title` (rows are not panels, their panels are); throws when there is none or more than one. */
export function panelTitled(dashboard: Dashboard, title: string): DashboardPanel {
  const all = (panels: readonly DashboardPanel[]): DashboardPanel[] => panels.flatMap((p) => [p, ...all(p.panels ?? [])]);
  const found = all(dashboard.panels).filter((p) => p.type !== "row" && p.title === title);
  if (found.length !== 1 || found[0] === undefined) throw new Error(`the dashboard has ${found.length} panels titled "${title}"`);
  return found[0];
}

/**
 * Grafana's rounding of an automatic interval to a "nice" one (ms), as its rangeutil's roundInterval:
 * https://github.com/grafana/grafana/blob/main/packages/grafana-data/src/datetime/rangeutil.ts
 */
const NICE_INTERVALS: readonly (readonly [below: number, interval: number])[] = [
  [10, 1], [15, 10], [35, 20], [75, 50], [150, 100], [350, 200], [750, 500], [1_500, 1_000], [3_500, 2_000], [7_500, 5_000],
  [12_500, 10_000], [17_500, 15_000], [25_000, 20_000], [45_000, 30_000], [90_000, 60_000], [210_000, 120_000],
  [450_000, 300_000], [750_000, 600_000], [1_050_000, 900_000], [1_500_000, 1_200_000], [2_700_000, 1_800_000],
  [5_400_000, 3_600_000], [9_000_000, 7_200_000], [16_200_000, 10_800_000], [32_400_000, 21_600_000],
  [86_400_000, 43_200_000], [604_800_000, 86_400_000], [1_814_400_000, 604_800_000],
];

export function roundInterval(ms: number): number {
  return NICE_INTERVALS.find(([below]) => ms < below)?.[1] ?? 2_592_000_000;
}

export interface QueryWindow {
  /** Aligned to the step, in seconds since the epoch, as Grafana sends them. */
  readonly start: number;
  readonly end: number;
  readonly stepSeconds: number;
  /** Grafana's built-in variables for this window. */
  readonly variables: Readonly<Record<string, string>>;
}

/**
 * The window Grafana queries a panel over: $__interval is the range over the panel's width in pixels (Grafana's
 * default "max data points"), rounded, and at least the data source's scrape interval; $__rate_interval is
 * max($__interval + scrape interval, 4 × scrape interval); $__range is the whole range in seconds. See
 * https://grafana.com/docs/grafana/latest/datasources/prometheus/template-variables/ and
 * https://grafana.com/blog/2020/09/28/new-in-grafana-7.2-__rate_interval-for-prometheus-rate-queries-that-just-work/
 */
export function queryWindow(from: number, to: number, maxDataPoints: number, scrapeIntervalSeconds: number): QueryWindow {
  const intervalMs = Math.max(roundInterval(((to - from) * 1000) / maxDataPoints), scrapeIntervalSeconds * 1000);
  const step = intervalMs / 1000;
  const rate = Math.max(step + scrapeIntervalSeconds, 4 * scrapeIntervalSeconds);
  const rangeSeconds = Math.round(to - from);
  return {
    start: Math.floor(from / step) * step,
    end: Math.ceil(to / step) * step,
    stepSeconds: step,
    variables: {
      __interval: `${intervalMs}ms`,
      __interval_ms: String(intervalMs),
      __rate_interval: `${rate}s`,
      __range: `${rangeSeconds}s`,
      __range_s: String(rangeSeconds),
      __range_ms: String(rangeSeconds * 1000),
    },
  };
}

/** The dashboard's own variables at their defaults: a multi-value variable set to All stands for its allValue. */
export function dashboardVariables(dashboard: Dashboard): Record<string, string> {
  const values: Record<string, string> = {};
  for (const v of dashboard.templating.list) {
    if (v.includeAll === true && v.current?.value === "$__all" && v.allValue !== undefined) values[v.name] = v.allValue;
  }
  return values;
}

/** Replaces `$name`, `${name}`, `${name:format}` and `[[name]]`; throws on a variable it has no value for. */
export function substitute(expr: string, variables: Readonly<Record<string, string>>): string {
  return expr.replace(/\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]/g, (match, braced?: string, bare?: string, old?: string) => {
    const name = braced ?? bare ?? old ?? "";
    const value = variables[name];
    if (value === undefined) throw new Error(`no value for the variable ${match} in ${expr}`);
    return value;
  });
}

/**
 * A series' name as Grafana shows it: `legendFormat` with each `{{label}}` replaced by the label's value (empty
 * when absent); without a format, the label set as `{a="x", b="y"}`.
 */
export function legendOf(format: string | undefined, labels: Readonly<Record<string, string>>): string {
  if (format === undefined || format === "" || format === "__auto") {
    return `{${Object.entries(labels).map(([k, v]) => `${k}="${v}"`).join(", ")}}`;
  }
  return format.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, label: string) => labels[label] ?? "");
}

/** Throws, naming the panel and its queries, unless some series has a finite value: a drawn panel shows data. */
export function requireData(title: string, series: readonly { readonly points: readonly { readonly v: number }[] }[], exprs: readonly string[]): void {
  if (!series.some((s) => s.points.some((p) => Number.isFinite(p.v)))) {
    throw new Error(`panel "${title}" has no data; its queries:\n  ${exprs.join("\n  ")}`);
  }
}
