// plugpool's own leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it
// (https://pkg.go.dev/k8s.io/client-go/tools/leaderelection): take the Lease when it is free or its holder let
// it lapse, renew it every retry period, and write it only with the resourceVersion it was read at, so that of
// two writers one gets 409 Conflict and loses.
//
// This process acts only while its last successful renew is younger than the renew deadline, measured with
// performance.now() from when that renew was SENT. Another instance takes the Lease only once it has seen no
// change to it for the lease duration, which is longer: a process that cannot renew (partitioned, frozen, its
// apiserver down) stops acting at least `leaseDuration - renewDeadline` (5 s by default) before anyone else can
// start. The one exposure left: an act that passed its last check just before the process froze goes out when
// it wakes. Each act is checked right before its request, so that request is all that can go out; a plug
// request is bounded by the plug timeout (at most 4 s), a cluster write by its own (10 s).
import { setTimeout as sleep } from "node:timers/promises";
import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from "@kubernetes/client-node";
import type { Leadership } from "../../domain/ports.ts";
import { callBound, callOptions, statusOf, type CallBound } from "./api-errors.ts";

/** client-go's defaults (and cluster-autoscaler's): the renew deadline is shorter than the lease. */
export interface LeaseTiming {
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
}

export const DEFAULT_LEASE_TIMING: LeaseTiming = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

export interface LeaseRef {
  readonly namespace: string;
  readonly name: string;
}

export interface LeaderLeaseOptions {
  /** plugpool's own Lease. */
  readonly lease: LeaseRef;
  /** This process in the Lease's holderIdentity: its pod's name and a suffix of its own. */
  readonly identity: string;
  /**
   * cluster-autoscaler's Lease, when it runs leader-elected: contend only while it is held by `hostname` (the CA
   * in this pod: cluster-autoscaler's identity is its hostname, which the containers of a pod share), and give
   * plugpool's Lease up when it is not. A missing Lease means a CA that does not elect: contend.
   */
  readonly followAutoscaler?: LeaseRef & { readonly hostname: string };
  readonly timing?: LeaseTiming;
  /** Each failed attempt (it is retried every retry period). */
  readonly onError?: (error: unknown) => void;
  /** Called when this process starts (true) or stops (false) acting. */
  readonly onChange?: (acting: boolean) => void;
}

export interface LeaderLease extends Leadership {
  /** Starts contending; resolves once the first attempt ended (this process acts, or knows it does not yet). */
  start(): Promise<void>;
  /** Stops contending; gives the Lease up (holder cleared) when this process holds it, so another takes it at once. */
  stop(): Promise<void>;
  /** Counts the times this process started acting: an act of an earlier term must not go on in a later one. */
  term(): number;
}

interface Observed {
  readonly resourceVersion: string;
  readonly holder: string;
  readonly durationMs: number;
  /** performance.now() when this version was first seen. */
  readonly at: number;
}

