// `bash scripts/dev.sh sandbox`: plugpool on a laptop. A real control plane (with controller-manager and
// scheduler), three emulated ESPHome plugs with simulated machines behind them, plugpool serving and the real
// cluster-autoscaler, all on loopback, with a pending pod to start things off. It tells on stdout what CA
// decides, what plugpool does with the plugs, and what the machines do, until Ctrl-C. Where cluster-autoscaler
// is not built, a stand-in takes its place (tests/harness/autoscaler/stand-in.ts), and the sandbox says so.
// With --tour it needs no kubectl: it walks through a scale-up whose first machine never boots, then a
// scale-down to zero, explaining each step, and exits when done.
//
//   node scripts/sandbox.ts [--exit-after-scale-up]    (or PLUGPOOL_SANDBOX_EXIT_AFTER_SCALE_UP=1)
//   node scripts/sandbox.ts --tour
//   node scripts/sandbox.ts --backends    one machine per power backend: worker-1 on a Shelly device, worker-2 on
//                                         a Home Assistant entity, worker-3 on a Redfish BMC (the sushy-tools
//                                         emulator), worker-4 on an ESPHome plug (combines with
//                                         --exit-after-scale-up, not with --tour)
//   PLUGPOOL_SANDBOX_AUTOSCALER=auto|real|stand-in   which autoscaler (default auto: the real one when built)
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import type { MachineState } from "../tests/harness/machine-simulator.ts";
import { emulatedObjectId } from "../tests/harness/plug-emulator/index.ts";
import { STAND_IN_NOTICE } from "../tests/harness/autoscaler/stand-in.ts";
import { followLog, isDecision, parseKlog } from "../tests/harness/autoscaler/ca-log.ts";
import { startSite, type LogLine, type MachineSpec, type Site } from "../tests/harness/site/index.ts";
import { createPoolPod, deletePod, nodeNames, readPod } from "../tests/e2e/autoscaler/scenario.ts";
import { eventually } from "../tests/harness/eventually.ts";

const { values } = parseArgs({
  options: {
    "exit-after-scale-up": { type: "boolean", default: false },
    tour: { type: "boolean", default: false },
    backends: { type: "boolean", default: false },
  },
});
const tour = values.tour;
if (tour && values.backends) {
  console.error("sandbox: --tour walks ESPHome plugs; leave out --backends");
  process.exit(2);
}
const exitAfterScaleUp = values["exit-after-scale-up"] || process.env.PLUGPOOL_SANDBOX_EXIT_AFTER_SCALE_UP === "1";
const autoscalerMode = process.env.PLUGPOOL_SANDBOX_AUTOSCALER ?? "auto";
if (autoscalerMode !== "auto" && autoscalerMode !== "real" && autoscalerMode !== "stand-in") {
  console.error(`sandbox: PLUGPOOL_SANDBOX_AUTOSCALER must be auto, real or stand-in, not "${autoscalerMode}"`);
  process.exit(2);
}
const started = performance.now();

// On the tour, the first machine in config order never boots, and its plug has no power sensor: with one that
// reads more than standby, plugpool keeps the power of a machine without a Node (it could be running under
// another name), so the tour could not show the cut.
const machines: readonly MachineSpec[] = values.backends
  ? [
    { name: "worker-1", backend: "shelly", powerSensor: true },
    { name: "worker-2", backend: "home-assistant", powerSensor: true },
    { name: "worker-3", backend: "redfish" },
    { name: "worker-4", version: "2026.7", platform: "esp32", powerSensor: true },
  ]
  : [
    { name: "worker-1", version: "2026.7", platform: "esp32", powerSensor: !tour, neverBoots: tour },
    { name: "worker-2", version: "2026.1", platform: "esp32", powerSensor: tour },
    { name: "worker-3", version: "2025.12", platform: "esp8266" },
  ];

