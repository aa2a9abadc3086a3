// The composition root of `plugpool serve`: builds the adapters and the domain, then serves. Start order:
// metrics → cluster view (synced) → leader Lease → gRPC; stop in reverse. Each time this process starts acting
// (it holds plugpool's Lease) a fresh pool and its reconciler run (terms.ts); while it does not, cluster-autoscaler
// is answered Unavailable. With `dryRun` there is no Lease and the write ports are the observe-only ones
// (observe-only.ts): the domain is the same, the world is left as it is.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import type { KubeConfig } from "@kubernetes/client-node";
import { Gauge } from "prom-client";
import type { Clock, Leadership, Pool, PoolDeps } from "../domain/index.ts";
import { createPool } from "../domain/index.ts";
import { cloudProviderRoutes, errorMapping } from "../adapters/grpc/routes.ts";
import { startGrpcServer } from "../adapters/grpc/server.ts";
import { createKubernetesClusterView, type KubernetesClusterView } from "../adapters/kubernetes/cluster-view.ts";
import { createKubernetesNodeTeardown } from "../adapters/kubernetes/node-teardown.ts";
import { createKubernetesNodeLookup } from "../adapters/kubernetes/node-lookup.ts";
import { createKubernetesPowerRecords } from "../adapters/kubernetes/power-records.ts";
import { createKubernetesEventRecorder } from "../adapters/kubernetes/events.ts";
import { apiserverReason } from "../adapters/kubernetes/api-errors.ts";
import { createLeaderLease, leaseTimingFor, type LeaderLease } from "../adapters/kubernetes/leader-lease.ts";
import type { AppConfig } from "./config/index.ts";
import type { Logger } from "./logger.ts";
import { createMetrics, type Metrics } from "./metrics.ts";
import { startOpsServer } from "./ops-server.ts";
import { createPowerSwitch } from "./power/power-switch.ts";
import { reconcilerLiveness, startReconciler } from "./reconciler.ts";
import { currentPool, followTerms, type Term } from "./terms.ts";
import { createReporter } from "./reporting.ts";
import { instrumentPowerSwitch, rpcMetrics } from "./instrumentation.ts";
import { observeOnlyPowerSwitch, observeOnlyRecords, observeOnlyTeardown, type Tell } from "./observe-only.ts";
import { messageOf } from "../domain/errors.ts";

export interface Served {
  readonly grpcPort: number;
  readonly opsPort: number;
  /** The pool cluster-autoscaler talks to: the acting term's (see terms.ts). */
  readonly pool: Pool;
  readonly metrics: Metrics;
  stop(): Promise<void>;
}

/** The pod this process runs in, from the downward API. */
export interface Instance {
  /** The pod's name (POD_NAME); plugpool's Lease names the holder by it. Default: the hostname. */
  readonly name?: string;
  /** The pod's namespace (POD_NAMESPACE): where cluster-autoscaler's Lease is unless the config says otherwise. */
  readonly namespace?: string;
  /** The pod's hostname, which cluster-autoscaler's Lease names its holder by. Default: os.hostname(). */
  readonly hostname?: string;
}

export interface ServeDeps {
  readonly kubeConfig: KubeConfig;
  readonly logger: Logger;
  readonly version: string;
  readonly clock?: Clock;
  readonly instance?: Instance;
  /**
   * Observe only (`serve --dry-run`): answer cluster-autoscaler and read plugs and cluster, but switch no plug,
   * create or delete no pod, delete no Node and write no record; what would have been done is logged and
   * recorded as Events (DryRunPowerOn, DryRunPowerOff, ...). Scale-ups and deletions fail towards CA. It takes
   * no part in leader election.
   */
  readonly dryRun?: boolean;
}

const DRY_RUN_NOTE = "dry run: observing only, no plug is switched and nothing is written but Events";

const systemClock: Clock = { now: () => Date.now(), monotonic: () => performance.now() };