export function createLeaderLease(kc: KubeConfig, options: LeaderLeaseOptions): LeaderLease {
  const api = kc.makeApiClient(CoordinationV1Api);
  const timing = options.timing ?? DEFAULT_LEASE_TIMING;
  const { identity } = options;
  const onError = options.onError ?? (() => undefined);
  const stopping = new AbortController();
  const state: { renewedAt?: number; acquiredAt?: V1MicroTime; observed?: Observed; term: number; told: boolean } = { term: 0, told: false };
  let lapseTimer: NodeJS.Timeout | undefined;
  let loop: Promise<void> | undefined;

  const acting = (): boolean => state.renewedAt !== undefined && performance.now() - state.renewedAt < timing.renewDeadlineMs;
  const tell = (): void => {
    const now = acting();
    if (now === state.told) return;
    state.told = now;
    options.onChange?.(now);
  };
  // Acting ends by the clock alone; the timer only tells the owner, at the moment it ends.
  const renewed = (sentAt: number): void => {
    if (!acting()) state.term++;
    state.renewedAt = sentAt;
    clearTimeout(lapseTimer);
    lapseTimer = setTimeout(tell, Math.max(0, sentAt + timing.renewDeadlineMs - performance.now()));
    tell();
  };
  const lost = (): void => {
    delete state.renewedAt;
    delete state.acquiredAt;
    clearTimeout(lapseTimer);
    tell();
  };
  const requestMs = Math.max(1, timing.renewDeadlineMs / 2);
  const bound = (): CallBound => callBound(requestMs, stopping.signal);
  const where = (ref: LeaseRef) => `Lease ${ref.namespace}/${ref.name}`;

  async function read(ref: LeaseRef, limits: CallBound): Promise<V1Lease | undefined> {
    try {
      return await api.readNamespacedLease({ ...ref }, callOptions({ signal: limits.signal }));
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw limits.error(`reading ${where(ref)}`, error);
    }
  }

  /** Creates or replaces plugpool's Lease, held by `holder` ("" gives it up); undefined when another writer came first. */
  async function write(current: V1Lease | undefined, holder: string, wall: Date, limits: CallBound): Promise<V1Lease | undefined> {
    const ref = options.lease;
    const mine = current?.spec?.holderIdentity === identity && holder === identity;
    const transitions = current?.spec?.leaseTransitions ?? 0;
    const body: V1Lease = {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      // The resourceVersion it was read at: a write made meanwhile by another makes this one fail with 409.
      metadata: { name: ref.name, namespace: ref.namespace, ...(current && { resourceVersion: current.metadata?.resourceVersion }) },
      spec: {
        holderIdentity: holder,
        leaseDurationSeconds: Math.ceil(timing.leaseDurationMs / 1000),
        acquireTime: mine && state.acquiredAt ? state.acquiredAt : new V1MicroTime(wall.getTime()),
        renewTime: new V1MicroTime(wall.getTime()),
        leaseTransitions: mine || holder === "" || current === undefined ? transitions : transitions + 1,
      },
    };
    try {
      const call = callOptions({ signal: limits.signal });
      return await (current === undefined
        ? api.createNamespacedLease({ namespace: ref.namespace, body }, call)
        : api.replaceNamespacedLease({ ...ref, body }, call));
    } catch (error) {
      if (statusOf(error) === 409) return undefined;
      throw limits.error(`writing ${where(ref)}`, error);
    }
  }

  /** The Lease as last seen, with when this process first saw that version (another's lapse counts from it). */
  function observe(lease: V1Lease | undefined): Observed | undefined {
    if (lease === undefined) return (state.observed = undefined);
    const resourceVersion = lease.metadata?.resourceVersion ?? "";
    if (state.observed?.resourceVersion !== resourceVersion) {
      const seconds = lease.spec?.leaseDurationSeconds;
      state.observed = {
        resourceVersion,
        holder: lease.spec?.holderIdentity ?? "",
        durationMs: seconds === undefined ? timing.leaseDurationMs : seconds * 1000,
        at: performance.now(),
      };
    }
    return state.observed;
  }

  /** Whether cluster-autoscaler's Lease lets this process contend (see followAutoscaler). */
  async function autoscalerHere(): Promise<boolean> {
    const follow = options.followAutoscaler;
    if (follow === undefined) return true;
    const lease = await read(follow, bound());
    return lease === undefined || lease.spec?.holderIdentity === follow.hostname;
  }

  async function acquireOrRenew(): Promise<void> {
    const lease = await read(options.lease, bound());
    const seen = observe(lease);
    if (seen !== undefined && seen.holder !== "" && seen.holder !== identity && performance.now() < seen.at + seen.durationMs) {
      lost();
      return;
    }
    const sentAt = performance.now();
    const wall = new Date();
    const written = await write(lease, identity, wall, bound());
    if (written === undefined) {
      lost();
      return;
    }
    if (lease?.spec?.holderIdentity !== identity || state.acquiredAt === undefined) state.acquiredAt = new V1MicroTime(wall.getTime());
    observe(written);
    renewed(sentAt);
  }

  /** Gives the Lease up if this process holds it: acting ends first, then the holder is cleared. */
  async function release(limits: () => CallBound): Promise<void> {
    const held = state.renewedAt !== undefined;
    lost();
    if (!held) return;
    const lease = await read(options.lease, limits());
    if (lease?.spec?.holderIdentity === identity) observe(await write(lease, "", new Date(), limits()));
  }

  async function attempt(): Promise<void> {
    try {
      if (await autoscalerHere()) await acquireOrRenew();
      else await release(bound);
    } catch (error) {
      if (!stopping.signal.aborted) onError(error);
    }
  }

  async function run(firstDone: () => void): Promise<void> {
    while (!stopping.signal.aborted) {
      await attempt();
      firstDone();
      await sleep(timing.retryPeriodMs, undefined, { signal: stopping.signal }).catch(() => undefined);
    }
  }

  return {
    acting,
    holder: () => {
      const holder = state.observed?.holder;
      return acting() || holder === undefined || holder === "" || holder === identity ? undefined : holder;
    },
    term: () => state.term,
    start() {
      const first = Promise.withResolvers<undefined>();
      loop ??= run(() => {
        first.resolve(undefined);
      });
      return first.promise;
    },
    async stop() {
      stopping.abort();
      await loop;
      // The loop's signal has aborted: the release gets a bound of its own.
      await release(() => callBound(requestMs)).catch(onError);
    },
  };
}
