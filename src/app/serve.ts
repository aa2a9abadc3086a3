// The composition root of `plugpool serve`: builds the adapters and the domain, then serves. Start order:
// metrics → cluster view (synced) → pool → gRPC → reconciler; stop in reverse. With `dryRun` the write
// ports are the observe-only ones (observe-only.ts): the domain is the same, the world is left as it is.
import { readFileSync } from "node:fs";
import type { KubeConfig } from "@kubernetes/client-node";
import { Gauge } from "prom-client";
import type { Clock, Pool } from "../domain/index.ts";
import { createPool } from "../domain/index.ts";
import { cloudProviderRoutes, errorMapping } from "../adapters/grpc/routes.ts";
import { startGrpcServer } from "../adapters/grpc/server.ts";
import { createKubernetesClusterView } from "../adapters/kubernetes/cluster-view.ts";
import { createKubernetesNodeTeardown } from "../adapters/kubernetes/node-teardown.ts";
import { createKubernetesNodeLookup } from "../adapters/kubernetes/node-lookup.ts";
import { createKubernetesPowerRecords } from "../adapters/kubernetes/power-records.ts";
import { createKubernetesEventRecorder } from "../adapters/kubernetes/events.ts";
import { apiserverReason } from "../adapters/kubernetes/api-errors.ts";
import type { AppConfig } from "./config/index.ts";
import type { Logger } from "./logger.ts";
import { createMetrics, type Metrics } from "./metrics.ts";
import { startOpsServer } from "./ops-server.ts";
import { createPowerSwitch } from "./power/power-switch.ts";
import { reconcilerLiveness, startReconciler, type Reconciler } from "./reconciler.ts";
import { createReporter } from "./reporting.ts";
import { instrumentPowerSwitch, rpcMetrics } from "./instrumentation.ts";
import { observeOnlyPowerSwitch, observeOnlyRecords, observeOnlyTeardown, type Tell } from "./observe-only.ts";
import { messageOf } from "../domain/errors.ts";

export interface Served {
  readonly grpcPort: number;
  readonly opsPort: number;
  readonly pool: Pool;
  readonly metrics: Metrics;
  stop(): Promise<void>;
}

export interface ServeDeps {
  readonly kubeConfig: KubeConfig;
  readonly logger: Logger;
  readonly version: string;
  readonly clock?: Clock;
  /**
   * Observe only (`serve --dry-run`): answer cluster-autoscaler and read plugs and cluster, but switch no plug,
   * create or delete no pod, delete no Node and write no record; what would have been done is logged and
   * recorded as Events (DryRunPowerOn, DryRunPowerOff, ...). Scale-ups and deletions fail towards CA.
   */
  readonly dryRun?: boolean;
}

const DRY_RUN_NOTE = "dry run: observing only, no plug is switched and nothing is written but Events";

const systemClock: Clock = { now: () => Date.now(), monotonic: () => performance.now() };

