// Turns a validated configuration (schema defaults applied, every check passed) into the typed AppConfig.
import type { Machine, NodeGroupSpec, PoolConfig, TaintEffect } from "../../domain/model.ts";
import type { AppConfig, PlugCredentials } from "./app-config.ts";
import { normalisePlugUrl, parseHostPort } from "./formats.ts";
import { parseDuration } from "./duration.ts";
import type { Secret } from "./secret.ts";

/** The file's shape once the schema accepted it and filled in defaults (see schema.json). */
export interface RawConfig {
  readonly listen: string;
  readonly tls?: { readonly cert: string; readonly key: string; readonly cacert: string; readonly clientNames?: readonly string[] };
  readonly opsListen: string;
  readonly providerIDPrefix: string;
  readonly gpuLabel: string;
  readonly gpuTypes: readonly string[];
  readonly plugs: { readonly timeout: string };
  readonly powerOff: {
    readonly namespace: string;
    readonly image: string;
    readonly notReadyTimeout: string;
    readonly onShutdownTimeout: "keep-power" | "cut";
    readonly grace: string;
    readonly standbyWatts: number;
    readonly standbyWindow: string;
  };
  readonly scaleUp: {
    readonly maxPowerOnsPerInterval: number;
    readonly powerOnInterval: string;
    readonly order: "config" | "least-used" | "efficient";
  };
  readonly quarantine: { readonly initial: string; readonly max: string };
  readonly nodeGroups: readonly RawGroup[];
}

type RawQuantity = string | number;

interface RawGroup {
  readonly id: string;
  readonly minSize: number;
  readonly maxSize: number;
  readonly idleWatts?: number;
  readonly template: {
    readonly cpu: RawQuantity;
    readonly memory: RawQuantity;
    readonly pods: RawQuantity;
    readonly resources: Readonly<Record<string, RawQuantity>>;
    readonly arch: string;
    readonly os: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly taints: readonly { readonly key: string; readonly value: string; readonly effect: TaintEffect }[];
  };
  readonly nodes: readonly {
    readonly name: string;
    readonly hold: boolean;
    readonly idleWatts?: number;
    readonly plug: {
      readonly url: string;
      readonly switch: string;
      readonly powerSensor?: string;
      readonly credentials?: { readonly usernameFile: string; readonly passwordFile: string };
    };
  }[];
}

/** Retry delays of a failing power-off step: not configurable, documented in the README. */
export const POWER_OFF_RETRY_MS = 5_000;
/** Power-off pods tried per power-off (a failed or stuck one is replaced): not configurable, in the README. */
export const POWER_OFF_POD_ATTEMPTS = 3;
export const POWER_OFF_MAX_RETRY_MS = 120_000;

/** `files`: the values of the credentials files the configuration names, by path (all read). */
export function buildConfig(raw: RawConfig, credentials: AppConfig["credentials"], files: ReadonlyMap<string, Secret>): AppConfig {
  return {
    listen: validated(parseHostPort(raw.listen)),
    ...(raw.tls && { tls: buildTls(raw.tls) }),
    opsListen: validated(parseHostPort(raw.opsListen)),
    plugTimeoutMs: duration(raw.plugs.timeout),
    ...(credentials && { credentials }),
    plugCredentials: plugCredentials(raw, files),
    powerOffPod: { namespace: raw.powerOff.namespace, image: raw.powerOff.image },
    pool: buildPool(raw),
  };
}

function buildTls(tls: NonNullable<RawConfig["tls"]>): NonNullable<AppConfig["tls"]> {
  return {
    certFile: tls.cert,
    keyFile: tls.key,
    caFile: tls.cacert,
    ...(tls.clientNames && { clientNames: [...tls.clientNames] }),
  };
}

function buildPool(raw: RawConfig): PoolConfig {
  let index = 0;
  const groups = raw.nodeGroups.map((group): NodeGroupSpec => ({
    id: group.id,
    minSize: group.minSize,
    maxSize: group.maxSize,
    template: {
      cpu: String(group.template.cpu),
      memory: String(group.template.memory),
      pods: String(group.template.pods),
      resources: Object.fromEntries(Object.entries(group.template.resources).map(([k, v]) => [k, String(v)])),
      labels: { ...group.template.labels, "kubernetes.io/arch": group.template.arch, "kubernetes.io/os": group.template.os },
      taints: group.template.taints.map(({ key, value, effect }) => ({ key, value, effect })),
    },
    machines: group.nodes.map((node): Machine => {
      const url = normalisePlugUrl(node.plug.url);
      const { url: base, device } = validated(url.ok ? url : undefined);
      const idleWatts = node.idleWatts ?? group.idleWatts;
      return {
        name: node.name,
        group: group.id,
        plug: {
          url: base,
          device,
          switch: node.plug.switch,
          ...(node.plug.powerSensor !== undefined && { powerSensor: node.plug.powerSensor }),
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
      notReadyTimeoutMs: duration(raw.powerOff.notReadyTimeout),
      onShutdownTimeout: raw.powerOff.onShutdownTimeout,
      maxPodAttempts: POWER_OFF_POD_ATTEMPTS,
      graceMs: duration(raw.powerOff.grace),
      standbyWatts: raw.powerOff.standbyWatts,
      standbyWindowMs: duration(raw.powerOff.standbyWindow),
      retryMs: POWER_OFF_RETRY_MS,
      maxRetryMs: POWER_OFF_MAX_RETRY_MS,
    },
    scaleUp: {
      maxPowerOnsPerInterval: raw.scaleUp.maxPowerOnsPerInterval,
      powerOnIntervalMs: duration(raw.scaleUp.powerOnInterval),
      order: raw.scaleUp.order,
    },
    quarantine: { initialMs: duration(raw.quarantine.initial), maxMs: duration(raw.quarantine.max) },
    groups,
  };
}

/** The devices whose plugs name their own credentials, with those (the checks made sure a device has one pair). */
function plugCredentials(raw: RawConfig, files: ReadonlyMap<string, Secret>): ReadonlyMap<string, PlugCredentials> {
  const byDevice = new Map<string, PlugCredentials>();
  for (const { plug } of raw.nodeGroups.flatMap((g) => g.nodes)) {
    if (plug.credentials === undefined) continue;
    const url = normalisePlugUrl(plug.url);
    byDevice.set(validated(url.ok ? url : undefined).device, {
      username: validated(files.get(plug.credentials.usernameFile)),
      password: validated(files.get(plug.credentials.passwordFile)),
    });
  }
  return byDevice;
}

function duration(text: string): number {
  return validated(parseDuration(text));
}

/** Unwraps a value the checks have already accepted; undefined here is a bug in the checks, not in the file. */
function validated<T>(value: T | undefined): T {
  if (value === undefined) throw new Error("configuration value passed validation but does not parse");
  return value;
}
