// Writing keys of plugpool's own ConfigMaps, each by a JSON merge patch of `data`, which changes only the keys it
// names. Two kinds of writer:
// - unconditional (createConfigMapWriter): the patch applies whatever the ConfigMap holds now. For a cache that
//   every instance fills in alike from what it watches.
// - versioned (createVersionedConfigMapWriter): the patch carries the resourceVersion the writer's memory is based
//   on, so the apiserver refuses it with 409 Conflict when anyone wrote the ConfigMap since
//   (https://github.com/kubernetes/community/blob/master/contributors/devel/sig-architecture/api-conventions.md#concurrency-control-and-consistency).
//   For records that only one instance may write: a second writer is seen, not overwritten.
import { setTimeout as sleep } from "node:timers/promises";
import { PatchStrategy, type CoreV1Api, type V1ConfigMap } from "@kubernetes/client-node";
import { PlugpoolError } from "../../domain/errors.ts";
import { createLock, type Lock } from "../../domain/lock.ts";
import { callBound, callOptions, statusOf, type CallBound } from "./api-errors.ts";
import { MANAGED_BY_LABEL } from "./power-off-pod.ts";
import type { RetrySettings } from "./reflector.ts";
import { stringMap } from "./wire.ts";

export interface ConfigMapRef {
  readonly namespace: string;
  readonly name: string;
}

/** Values by key: a string sets the key, null removes it. */
export type ConfigMapUpdate = Readonly<Record<string, string | null>>;

/**
 * Sets or removes keys of the ConfigMap's data, creating the ConfigMap with the keys being set when it does not
 * exist. Removing keys from a missing ConfigMap is success.
 */
export async function patchConfigMapData(core: CoreV1Api, ref: ConfigMapRef, data: ConfigMapUpdate, bound: CallBound): Promise<void> {
  const { namespace, name } = ref;
  const action = `writing ConfigMap ${namespace}/${name}`;
  const patch = (): Promise<unknown> =>
    core.patchNamespacedConfigMap({ namespace, name, body: { data } }, callOptions({ signal: bound.signal, contentType: PatchStrategy.MergePatch }));
  try {
    await patch();
    return;
  } catch (error) {
    if (statusOf(error) !== 404) throw bound.error(action, error);
  }
  const set = Object.fromEntries(Object.entries(data).filter((entry): entry is [string, string] => entry[1] !== null));
  if (Object.keys(set).length === 0) return;
  try {
    await core.createNamespacedConfigMap(
      { namespace, body: { metadata: { name, namespace, labels: { [MANAGED_BY_LABEL]: "plugpool" } }, data: set } },
      callOptions({ signal: bound.signal }),
    );
  } catch (error) {
    // Created meanwhile by another writer: patch the one that won.
    if (statusOf(error) !== 409) throw bound.error(action, error);
    try {
      await patch();
    } catch (again) {
      throw bound.error(action, again);
    }
  }
}

export interface ConfigMapWriterOptions {
  readonly writeTimeoutMs: number;
  /** Backoff between attempts of a background write. */
  readonly retry: RetrySettings;
  /** Each failed background attempt; it is retried. */
  readonly onError: (error: unknown) => void;
}

/** Writes of one ConfigMap, one request at a time, so that a later write of a key never lands before an earlier one. */
export interface ConfigMapWriter {
  /**
   * Writes the keys in the background, retrying with backoff until they land or a newer value of the same key
   * replaces them (for a versioned writer, also another writer's value).
   */
  later(data: ConfigMapUpdate): void;
  /**
   * Writes the keys once, after the request in flight, replacing what waits to be written for them. Calls made
   * while the same request is in flight share one request after it: the first contact with a few hundred devices
   * writes their identities in a few requests, not one each (each call still ends by its own bound).
   */
  now(data: ConfigMapUpdate, bound: CallBound): Promise<void>;
  /**
   * Writes what waits to be written for these keys once, after the request in flight; resolves at once when
   * nothing does. A failure leaves them to the background writes.
   */
  land(keys: readonly string[], bound: CallBound): Promise<void>;
  /** Resolves once every background write so far has landed (or the writer is stopped). */
  flushed(): Promise<void>;
  /** Ends the background writes; what has not landed yet is not written. */
  stop(): void;
}

export function createConfigMapWriter(core: CoreV1Api, ref: ConfigMapRef, options: ConfigMapWriterOptions): ConfigMapWriter {
  return createQueue(ref, options, async (data, bound) => {
    await patchConfigMapData(core, ref, data, bound);
    return [];
  });
}

