// plugpool's configuration file as the tests write it: listeners on loopback, the site's providerID prefix, node
// groups of the machines given (4 CPU, 8 GiB each), one timeout for every kind of device if asked, and whatever
// other sections a test sets.
import { stringify } from "yaml";
import { BACKENDS } from "../../../src/app/power/backends.ts";

/** The providerID prefix of the site's Nodes, as on k3s. */
export const PREFIX = "k3s://";

export interface ConfigGroup {
  readonly id: string;
  /** Default: how many nodes it has. */
  readonly maxSize?: number;
  readonly idleWatts?: number;
  /** Its template Node's labels. */
  readonly labels?: Readonly<Record<string, string>>;
  /** Each node as the file holds it, e.g. `{ name: "worker-1", plug: { url, switch: "Relay" } }`. */
  readonly nodes: readonly Readonly<Record<string, unknown>>[];
}

export interface ConfigOptions {
  /** Its gRPC and ops ports on 127.0.0.1 (default 0: any free one; plugpool logs which in its "serving" line). */
  readonly grpcPort?: number;
  readonly opsPort?: number;
  readonly groups: readonly ConfigGroup[];
  /** The timeout of every kind of device (devices.timeouts), e.g. "1s"; default: each kind's own. */
  readonly deviceTimeout?: string;
  /** Every other section, as the file holds it: powerOff, quarantine, leaderElection, tls… */
  readonly sections?: Readonly<Record<string, unknown>>;
}

/** The text of the configuration file. */
export function plugpoolConfig(options: ConfigOptions): string {
  return stringify({
    listen: `127.0.0.1:${options.grpcPort ?? 0}`,
    opsListen: `127.0.0.1:${options.opsPort ?? 0}`,
    providerIDPrefix: PREFIX,
    ...(options.deviceTimeout !== undefined && { devices: { timeouts: everyKind(options.deviceTimeout) } }),
    ...options.sections,
    nodeGroups: options.groups.map((group) => ({
      id: group.id,
      maxSize: group.maxSize ?? group.nodes.length,
      ...(group.idleWatts !== undefined && { idleWatts: group.idleWatts }),
      template: { cpu: "4", memory: "8Gi", ...(group.labels !== undefined && { labels: { ...group.labels } }) },
      nodes: group.nodes,
    })),
  });
}

function everyKind(timeout: string): Record<string, string> {
  return Object.fromEntries(BACKENDS.map((backend) => [backend.section, timeout]));
}