/** Who acts: the terms of a leader-elected process, or for a dry run one pool that always does. */
interface Acting {
  readonly pool: Pool;
  /** The runner of the pool acting now, if any (for /healthz). */
  runner(): Term["runner"] | undefined;
  stop(): Promise<void>;
}

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
  // Acting starts after the ops server; /healthz asks its runner once there is one.
  const started: { acting?: Acting } = {};
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
    liveness: () => {
      const runner = started.acting?.runner();
      return runner === undefined ? [] : reconcilerLiveness(runner, clock.now());
    },
    ...(dryRun && { readyNotes: [DRY_RUN_NOTE] }),
  });
  logger.info("starting", { version: deps.version, machines: machines.length, groups: config.pool.groups.length, dryRun });
  if (dryRun) logger.warn(DRY_RUN_NOTE);
  for (const warning of config.warnings) logger.warn(warning);

  view.start();
  await view.whenSynced();
  logger.info("cluster view synced");

  const ports = termPorts(config, { ...deps, clock }, view, metrics);
  const build = (leadership?: Leadership) => startTerm(config, { ...deps, clock }, ports, metrics, leadership);
  const acting = dryRun ? alwaysActing(await build()) : await startElected(config, deps, metrics, build);
  started.acting = acting;
  metrics.observePool(acting.pool, config.pool);
  const unsubscribe = view.onChange(() => {
    acting.pool.clusterChanged();
    acting.runner()?.wake();
  });

  const grpc = await startGrpc(config, acting.pool, clock, metrics, logger);
  grpcServing = true;
  logger.info("serving", { grpc: `${config.listen.host}:${grpc.port}`, tls: Boolean(config.tls), ops: ops.port, dryRun });

  return {
    grpcPort: grpc.port,
    opsPort: ops.port,
    pool: acting.pool,
    metrics,
    async stop() {
      grpcServing = false;
      await grpc.close();
      await acting.stop();
      unsubscribe();
      await view.stop();
      await ops.close();
      logger.info("stopped");
    },
  };
}

/** The ports every term shares; the records are each term's own. */
type TermPorts = Omit<PoolDeps, "records" | "wake" | "leadership">;

/** The adapters every term's pool works with; with `dryRun` the write ports only tell what they would do. */
function termPorts(config: AppConfig, deps: ServeDeps & { clock: Clock }, view: KubernetesClusterView, metrics: Metrics): TermPorts {
  const { logger, kubeConfig, clock } = deps;
  const machines = config.pool.groups.flatMap((g) => g.machines);
  const dryRun = deps.dryRun === true;
  const plugs = instrumentPowerSwitch(createPowerSwitch(config.powerControls, config.deviceTimeoutsMs), metrics, machines);
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
  return {
    clock,
    power: dryRun ? observeOnlyPowerSwitch(plugs, machines, tell) : plugs,
    cluster: view,
    lookup: createKubernetesNodeLookup(kubeConfig, {
      cache: view.nodeCache,
      onFullRead: () => {
        logger.debug("the Node watch had not caught up with the apiserver in time; the cut guard read every Node");
      },
    }),
    teardown: dryRun
      ? observeOnlyTeardown(view, tell)
      : createKubernetesNodeTeardown(kubeConfig, { ...config.powerOffPod, machines, providerIDPrefix: config.pool.providerIDPrefix }),
    reporter,
  };
}

/**
 * A fresh pool over freshly read records, with its runner. The records are plugpool's licence to cut machines it
 * powered: the pool is built only once they are read.
 */
async function startTerm(
  config: AppConfig,
  deps: ServeDeps & { clock: Clock },
  ports: TermPorts,
  metrics: Metrics,
  leadership?: Leadership,
): Promise<Term> {
  const { logger, clock } = deps;
  const machines = config.pool.groups.flatMap((g) => g.machines);
  const stored = createKubernetesPowerRecords(deps.kubeConfig, {
    namespace: config.powerOffPod.namespace,
    machines,
    onError: (e) => {
      logger.warn("plugpool's records on the cluster: a write failed or a key was ignored", { error: messageOf(e) });
    },
    onConflict: (keys) => {
      metrics.recordConflicts.inc();
      logger.warn("another plugpool wrote plugpool's records meanwhile: its values were taken in and stand; two instances acted at once", {
        keys: keys.join(", "),
      });
    },
  });
  try {
    await stored.load();
  } catch (error) {
    stored.stop();
    throw error;
  }
  const records = deps.dryRun === true ? observeOnlyRecords(stored) : stored;
  let wake = () => {};
  const pool = createPool({ ...ports, records, wake: () => { wake(); }, ...(leadership && { leadership }) }, config.pool);
  const runner = startReconciler(pool, logger, clock);
  wake = () => {
    runner.wake();
  };
  // First plug read in the background: a plug never read is not used for scale-up, CA's Refresh follows.
  pool.refresh().catch((e: unknown) => {
    logger.warn("first plug refresh failed", { error: messageOf(e) });
  });
  return {
    pool,
    runner,
    async stop(flush) {
      await runner.stop();
      if (flush) await stored.flushed();
      stored.stop();
    },
  };
}

