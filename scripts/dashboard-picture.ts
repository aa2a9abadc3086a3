// docs/dashboard.svg, the dashboard picture in the README, from a real run of the sandbox: the control plane,
// emulated plugs and simulated machines, plugpool and the real cluster-autoscaler of tests/e2e/autoscaler, and a
// real Prometheus scraping plugpool's ops port and cluster-autoscaler's metrics every second. The scenario:
// everything off for a while; a pod needs a machine, the first one switched on never boots, cluster-autoscaler
// gives it up and plugpool cuts and quarantines it, the next one boots; a second pod brings up a third machine;
// both pods are deleted one after the other and the group scales down to zero. Then the panels chosen below are
// queried with the expressions of deploy/monitoring/grafana-dashboard.yaml, with Grafana's variables as Grafana
// would set them for this time range, and drawn. A drawn panel without data fails the run.
//
//   node scripts/dashboard-picture.ts [--out docs/dashboard.svg]      (a few minutes; needs scripts/dev.sh setup)
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import type { CoreV1Api } from "@kubernetes/client-node";
import { POOL_LABEL, startSite, type Site } from "../tests/harness/site/index.ts";
import { deletePod, nodeNames, readPod } from "../tests/e2e/autoscaler/scenario.ts";
import { eventually } from "../tests/harness/eventually.ts";
import { startPrometheus, writePrometheusConfig, type RunningPrometheus } from "../tests/harness/prometheus/index.ts";
import {
  dashboardOf, dashboardVariables, legendOf, panelTitled, queryWindow, requireData, substitute,
  type Dashboard, type DashboardPanel, type QueryWindow,
} from "./dashboard-picture/grafana.ts";
import { PANEL_WIDTH, renderDashboard, type PanelData, type Series } from "./dashboard-picture/svg.ts";

const root = join(import.meta.dirname, "..");
const { values } = parseArgs({ options: { out: { type: "string", default: join(root, "docs", "dashboard.svg") } } });

/** The panels drawn, by their titles in the dashboard, in reading order (two to a row). */
const PANELS = [
  "Plug on/off",
  "Instances by group and state",
  "Power draw",
  "Power-on to Node Ready",
  "Hours on (dashboard range)",
  "Power actions",
  "Energy used (dashboard range)",
  "Energy avoided (dashboard range)",
  "Unschedulable pods",
  "Node group target size",
] as const;

/** writePrometheusConfig scrapes every second; the data source's "Scrape interval" is set to match. */
const SCRAPE_INTERVAL_SECONDS = 1;

const started = performance.now();
function say(what: string): void {
  console.log(`[${((performance.now() - started) / 1000).toFixed(1).padStart(6)}s] ${what}`);
}

/** A pod of 3 CPUs: a machine (4 CPUs) runs one, so a second pod needs a second machine. */
async function createBigPod(core: CoreV1Api, name: string): Promise<void> {
  await core.createNamespacedPod({
    namespace: "default",
    body: {
      metadata: { name, labels: { app: "dashboard-picture" } },
      spec: {
        nodeSelector: { ...POOL_LABEL },
        terminationGracePeriodSeconds: 0,
        containers: [{ name: "app", image: "registry.k8s.io/pause:3.10", resources: { requests: { cpu: "3", memory: "1Gi" } } }],
      },
    },
  });
}

async function podNode(core: CoreV1Api, name: string): Promise<string> {
  let node = "";
  await eventually(`pod ${name} Running`, async () => {
    const pod = await readPod(core, name);
    if (pod.status?.phase !== "Running") throw new Error(`pod ${name} is ${pod.status?.phase ?? "unknown"}`);
    node = pod.spec?.nodeName ?? "";
  }, 180_000, 250);
  return node;
}

async function plugOff(site: Site, machine: string): Promise<void> {
  await eventually(`${machine}'s plug off and its Node gone`, async () => {
    if (site.plug(machine).state("Relay")) throw new Error(`${machine} still on`);
    if ((await nodeNames(site.core)).includes(machine)) throw new Error(`Node ${machine} still there`);
  }, 180_000, 250);
}