export interface VersionedConfigMapWriterOptions extends ConfigMapWriterOptions {
  /**
   * Keys another writer changed since the version this writer's memory was based on, with their values now (null:
   * removed), found when a write met 409 Conflict. Their values stand: what this writer had not landed for those
   * keys yet is not written. The owner takes them into memory; called before the write is tried again.
   */
  readonly onConflict: (theirs: ConfigMapUpdate) => void;
}

/**
 * A ConfigMapWriter whose every write carries the resourceVersion its memory is based on: the one `load()` read,
 * then the one each landed write or conflict brought back. After a 409 Conflict it reads the ConfigMap again,
 * hands the keys another writer changed to `onConflict`, and tries again at the new version with the keys of the
 * write that the other writer left as they were; a key it changed keeps the other writer's value (a write that
 * must land, `now()`, then fails). A value this writer sent in a request whose answer never came (a timeout) may
 * have landed: found in the ConfigMap afterwards, it counts as this writer's own, not another's.
 */
export interface VersionedConfigMapWriter extends ConfigMapWriter {
  /** Reads the ConfigMap's data (none when it does not exist) and bases the writes that follow on it. */
  load(bound: CallBound): Promise<Readonly<Record<string, string>>>;
}

/** A write of the ConfigMap, as errors name it. */
function writing(ref: ConfigMapRef): string {
  return `writing ConfigMap ${ref.namespace}/${ref.name}`;
}

/** A versioned writer's memory of the ConfigMap and what it needs to write it. */
interface Versioned {
  readonly core: CoreV1Api;
  readonly ref: ConfigMapRef;
  readonly options: VersionedConfigMapWriterOptions;
  /** What the writes are based on; an undefined resourceVersion: the ConfigMap did not exist. */
  base: { resourceVersion?: string; data: Readonly<Record<string, string>> };
  /**
   * Values sent at the base's version whose answer never came. Of writes made at one version only one can change
   * the ConfigMap, and none once the version has moved on: a read or a landed write settles them.
   */
  doubts: ConfigMapUpdate[];
}

export function createVersionedConfigMapWriter(core: CoreV1Api, ref: ConfigMapRef, options: VersionedConfigMapWriterOptions): VersionedConfigMapWriter {
  const v: Versioned = { core, ref, options, base: { data: {} }, doubts: [] };
  return {
    ...createQueue(ref, options, (data, bound, drop) => writeVersioned(v, data, bound, drop)),
    async load(bound) {
      settle(v, await readConfigMap(v, bound));
      return v.base.data;
    },
  };
}

/** Bases the writes that follow on the ConfigMap as `answer` has it (none: it does not exist). */
function settle(v: Versioned, answer: V1ConfigMap | undefined): void {
  const resourceVersion = answer?.metadata?.resourceVersion;
  v.base = { ...(resourceVersion !== undefined && { resourceVersion }), data: stringMap(answer?.data) };
  v.doubts = [];
}

async function readConfigMap(v: Versioned, bound: CallBound): Promise<V1ConfigMap | undefined> {
  const { namespace, name } = v.ref;
  try {
    return await v.core.readNamespacedConfigMap({ namespace, name }, callOptions({ signal: bound.signal }));
  } catch (error) {
    if (statusOf(error) === 404) return undefined;
    throw bound.error(`reading ConfigMap ${namespace}/${name}`, error);
  }
}

/** One request: a create when the ConfigMap did not exist, else a patch at the base's version. */
async function send(v: Versioned, data: ConfigMapUpdate, bound: CallBound): Promise<V1ConfigMap | undefined> {
  const { namespace, name } = v.ref;
  const { resourceVersion } = v.base;
  if (resourceVersion !== undefined) {
    const body = { metadata: { resourceVersion }, data };
    return v.core.patchNamespacedConfigMap({ namespace, name, body }, callOptions({ signal: bound.signal, contentType: PatchStrategy.MergePatch }));
  }
  const set = Object.fromEntries(Object.entries(data).filter((entry): entry is [string, string] => entry[1] !== null));
  // Removing keys from a missing ConfigMap: nothing to do.
  if (Object.keys(set).length === 0) return undefined;
  const metadata = { name, namespace, labels: { [MANAGED_BY_LABEL]: "plugpool" } };
  return v.core.createNamespacedConfigMap({ namespace, body: { metadata, data: set } }, callOptions({ signal: bound.signal }));
}

/** The keys another writer changed between the base and `now`, with their values in `now`. */
function theirs(v: Versioned, now: V1ConfigMap | undefined): Map<string, string | null> {
  const { base, doubts } = v;
  const data = stringMap(now?.data);
  const changed = new Map<string, string | null>();
  for (const key of new Set([...Object.keys(base.data), ...Object.keys(data)])) {
    const value = data[key] ?? null;
    if (value === (base.data[key] ?? null)) continue;
    if (doubts.some((doubt) => doubt[key] === value)) continue;
    changed.set(key, value);
  }
  return changed;
}