/** The dry run's one pool: it writes nothing, so it needs no Lease. */
function alwaysActing(term: Term): Acting {
  return { pool: term.pool, runner: () => term.runner, stop: () => term.stop(true) };
}

/**
 * plugpool's Lease, and a fresh term each time it is won. Resolves once the first attempt on the Lease and the
 * term it may have started are done, so cluster-autoscaler's first call finds this process acting or passive.
 */
async function startElected(config: AppConfig, deps: ServeDeps, metrics: Metrics, build: (leadership: Leadership) => Promise<Term>): Promise<Acting> {
  const { logger } = deps;
  const lease = createElection(config, deps, () => {
    terms.changed();
  });
  const terms = followTerms(lease, build, logger);
  new Gauge({
    name: "plugpool_acting",
    help: "1 while this plugpool holds its Lease and acts; 0 while it is passive and answers cluster-autoscaler Unavailable.",
    registers: [metrics.registry],
    collect() {
      this.set(Number(lease.acting()));
    },
  });
  await lease.start();
  await terms.settled();
  return {
    pool: currentPool(() => terms.current()?.pool, lease),
    runner: () => terms.current()?.runner,
    async stop() {
      await terms.stop();
      await lease.stop();
    },
  };
}

/** The longest timeout of the kinds of device the machines use. */
export function longestDeviceTimeout(config: AppConfig): number {
  const inUse = config.pool.groups.flatMap((g) => g.machines.map((m) => config.deviceTimeoutsMs.get(m.power.backend) ?? 0));
  return Math.max(0, ...inUse);
}

function createElection(config: AppConfig, deps: ServeDeps, onChange: () => void): LeaderLease {
  const { logger } = deps;
  const host = deps.instance?.hostname ?? hostname();
  const follow = config.leaderElection.followAutoscaler;
  // A suffix per process: a restarted container in the same pod is another holder, not a renewal.
  const identity = `${deps.instance?.name ?? host}_${randomBytes(4).toString("hex")}`;
  const lease = { namespace: config.powerOffPod.namespace, name: config.leaderElection.lease };
  logger.info("contending for plugpool's Lease", {
    lease: `${lease.namespace}/${lease.name}`,
    identity,
    followAutoscaler: follow === false ? "no" : `${follow.namespace ?? deps.instance?.namespace ?? "kube-system"}/${follow.name}`,
  });
  return createLeaderLease(deps.kubeConfig, {
    lease,
    identity,
    timing: leaseTimingFor(longestDeviceTimeout(config)),
    ...(follow !== false && {
      followAutoscaler: { namespace: follow.namespace ?? deps.instance?.namespace ?? "kube-system", name: follow.name, hostname: host },
    }),
    onChange,
    onError: (e) => {
      logger.warn("plugpool's Lease: an attempt to take or renew it failed; it retries by itself", { error: messageOf(e) });
    },
  });
}

async function startGrpc(config: AppConfig, pool: Pool, clock: Clock, metrics: Metrics, logger: Logger) {
  const tls = config.tls && {
    cert: readFileSync(config.tls.certFile),
    key: readFileSync(config.tls.keyFile),
    ca: readFileSync(config.tls.caFile),
    ...(config.tls.clientNames && { clientNames: config.tls.clientNames }),
  };
  return startGrpcServer({
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
}
