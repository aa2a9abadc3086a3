// The configuration as the rest of plugpool sees it: typed, validated, deeply frozen.
import type { PoolConfig } from "../../domain/model.ts";
import type { ResolvedControl } from "../power/power-switch.ts";

export interface AppConfig {
  /** gRPC server for cluster-autoscaler. */
  readonly listen: { readonly host: string; readonly port: number };
  /**
   * Mutual TLS for the gRPC server; absent means plaintext (only allowed on loopback). `clientNames`: the
   * subjectAltNames (DNS or URI) a client certificate must carry one of; absent means any the CA signed.
   */
  readonly tls?: {
    readonly certFile: string;
    readonly keyFile: string;
    readonly caFile: string;
    readonly clientNames?: readonly string[];
  };
  /** Plain-HTTP server for /healthz, /readyz and /metrics. */
  readonly opsListen: { readonly host: string; readonly port: number };
  /** Bound on one call to a device, by backend name (every backend has one). */
  readonly deviceTimeoutsMs: ReadonlyMap<string, number>;
  /** What the file asks that still works but should change (a deprecated key): told at start-up and by `doctor`. */
  readonly warnings: readonly string[];
  /**
   * Each machine's power control as its backend parsed it (credentials as Secrets, kept out of logs), by
   * PowerControl.key.
   */
  readonly powerControls: ReadonlyMap<string, ResolvedControl>;
  readonly powerOffPod: { readonly namespace: string; readonly image: string };
  /**
   * plugpool's own Lease (in powerOffPod.namespace), and cluster-autoscaler's, which it follows unless false. An
   * absent namespace is the namespace of plugpool's own pod.
   */
  readonly leaderElection: {
    readonly lease: string;
    readonly followAutoscaler: { readonly namespace?: string; readonly name: string } | false;
  };
  readonly pool: PoolConfig;
}