/** The Write of a versioned writer: at the base's version, read again and retried after each conflict. */
async function writeVersioned(v: Versioned, data: ConfigMapUpdate, bound: CallBound, drop: (key: string) => void): Promise<readonly string[]> {
  const want = new Map(Object.entries(data));
  const lost: string[] = [];
  while (want.size > 0) {
    const sent = Object.fromEntries(want);
    try {
      const answer = await send(v, sent, bound);
      if (answer !== undefined) settle(v, answer);
      return lost;
    } catch (error) {
      // 409: a patch at a version that has moved on, or a create that another writer's create beat. 404: the
      // ConfigMap was deleted since the base was read. Either way memory is behind the ConfigMap.
      const status = statusOf(error);
      if (status !== 409 && !(status === 404 && v.base.resourceVersion !== undefined)) {
        if (status === undefined) v.doubts.push(sent);
        throw bound.error(writing(v.ref), error);
      }
    }
    const now = await readConfigMap(v, bound);
    const changed = theirs(v, now);
    settle(v, now);
    for (const [key, value] of changed) {
      drop(key);
      if (want.has(key) && want.get(key) !== value) lost.push(key);
      want.delete(key);
    }
    if (changed.size > 0) v.options.onConflict(Object.fromEntries(changed));
  }
  return lost;
}

/**
 * Writes `data` once, bounded by `bound`. `drop(key)` discards what waits to be written for a key whose value
 * another writer set meanwhile. Resolves with the keys of `data` left unwritten because of that.
 */
type Write = (data: ConfigMapUpdate, bound: CallBound, drop: (key: string) => void) => Promise<readonly string[]>;

/** A now() call: what it writes, its own bound, and how it is answered. */
interface Joiner {
  readonly data: ConfigMapUpdate;
  readonly bound: CallBound;
  readonly settle: (error?: Error) => void;
}

/** now() calls that share one request. */
interface Group {
  /** Aborts once every caller in the group has given up: the request is then no one's. */
  readonly signal: AbortSignal;
  join(joiner: Joiner): void;
  /** The callers still waiting for an answer. */
  live(): Joiner[];
  /** Answers a caller, once; later answers to it are ignored. */
  answer(joiner: Joiner, error?: Error): void;
  failAll(error: unknown): void;
}

/**
 * A caller whose bound ends is answered at once, by its bound: its keys are not sent if the request has not
 * started, and may land if it has (a caller treats such an end as a write that may have landed).
 */
function createGroup(action: string): Group {
  const waiting = new Map<Joiner, () => void>();
  const everyoneGone = new AbortController();
  const group: Group = {
    signal: everyoneGone.signal,
    join(joiner) {
      const onAbort = (): void => {
        group.answer(joiner, joiner.bound.error(action, joiner.bound.signal.reason));
        if (waiting.size === 0) everyoneGone.abort(joiner.bound.signal.reason);
      };
      waiting.set(joiner, onAbort);
      if (joiner.bound.signal.aborted) onAbort();
      else joiner.bound.signal.addEventListener("abort", onAbort, { once: true });
    },
    live: () => [...waiting.keys()],
    answer(joiner, error) {
      const onAbort = waiting.get(joiner);
      if (onAbort === undefined) return;
      waiting.delete(joiner);
      joiner.bound.signal.removeEventListener("abort", onAbort);
      joiner.settle(error);
    },
    failAll(error) {
      const failure = error instanceof Error ? error : new PlugpoolError("internal", `${action} failed`, { cause: error });
      for (const joiner of group.live()) group.answer(joiner, failure);
    },
  };
  return group;
}

/** One ConfigMap's writes: what waits to be written, and the lock that sends them one request at a time. */
interface Queue {
  readonly ref: ConfigMapRef;
  readonly options: ConfigMapWriterOptions;
  readonly write: Write;
  readonly lock: Lock;
  /** Values by key that wait to be written: the background writes', which now() replaces and land() takes. */
  readonly pending: Map<string, string | null>;
  readonly drop: (key: string) => void;
  /** Aborts the background writes and their waits. */
  readonly stopping: AbortController;
  /** The background writes while they run. */
  draining: Promise<void> | undefined;
  /** The now() calls waiting for their turn together; a call made while none waits starts one. */
  gathering: Group | undefined;
}