const MACHINE_STATES: Readonly<Record<MachineState, string>> = {
  booting: "power on: booting (no Node yet)",
  running: "booted: Node registered and Ready",
  "shutting-down": "plugpool's power-off pod runs: the OS shuts down",
  halted: "OS halted, Node NotReady (the board still draws standby power)",
  off: "no power",
};

function say(who: string, what: string): void {
  const seconds = ((performance.now() - started) / 1000).toFixed(1).padStart(6);
  console.log(`[${seconds}s] ${who.padEnd(18)} ${what}`);
}

function narratePlugpool(line: LogLine): void {
  if (line.level === "debug") return;
  const detail = line.fields.error ?? line.fields.detail;
  say("plugpool", `${line.message}${line.fields.event === undefined && detail !== undefined ? `: ${String(detail)}` : ""}`);
}

// CA repeats some decisions every loop (an unschedulable pod, say): each is told once a minute at most.
const toldAt = new Map<string, number>();
function narrateAutoscaler(who: string, raw: string): void {
  const line = parseKlog(raw);
  if (line === undefined || !isDecision(line)) return;
  const now = performance.now();
  if (now - (toldAt.get(line.message) ?? -Infinity) < 60_000) return;
  toldAt.set(line.message, now);
  say(who, `${line.level === "I" ? "" : `(${line.level}) `}${line.message}`);
}

function instructions(site: Site): string {
  const served = site.plugpool.served();
  return [
    "",
    "The sandbox is up. In another terminal (with kubectl):",
    `  export KUBECONFIG=${site.plane.kubeconfigPath}`,
    "  kubectl get nodes -L example.com/pool -w        # machines joining and leaving",
    "  kubectl get pods -o wide                         # the pod 'demo' waits for a machine",
    "  kubectl delete pod demo                          # empty node: scale-down after 30 s unneeded",
    "  kubectl apply -f - <<'EOF'                       # a pod that needs a machine of its own",
    "  apiVersion: v1",
    "  kind: Pod",
    "  metadata: { name: big }",
    "  spec:",
    "    nodeSelector: { example.com/pool: workers }",
    "    containers: [{ name: app, image: registry.k8s.io/pause:3.10, resources: { requests: { cpu: 3500m } } }]",
    "  EOF",
    "Without kubectl:",
    ...machines.map((m) => {
      if (m.backend === "shelly") return `  curl '${site.shelly(m.name).url}/rpc/Switch.GetStatus?id=0'     # the Shelly device of ${m.name}, with its draw`;
      if (m.backend === "home-assistant") {
        const ha = site.homeAssistant();
        return `  ${ha.hub.url}/api/states/switch.${ha.objectId(m.name)}     # ${m.name}'s entity in Home Assistant (with its long-lived token)`;
      }
      if (m.backend === "redfish") return `  ${site.redfish().url}/redfish/v1/Systems/${m.name}     # ${m.name}'s system on its BMC (https, Basic auth)`;
      // ESPHome before 2026.1 knows the entity by its object_id only.
      const entity = m.version === "2025.12" ? emulatedObjectId("Relay") : "Relay";
      return `  curl ${site.plug(m.name).url}/switch/${entity}     # the plug of ${m.name} (ESPHome ${m.version ?? ""})`;
    }),
    ...(values.backends ? [] : [`  curl ${site.plug(tour ? "worker-2" : "worker-1").url}/sensor/Power      # ${tour ? "worker-2" : "worker-1"}'s power draw`]),
    `  curl http://127.0.0.1:${String(served?.opsPort ?? "")}/metrics     # plugpool's metrics`,
    ...logs(site),
    "Ctrl-C stops everything.",
    "",
  ].join("\n");
}

function logs(site: Site): string[] {
  return [
    `Logs: cluster-autoscaler ${site.autoscaler.logPath}${site.autoscalerKind === "stand-in" ? "   (its stand-in's)" : ""}`,
    `      plugpool           ${site.plugpool.logPath}`,
  ];
}

function tourHeader(site: Site): string {
  return [
    "",
    "The tour needs nothing from you; it ends by itself. To watch it with kubectl as well:",
    `  export KUBECONFIG=${site.plane.kubeconfigPath}`,
    "  kubectl get nodes -w",
    ...logs(site),
  ].join("\n");
}

