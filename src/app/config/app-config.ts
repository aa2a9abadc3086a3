// The configuration as the rest of plugpool sees it: typed, validated, deeply frozen.
import type { PoolConfig } from "../../domain/model.ts";
import type { Secret } from "./secret.ts";

/** A username and password, never shown. */
export interface PlugCredentials {
  readonly username: Secret;
  readonly password: Secret;
}

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
  readonly plugTimeoutMs: number;
  /** Plug credentials from PLUGPOOL_PLUG_USERNAME / PLUGPOOL_PLUG_PASSWORD; both are Secrets (kept out of logs). */
  readonly credentials?: PlugCredentials;
  /** The devices whose plugs name their own credentials (`plug.credentials` files), by `PlugAddress.device`. */
  readonly plugCredentials: ReadonlyMap<string, PlugCredentials>;
  readonly powerOffPod: { readonly namespace: string; readonly image: string };
  readonly pool: PoolConfig;
}