function createQueue(ref: ConfigMapRef, options: ConfigMapWriterOptions, write: Write): ConfigMapWriter {
  const pending = new Map<string, string | null>();
  const q: Queue = {
    ref,
    options,
    write,
    lock: createLock(),
    pending,
    drop: (key) => {
      pending.delete(key);
    },
    stopping: new AbortController(),
    draining: undefined,
    gathering: undefined,
  };
  return {
    later(data) {
      for (const [key, value] of Object.entries(data)) pending.set(key, value);
      kick(q);
    },
    now(data, bound) {
      return new Promise<void>((resolve, reject) => {
        const joiner: Joiner = { data, bound, settle: (error) => { if (error === undefined) resolve(); else reject(error); } };
        // A group every caller has left is about to end unsent: it takes no one new.
        if (q.gathering !== undefined && !q.gathering.signal.aborted) q.gathering.join(joiner);
        else startGroup(q, joiner);
      });
    },
    land(keys, bound) {
      if (!keys.some((key) => pending.has(key))) return Promise.resolve();
      return locked(q, bound, () => landPending(q, keys, bound));
    },
    async flushed() {
      while (q.draining !== undefined) await q.draining;
    },
    stop() {
      q.stopping.abort();
    },
  };
}

// A function, not the property: stop() may abort during any await.
const stopped = (q: Queue): boolean => q.stopping.signal.aborted;

/** Writes what waits for these keys (all when undefined) once. */
async function landPending(q: Queue, keys: readonly string[] | undefined, bound: CallBound): Promise<void> {
  // Taken inside the lock: a write made meanwhile by now() may have replaced some of them, or the request that
  // was in flight landed them.
  const batch = new Map([...q.pending].filter(([key]) => keys === undefined || keys.includes(key)));
  if (batch.size === 0) return;
  await q.write(Object.fromEntries(batch), bound, q.drop);
  for (const [key, value] of batch) if (q.pending.get(key) === value) q.pending.delete(key);
}

// Started again when it ends: a key set just as the last attempt finished would otherwise wait for the next one.
function kick(q: Queue): void {
  if (q.draining !== undefined || q.pending.size === 0 || stopped(q)) return;
  q.draining = drain(q).finally(() => {
    q.draining = undefined;
    kick(q);
  });
}

async function drain(q: Queue): Promise<void> {
  const { options, stopping } = q;
  let delayMs = options.retry.initialMs;
  while (q.pending.size > 0 && !stopped(q)) {
    try {
      await q.lock(() => landPending(q, undefined, callBound(options.writeTimeoutMs, stopping.signal)), stopping.signal);
      delayMs = options.retry.initialMs;
    } catch (error) {
      if (stopped(q)) return;
      options.onError(error);
      await sleep(delayMs, undefined, { signal: stopping.signal }).catch(() => undefined);
      delayMs = Math.min(delayMs * 2, options.retry.maxMs);
    }
  }
}

/** Runs `work` after the request in flight. */
async function locked(q: Queue, bound: CallBound, work: () => Promise<void>): Promise<void> {
  const turn = { started: false };
  try {
    await q.lock(async () => {
      turn.started = true;
      await work();
    }, bound.signal);
  } catch (error) {
    // The wait for the request in flight ended: the bound says why.
    if (!turn.started) throw bound.error(writing(q.ref), error);
    throw error;
  }
}

function startGroup(q: Queue, first: Joiner): void {
  const group = createGroup(writing(q.ref));
  group.join(first);
  q.gathering = group;
  q.lock(async () => {
    if (q.gathering === group) q.gathering = undefined;
    await writeGroup(q, group);
  }, group.signal).catch((error: unknown) => {
    if (q.gathering === group) q.gathering = undefined;
    // The wait for the request in flight ended: every caller had given up already.
    group.failAll(error);
  });
}

/** One request for the keys of every caller still waiting; each learns whether its own keys landed. */
async function writeGroup(q: Queue, group: Group): Promise<void> {
  const joiners = group.live();
  if (joiners.length === 0) return;
  // In call order, so a key two callers set ends with the later value, as two requests in turn would leave it.
  const data = Object.assign({}, ...joiners.map((j) => j.data)) as Record<string, string | null>;
  for (const key of Object.keys(data)) q.pending.delete(key);
  let lost: readonly string[];
  try {
    lost = await q.write(data, callBound(q.options.writeTimeoutMs, group.signal), q.drop);
  } catch (error) {
    group.failAll(error);
    return;
  }
  for (const joiner of joiners) {
    const mine = Object.keys(joiner.data).filter((key) => lost.includes(key));
    if (mine.length === 0) group.answer(joiner);
    else {
      const keys = mine.map((key) => `"${key}"`).join(", ");
      group.answer(joiner, new PlugpoolError("cluster-refused", `${writing(q.ref)} was refused: another writer changed ${keys} meanwhile, and its value stands`));
    }
  }
}