/** Resolves once the pod runs, with its node. */
async function waitUntilRunning(site: Site, name: string): Promise<string> {
  for (;;) {
    const pod = await readPod(site.core, name).catch(() => undefined);
    if (pod?.status?.phase === "Running") return pod.spec?.nodeName ?? "";
    await sleep(500);
  }
}

/** Tells the tour's reader what comes next, set apart from the narration. */
function explain(...lines: string[]): void {
  console.log(["", ...lines.map((l) => `  >> ${l}`), ""].join("\n"));
}

/** Waits for a step of the tour; on a timeout it shows the logs' tails and stops everything with exit code 1. */
async function step(site: Site, what: string, check: () => Promise<void> | void, timeoutMs: number): Promise<void> {
  try {
    await eventually(what, check, timeoutMs, 250);
  } catch (error) {
    console.error(`sandbox tour: ${error instanceof Error ? error.message : String(error)}\n${site.diagnostics()}`);
    await site.stop();
    process.exit(1);
  }
}

const plugsOn = (site: Site): string[] => machines.filter((m) => site.powered(m.name)).map((m) => m.name);

/**
 * Throws until plugpool has logged `type` for `machine`. An emulated plug changes state when plugpool's request
 * arrives, and plugpool logs the act only once it has the answer; a step waits for both, so the narration shows
 * the act before the next step's heading.
 */
function logged(site: Site, type: string, machine: string): void {
  if (!site.plugpool.events(type).some((e) => e.machine === machine)) throw new Error(`plugpool has not logged ${type} of ${machine} yet`);
}

/** The guided tour: a scale-up whose first machine never boots, then a scale-down to zero; then it exits. */
async function runTour(site: Site): Promise<never> {
  const began = performance.now();
  explain(
    "Step 1 of 3: scale-up from zero.",
    "Three machines, all off. A pod asks for a machine of group 'workers' (nodeSelector example.com/pool=workers).",
    "cluster-autoscaler sees it pending, asks plugpool for one node more, and plugpool switches on the first plug",
    "in config order: worker-1's.",
  );
  await createPoolPod(site.core, "demo");
  say("sandbox", "created pod default/demo: pending, no machine is on");
  await step(site, "worker-1's plug on", () => {
    if (!site.plug("worker-1").state("Relay")) throw new Error("still off");
    logged(site, "powered-on", "worker-1");
  }, 60_000);

  explain(
    "Step 2 of 3: a machine that never boots.",
    "worker-1 gets power but never registers a Node (here on purpose; at home: a BIOS not set to 'Always On'",
    "after AC loss, a dead disk). cluster-autoscaler waits max-node-provision-time (20 s on this tour) and gives",
    "it up; plugpool cuts the plug of the machine that never registered, leaves it out of scale-ups for a while",
    "(quarantine), and the next scale-up takes worker-2. (Had worker-1's plug a power sensor reading more than",
    "standbyWatts, plugpool would keep its power: a machine drawing power without a Node may be running.)",
  );
  await step(site, "worker-1's plug cut after CA gave it up", () => {
    if (site.plug("worker-1").state("Relay")) throw new Error("worker-1 still on");
    logged(site, "plug-off", "worker-1");
  }, 120_000);
  await step(site, "pod demo Running", async () => {
    const pod = await readPod(site.core, "demo");
    if (pod.status?.phase !== "Running") throw new Error(`pod demo is ${pod.status?.phase ?? "unknown"}`);
    logged(site, "powered-on", pod.spec?.nodeName ?? "");
  }, 120_000);
  const pod = await readPod(site.core, "demo");
  say("sandbox", `pod demo runs on ${pod.spec?.nodeName ?? "?"}; worker-1 is quarantined: ${String(site.plugpool.events("quarantined").some((e) => e.machine === "worker-1"))}`);

  explain(
    "Step 3 of 3: scale-down to zero.",
    "The pod is deleted. After scale-down-unneeded-time (15 s here, 10 min by default) cluster-autoscaler drains",
    "the empty node, taints it ToBeDeletedByClusterAutoscaler and asks plugpool to delete it. plugpool checks the",
    "taint, runs a one-shot pod that shuts the OS down, waits for the Node to go NotReady and a grace period,",
    "cuts the plug and deletes the Node.",
  );
  await deletePod(site.core, "demo");
  say("sandbox", "deleted pod default/demo");
  await step(site, "no Node and no plug on", async () => {
    const names = await nodeNames(site.core);
    const on = plugsOn(site);
    if (names.length > 0 || on.length > 0) throw new Error(`Nodes ${names.join(", ") || "none"}; plugs on: ${on.join(", ") || "none"}`);
    logged(site, "node-deleted", pod.spec?.nodeName ?? "");
  }, 180_000);

  const cuts = site.plugpool.events("plug-off").map((e) => `${String(e.machine)} (${String(e.reason)})`);
  explain(
    `Tour done in ${((performance.now() - began) / 1000).toFixed(0)} s: every plug is off and no Node is left.`,
    `Plugs cut: ${cuts.join(", ")}. Each machine's history: ${machines.map((m) => `${m.name} ${site.history(m.name).join(" -> ") || "never on"}`).join("; ")}.`,
    "Next: `bash scripts/dev.sh sandbox` keeps the sandbox running for kubectl; the README's install path starts",
    "with `plugpool doctor` and `serve --dry-run` on your own cluster.",
  );
  await site.stop();
  process.exit(0);
}

