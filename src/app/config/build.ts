// Turns a checked configuration (schema defaults applied, every value parsed, every check passed) into the
// typed AppConfig. Nothing here parses or can fail: the one pass over the file has done both.
import type { Machine, NodeGroupSpec, PoolConfig } from "../../domain/model.ts";
import type { AppConfig } from "./app-config.ts";
import type { ResolvedControl } from "../power/power-switch.ts";
import type { Durations, ParsedConfig, ParsedGroup } from "./parsed.ts";
import { BACKENDS } from "../power/backends.ts";

/** Retry delays of a failing power-off step: not configurable, documented in docs/architecture.md. */
export const POWER_OFF_RETRY_MS = 5_000;
/** Power-off pods tried per power-off (a failed or stuck one is replaced): not configurable, in docs/architecture.md. */
export const POWER_OFF_POD_ATTEMPTS = 3;
export const POWER_OFF_MAX_RETRY_MS = 120_000;

export function buildConfig(parsed: ParsedConfig): AppConfig {
  const { raw } = parsed;
  return {
    listen: parsed.listen,
    ...(raw.tls && { tls: buildTls(raw.tls) }),
    opsListen: parsed.opsListen,
    deviceTimeoutsMs: deviceTimeouts(parsed.durations.deviceTimeouts),
    warnings: parsed.durations.deviceTimeouts.plugs === undefined ? [] : [PLUGS_TIMEOUT_DEPRECATED],
    powerControls: powerControls(parsed.groups),
    powerOffPod: { namespace: raw.powerOff.namespace, image: raw.powerOff.image },
    leaderElection: buildLeaderElection(raw.leaderElection),
    pool: buildPool(parsed),
  };
}

const PLUGS_TIMEOUT_DEPRECATED =
  `plugs.timeout: deprecated, use devices.timeouts; until then it is the timeout of every kind of device that devices.timeouts does not name (${BACKENDS.map((b) => b.section).join(", ")})`;

/** Each backend's timeout: as devices.timeouts names it, else the deprecated plugs.timeout, else the backend's own. */
function deviceTimeouts({ bySection, plugs }: Durations["deviceTimeouts"]): ReadonlyMap<string, number> {
  return new Map(BACKENDS.map((b) => [b.name, bySection[b.section] ?? plugs ?? b.defaultTimeoutMs]));
}

/** cluster-autoscaler's own default Lease name (its --leader-elect-resource-name). */
export const AUTOSCALER_LEASE = "cluster-autoscaler";

function buildLeaderElection({ lease, followAutoscaler: follow }: ParsedConfig["raw"]["leaderElection"]): AppConfig["leaderElection"] {
  if (typeof follow === "boolean") return { lease, followAutoscaler: false };
  return { lease, followAutoscaler: { name: follow.name ?? AUTOSCALER_LEASE, ...(follow.namespace !== undefined && { namespace: follow.namespace }) } };
}

function buildTls(tls: NonNullable<ParsedConfig["raw"]["tls"]>): NonNullable<AppConfig["tls"]> {
  return {
    certFile: tls.cert,
    keyFile: tls.key,
    caFile: tls.cacert,
    ...(tls.clientNames && { clientNames: [...tls.clientNames] }),
  };
}

function buildPool({ raw, durations, groups: parsedGroups }: ParsedConfig): PoolConfig {
  let index = 0;
  const groups = parsedGroups.map(({ raw: group, platform, nodes }): NodeGroupSpec => ({
    id: group.id,
    minSize: group.minSize,
    maxSize: group.maxSize,
    template: {
      cpu: String(group.template.cpu),
      memory: String(group.template.memory),
      pods: String(group.template.pods),
      resources: Object.fromEntries(Object.entries(group.template.resources).map(([k, v]) => [k, String(v)])),
      labels: { ...group.template.labels, "kubernetes.io/arch": platform.arch, "kubernetes.io/os": platform.os },
      taints: group.template.taints.map(({ key, value, effect }) => ({ key, value, effect })),
    },
    machines: nodes.map(({ raw: node, control }): Machine => {
      const idleWatts = node.idleWatts ?? group.idleWatts;
      return {
        name: node.name,
        group: group.id,
        power: {
          backend: control.backend,
          key: control.key,
          label: control.label,
          measuresWatts: control.measuresWatts,
          ...(control.shutsDown === true && { shutsDown: true }),
          ...(node.deviceIdentity !== undefined && { identity: node.deviceIdentity }),
        },
        index: index++,
        hold: node.hold,
        ...(idleWatts !== undefined && { idleWatts }),
      };
    }),
  }));
  return {
    providerIDPrefix: raw.providerIDPrefix,
    gpuLabel: raw.gpuLabel,
    gpuTypes: [...raw.gpuTypes],
    powerOff: {
      notReadyTimeoutMs: durations.notReadyTimeout,
      onShutdownTimeout: raw.powerOff.onShutdownTimeout,
      maxPodAttempts: POWER_OFF_POD_ATTEMPTS,
      graceMs: durations.grace,
      standbyWatts: raw.powerOff.standbyWatts,
      standbyWindowMs: durations.standbyWindow,
      retryMs: POWER_OFF_RETRY_MS,
      maxRetryMs: POWER_OFF_MAX_RETRY_MS,
    },
    scaleUp: {
      maxPowerOnsPerInterval: raw.scaleUp.maxPowerOnsPerInterval,
      powerOnIntervalMs: durations.powerOnInterval,
      order: raw.scaleUp.order,
    },
    quarantine: { initialMs: durations.quarantineInitial, maxMs: durations.quarantineMax },
    groups,
  };
}

/** Each power control's backend and address, by PowerControl.key. */
function powerControls(groups: readonly ParsedGroup[]): ReadonlyMap<string, ResolvedControl> {
  return new Map(groups.flatMap((g) => g.nodes).map(({ control }) => [control.key, { backend: control.backend, address: control.address }]));
}