/** The scenario; resolves with the range it covers (seconds since the epoch). */
async function runScenario(site: Site, prometheus: RunningPrometheus): Promise<{ from: number; to: number }> {
  await eventually("plugpool's and cluster-autoscaler's metrics in Prometheus", async () => {
    const names = await prometheus.api<string[]>("/api/v1/label/__name__/values");
    for (const name of ["plugpool_plug_on", "cluster_autoscaler_unschedulable_pods_count"]) {
      if (!names.includes(name)) throw new Error(`no ${name} yet`);
    }
  }, 60_000, 500);
  const from = Date.now() / 1000;
  say("Prometheus scrapes plugpool and cluster-autoscaler; every machine is off");
  await sleep(20_000);

  await createBigPod(site.core, "app-a");
  say("pod app-a created (3 CPUs): pending");
  await eventually("worker-1 switched on", () => {
    if (!site.plug("worker-1").state("Relay")) throw new Error("worker-1 off");
  }, 60_000, 250);
  say("worker-1 switched on (it never boots)");
  await eventually("worker-1 cut after cluster-autoscaler's provisioning timeout", () => {
    if (site.plug("worker-1").state("Relay")) throw new Error("worker-1 on");
  }, 120_000, 250);
  say("worker-1 given up by cluster-autoscaler, cut and quarantined by plugpool");
  say(`pod app-a runs on ${await podNode(site.core, "app-a")}`);
  await sleep(10_000);

  await createBigPod(site.core, "app-b");
  say("pod app-b created (3 CPUs): pending");
  say(`pod app-b runs on ${await podNode(site.core, "app-b")}`);
  await sleep(30_000);

  const nodeA = (await readPod(site.core, "app-a")).spec?.nodeName ?? "";
  await deletePod(site.core, "app-a");
  say("pod app-a deleted");
  await plugOff(site, nodeA);
  say(`${nodeA} powered off and its Node deleted`);
  await sleep(10_000);

  const nodeB = (await readPod(site.core, "app-b")).spec?.nodeName ?? "";
  await deletePod(site.core, "app-b");
  say("pod app-b deleted");
  await plugOff(site, nodeB);
  say(`${nodeB} powered off and its Node deleted: the group is at zero`);
  await sleep(20_000);
  const to = Date.now() / 1000;
  // The last scrape of the range is in before the queries.
  await sleep(3 * SCRAPE_INTERVAL_SECONDS * 1000);
  return { from, to };
}

interface PromSeries {
  readonly metric: Record<string, string>;
  readonly values?: [number, string][];
  readonly value?: [number, string];
}

/** One target's series, named by its legendFormat: a range query, or an instant one at the range's end. */
async function query(prometheus: RunningPrometheus, expr: string, instant: boolean, window: QueryWindow, legend: string | undefined): Promise<Series[]> {
  const params = new URLSearchParams(instant
    ? { query: expr, time: String(window.end) }
    : { query: expr, start: String(window.start), end: String(window.end), step: String(window.stepSeconds) });
  const data = await prometheus.api<{ result: PromSeries[] }>(`/api/v1/${instant ? "query" : "query_range"}?${params.toString()}`);
  return data.result.map((s) => ({
    name: legendOf(legend, s.metric),
    points: (s.values ?? (s.value === undefined ? [] : [s.value])).map(([t, v]) => ({ t, v: Number.parseFloat(v) })),
  }));
}