// Ctrl-C reaches every process of the terminal's group; the control plane's own handlers then kill whatever
// is left and remove their files. This only says so, then gets out of the way.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  const onSignal = (): void => {
    process.off(signal, onSignal);
    console.log(`\nsandbox: ${signal}, stopping everything`);
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  };
  process.prependListener(signal, onSignal);
}

say("sandbox", "starting the control plane, plugs, machines, plugpool and cluster-autoscaler…");
const site = await startSite({
  machines,
  autoscaler: autoscalerMode,
  // Long enough to watch CA's DeletionCandidate taint before the node goes. The tour gives a machine 20 s to
  // register (CA's default is 15 min) and retries a failed group after 5 s (default 5 min).
  autoscalerFlags: {
    "scale-down-unneeded-time": tour ? "15s" : "30s",
    ...(tour && { "max-node-provision-time": "20s", "initial-node-group-backoff-duration": "5s" }),
  },
  onMachineChange: (machine, state) => { say(machine, MACHINE_STATES[state]); },
  onPlugpoolLog: narratePlugpool,
}).catch((error: unknown) => {
  console.error(`sandbox: could not start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
if (site.autoscalerKind === "stand-in") {
  say("sandbox", `${STAND_IN_NOTICE} (tests/harness/autoscaler/stand-in.ts; tests/harness/autoscaler/build.sh tells how to build the real one)`);
} else {
  say("sandbox", "the real cluster-autoscaler drives plugpool");
}
const who = site.autoscalerKind === "stand-in" ? "ca stand-in" : "cluster-autoscaler";
const follower = followLog(site.autoscaler.logPath, (line) => { narrateAutoscaler(who, line); });
if (tour) {
  console.log(tourHeader(site));
  await runTour(site);
}
console.log(instructions(site));

const created = performance.now();
await createPoolPod(site.core, "demo");
say("sandbox", "created pod default/demo (1 CPU, nodeSelector example.com/pool=workers): no machine is on, it is pending");
const node = await waitUntilRunning(site, "demo");
say("sandbox", `scaled up: pod demo runs on ${node}, ${((performance.now() - created) / 1000).toFixed(1)} s after it was created`);

if (exitAfterScaleUp) {
  follower.stop();
  await site.stop();
  say("sandbox", "stopped");
} else {
  say("sandbox", "try `kubectl delete pod demo` to watch the scale-down; Ctrl-C stops everything");
}