export async function serve(config: AppConfig, deps: ServeDeps): Promise<Served> {
  const { logger, kubeConfig } = deps;
  const clock = deps.clock ?? systemClock;
  const machines = config.pool.groups.flatMap((g) => g.machines);
  const dryRun = deps.dryRun === true;
  const metrics = createMetrics();
  new Gauge({
    name: "plugpool_dry_run",
    help: "1 when plugpool only observes (serve --dry-run): it switches no plug and writes nothing but Events.",
    registers: [metrics.registry],
  }).set(Number(dryRun));
  let grpcServing = false;
  const view = createKubernetesClusterView(kubeConfig, {
    powerOffNamespace: config.powerOffPod.namespace,
    machines,
    ...(dryRun && { readOnly: true }),
    onError: (e) => {
      metrics.watchErrors.inc();
      logger.warn("cluster watch failed; it retries by itself", { error: apiserverReason(e) });
    },
  });
  metrics.observeView(() => view.current());
  // The runner starts after the ops server; /healthz asks it once it exists.
  const started: { runner?: Reconciler } = {};
  const ops = await startOpsServer({
    host: config.opsListen.host,
    port: config.opsListen.port,
    registry: metrics.registry,
    readiness: () => [
      ...(view.synced() ? [] : ["cluster view not synced"]),
      // Not current: no power is cut until the watches hear from the apiserver again.
      ...(view.synced() && !view.current() ? ["cluster view not current"] : []),
      ...(grpcServing ? [] : ["gRPC not serving"]),
    ],
    liveness: () => (started.runner === undefined ? [] : reconcilerLiveness(started.runner, clock.now())),
    ...(dryRun && { readyNotes: [DRY_RUN_NOTE] }),
  });
  logger.info("starting", { version: deps.version, machines: machines.length, groups: config.pool.groups.length, dryRun });
  if (dryRun) logger.warn(DRY_RUN_NOTE);

  view.start();
  await view.whenSynced();
  logger.info("cluster view synced");
  const storedRecords = createKubernetesPowerRecords(kubeConfig, {
    namespace: config.powerOffPod.namespace,
    machines,
    onError: (e) => {
      logger.warn("plugpool's records on the cluster: a write failed or a key was ignored", {
        error: messageOf(e),
      });
    },
  });
  // The records are plugpool's licence to cut machines it powered: nothing is served before they are read.
  await storedRecords.load();
  const lookup = createKubernetesNodeLookup(kubeConfig, {
    cache: view.nodeCache,
    onFullRead: () => {
      logger.debug("the Node watch had not caught up with the apiserver in time; the cut guard read every Node");
    },
  });

  const plugs = instrumentPowerSwitch(
    createPowerSwitch(config.powerControls, config.plugTimeoutMs),
    metrics,
    machines,
  );
  const events = createKubernetesEventRecorder(kubeConfig, {
    machines,
    nodeUid: (name) => view.nodeUid(name),
    onError: () => {
      metrics.eventErrors.inc();
    },
  });
  const reporter = createReporter({ logger, metrics, config: config.pool, forward: [events] });
  const tell: Tell = (action) => {
    logger.info(`dry run: ${action.message}`, { event: "dry-run", machine: action.node, reason: action.reason });
    events.record({ node: action.node, type: "Normal", reason: action.reason, message: `dry run: ${action.message}` });
  };
  const power = dryRun ? observeOnlyPowerSwitch(plugs, machines, tell) : plugs;
  const records = dryRun ? observeOnlyRecords(storedRecords) : storedRecords;
  const teardown = dryRun
    ? observeOnlyTeardown(view, tell)
    : createKubernetesNodeTeardown(kubeConfig, { ...config.powerOffPod, machines, providerIDPrefix: config.pool.providerIDPrefix });
  let wake = () => {};
  const pool = createPool(
    {
      clock,
      power,
      cluster: view,
      lookup,
      teardown,
      records,
      reporter,
      wake: () => {
        wake();
      },
    },
    config.pool,
  );
  metrics.observePool(pool, config.pool);

  const tls = config.tls && {
    cert: readFileSync(config.tls.certFile),
    key: readFileSync(config.tls.keyFile),
    ca: readFileSync(config.tls.caFile),
    ...(config.tls.clientNames && { clientNames: config.tls.clientNames }),
  };
  const runner = startReconciler(pool, logger, clock);
  started.runner = runner;
  wake = () => {
    runner.wake();
  };
  const unsubscribe = view.onChange(() => {
    pool.clusterChanged();
    wake();
  });
  const grpc = await startGrpcServer({
    host: config.listen.host,
    port: config.listen.port,
    ...(tls && { tls }),
    routes: cloudProviderRoutes({
      pool,
      clock,
      // Power-offs in progress go on: stopping them would leave power-off pods bound to nodes. plugpool
      // itself stops on SIGTERM.
      cleanup: () => {
        logger.info("cluster-autoscaler sent Cleanup; power-offs in progress continue");
        return Promise.resolve();
      },
    }),
    interceptors: [rpcMetrics(metrics, logger), errorMapping],
  });
  grpcServing = true;
  logger.info("serving", { grpc: `${config.listen.host}:${grpc.port}`, tls: Boolean(tls), ops: ops.port, dryRun });
  // First plug read in the background: a plug never read is not used for scale-up, CA's Refresh follows.
  pool.refresh().catch((e: unknown) => {
    logger.warn("first plug refresh failed", { error: messageOf(e) });
  });

  return {
    grpcPort: grpc.port,
    opsPort: ops.port,
    pool,
    metrics,
    async stop() {
      grpcServing = false;
      await grpc.close();
      await runner.stop();
      unsubscribe();
      await storedRecords.flushed();
      storedRecords.stop();
      await view.stop();
      await ops.close();
      logger.info("stopped");
    },
  };
}