async function panelData(prometheus: RunningPrometheus, dashboard: Dashboard, panel: DashboardPanel, window: QueryWindow): Promise<PanelData> {
  const variables = { ...dashboardVariables(dashboard), ...window.variables };
  const series: Series[] = [];
  const exprs: string[] = [];
  for (const target of panel.targets ?? []) {
    const expr = substitute(target.expr, variables);
    exprs.push(expr);
    series.push(...await query(prometheus, expr, target.instant === true, window, target.legendFormat));
  }
  series.sort((a, b) => a.name.localeCompare(b.name));
  requireData(panel.title, series, exprs);
  const unit = panel.fieldConfig?.defaults?.unit;
  switch (panel.type) {
    case "timeseries":
      return { kind: "timeseries", title: panel.title, series, ...(unit !== undefined && { unit }) };
    case "state-timeline": {
      const states = Object.fromEntries((panel.fieldConfig?.defaults?.mappings ?? [])
        .filter((m) => m.type === "value")
        .flatMap((m) => Object.entries(m.options).map(([value, o]) => [value, { text: o.text ?? value, color: o.color ?? "transparent" }])));
      return { kind: "state-timeline", title: panel.title, series, states };
    }
    case "bargauge":
      return {
        kind: "bars",
        title: panel.title,
        bars: series.map((s) => ({ name: s.name, value: s.points.at(-1)?.v ?? Number.NaN })),
        ...(unit !== undefined && { unit }),
      };
    default:
      throw new Error(`panel "${panel.title}" is a ${panel.type}, which is not drawn`);
  }
}

const dashboard = dashboardOf(readFileSync(join(root, "deploy", "monitoring", "grafana-dashboard.yaml"), "utf8"));
// Before minutes of running: every panel is there.
const panels = PANELS.map((title) => panelTitled(dashboard, title));

say("starting the control plane, plugs, machines, plugpool and cluster-autoscaler…");
const site = await startSite({
  machines: [{ name: "worker-1", neverBoots: true }, { name: "worker-2", powerSensor: true }, { name: "worker-3", powerSensor: true }],
  // As the sandbox's tour: 20 s for a machine to register, a failed group retried after 5 s, and an empty node
  // removed after 15 s unneeded.
  autoscalerFlags: { "scale-down-unneeded-time": "15s", "max-node-provision-time": "20s", "initial-node-group-backoff-duration": "5s" },
  onMachineChange: (machine, state) => { say(`${machine}: ${state}`); },
});
const dir = mkdtempSync(join(tmpdir(), "plugpool-dashboard-picture-"));
let prometheus: RunningPrometheus | undefined;
try {
  const served = site.plugpool.served();
  if (served === undefined) throw new Error("plugpool is not serving");
  const pod = { namespace: "plugpool", pod: "cluster-autoscaler-0" };
  prometheus = await startPrometheus(writePrometheusConfig(dir, {
    rules: [],
    targets: [
      { job: "plugpool", address: `127.0.0.1:${served.opsPort}`, labels: pod },
      { job: "cluster-autoscaler", address: new URL(site.autoscaler.metricsUrl).host, labels: pod },
    ],
  }), dir);
  const { from, to } = await runScenario(site, prometheus);
  const window = queryWindow(from, to, PANEL_WIDTH, SCRAPE_INTERVAL_SECONDS);
  const drawn: PanelData[] = [];
  for (const panel of panels) drawn.push(await panelData(prometheus, dashboard, panel, window));
  for (const p of drawn) {
    if (p.kind === "bars") say(`${p.title}: ${p.bars.map((b) => `${b.name} ${b.value.toPrecision(3)}`).join(", ")}`);
  }
  const minutes = ((to - from) / 60).toFixed(1);
  const svg = renderDashboard({
    title: `${dashboard.title}: a sandbox run`,
    subtitle: `worker-1 never boots; two pods bring up worker-2 and worker-3, are deleted, and the group scales down to zero · `
      + `${minutes} min from ${new Date(from * 1000).toISOString().slice(0, 16).replace("T", " ")} UTC · the dashboard's queries, step ${window.stepSeconds} s`,
    from: window.start,
    to: window.end,
    stepSeconds: window.stepSeconds,
    columns: 2,
    panels: drawn,
  });
  mkdirSync(dirname(values.out), { recursive: true });
  writeFileSync(values.out, svg);
  say(`wrote ${values.out} (${svg.length} bytes, ${drawn.length} panels, ${minutes} min of data)`);
} catch (error) {
  console.error(`dashboard-picture: ${error instanceof Error ? error.message : String(error)}`);
  console.error(site.diagnostics());
  if (prometheus !== undefined) console.error(`--- prometheus ---\n${prometheus.process.logTail(20)}`);
  process.exitCode = 1;
} finally {
  await prometheus?.stop();
  await site.stop();
  rmSync(dir, { recursive: true, force: true });
}
