// What the one pass over the file hands the build: the file's shape as the schema accepted it, and beside it
// every value the checks had to parse (durations, addresses, power controls), parsed once.
import type { TaintEffect } from "../../domain/model.ts";
import type { ParsedControl } from "../../adapters/power-backend.ts";
import type { HostPort } from "./formats.ts";

/** The file's shape once the schema accepted it and filled in defaults (see schema.json). */
export interface RawConfig {
  readonly listen: string;
  readonly tls?: { readonly cert: string; readonly key: string; readonly cacert: string; readonly clientNames?: readonly string[] };
  readonly opsListen: string;
  readonly providerIDPrefix: string;
  readonly gpuLabel: string;
  readonly gpuTypes: readonly string[];
  readonly devices: { readonly timeouts: Readonly<Record<string, string>> };
  /** Deprecated: devices.timeouts. */
  readonly plugs?: { readonly timeout?: string };
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
  readonly leaderElection: {
    readonly lease: string;
    /** `true` is reported by the checks. */
    readonly followAutoscaler: boolean | { readonly namespace?: string; readonly name?: string };
  };
  readonly nodeGroups: readonly RawGroup[];
}

type RawQuantity = string | number;

export interface RawGroup {
  readonly id: string;
  readonly minSize: number;
  readonly maxSize: number;
  readonly idleWatts?: number;
  readonly template: {
    readonly cpu: RawQuantity;
    readonly memory: RawQuantity;
    readonly pods: RawQuantity;
    readonly resources: Readonly<Record<string, RawQuantity>>;
    /** Undefined when not written: the labels may name it (ParsedGroup.platform holds the outcome). */
    readonly arch?: string;
    readonly os?: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly taints: readonly { readonly key: string; readonly value: string; readonly effect: TaintEffect }[];
  };
  readonly nodes: readonly RawNode[];
}

export interface RawNode {
  readonly name: string;
  readonly hold: boolean;
  readonly idleWatts?: number;
  readonly deviceIdentity?: string;
}

/** The device timeouts the file sets, in milliseconds. */
export interface DeviceTimeouts {
  /** By the key of a node's section (`plug`, `redfish`, ...), as devices.timeouts names them. */
  readonly bySection: Readonly<Record<string, number>>;
  /** The deprecated plugs.timeout, for every kind devices.timeouts does not name. */
  readonly plugs?: number;
}

/** Every duration of the file, in milliseconds. */
export interface Durations {
  readonly deviceTimeouts: DeviceTimeouts;
  readonly notReadyTimeout: number;
  readonly grace: number;
  readonly standbyWindow: number;
  readonly powerOnInterval: number;
  readonly quarantineInitial: number;
  readonly quarantineMax: number;
}

/** A node's power control as its backend parsed it, and which backend (by name and section key). */
export interface NodeControl extends ParsedControl<unknown> {
  readonly backend: string;
  readonly section: string;
}

export interface ParsedNode {
  readonly raw: RawNode;
  readonly control: NodeControl;
}

/** The CPU architecture and OS of a group's machines, as the kubelet labels them. */
export interface Platform {
  readonly arch: string;
  readonly os: string;
}

export interface ParsedGroup {
  readonly raw: RawGroup;
  /** The template's arch and os, from its keys or its labels. */
  readonly platform: Platform;
  readonly nodes: readonly ParsedNode[];
}

/** A file every value of which parsed (other problems may remain: the build runs only when there are none). */
export interface ParsedConfig {
  readonly raw: RawConfig;
  readonly listen: HostPort;
  readonly opsListen: HostPort;
  readonly durations: Durations;
  readonly groups: readonly ParsedGroup[];
}
