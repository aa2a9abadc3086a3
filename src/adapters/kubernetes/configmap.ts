// Writing keys of plugpool's own ConfigMaps. A JSON merge patch of `data` changes only the keys it names, so
// writers of different keys never conflict and nothing has to be read first.
import { setTimeout as sleep } from "node:timers/promises";
import { PatchStrategy, type CoreV1Api } from "@kubernetes/client-node";
import { createLock } from "../../domain/lock.ts";
import { callBound, callOptions, statusOf, type CallBound } from "./api-errors.ts";
import { MANAGED_BY_LABEL } from "./power-off-pod.ts";
import type { RetrySettings } from "./reflector.ts";

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
   * replaces them.
   */
  later(data: ConfigMapUpdate): void;
  /** Writes the keys once, after the request in flight, replacing what waits to be written for them. */
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
  const lock = createLock();
  const pending = new Map<string, string | null>();
  const stopping = new AbortController();
  let draining: Promise<void> | undefined;

  // A function, not the property: stop() may abort during any await below.
  const stopped = (): boolean => stopping.signal.aborted;

  async function drain(): Promise<void> {
    let delayMs = options.retry.initialMs;
    while (pending.size > 0 && !stopped()) {
      try {
        await lock(async () => {
          // Taken inside the lock: a write made meanwhile by now() may have replaced some of them.
          const batch = new Map(pending);
          if (batch.size === 0) return;
          await patchConfigMapData(core, ref, Object.fromEntries(batch), callBound(options.writeTimeoutMs, stopping.signal));
          for (const [key, value] of batch) if (pending.get(key) === value) pending.delete(key);
        }, stopping.signal);
        delayMs = options.retry.initialMs;
      } catch (error) {
        if (stopped()) return;
        options.onError(error);
        await sleep(delayMs, undefined, { signal: stopping.signal }).catch(() => undefined);
        delayMs = Math.min(delayMs * 2, options.retry.maxMs);
      }
    }
  }

  /** Runs `write` after the request in flight. */
  async function locked(bound: CallBound, write: () => Promise<void>): Promise<void> {
    const turn = { started: false };
    try {
      await lock(async () => {
        turn.started = true;
        await write();
      }, bound.signal);
    } catch (error) {
      // The wait for the request in flight ended: the bound says why.
      if (!turn.started) throw bound.error(`writing ConfigMap ${ref.namespace}/${ref.name}`, error);
      throw error;
    }
  }

  // Started again when it ends: a key set just as the last attempt finished would otherwise wait for the next one.
  function kick(): void {
    if (draining !== undefined || pending.size === 0 || stopped()) return;
    draining = drain().finally(() => {
      draining = undefined;
      kick();
    });
  }

  return {
    later(data) {
      for (const [key, value] of Object.entries(data)) pending.set(key, value);
      kick();
    },
    now(data, bound) {
      return locked(bound, async () => {
        for (const key of Object.keys(data)) pending.delete(key);
        await patchConfigMapData(core, ref, data, bound);
      });
    },
    land(keys, bound) {
      if (!keys.some((key) => pending.has(key))) return Promise.resolve();
      return locked(bound, async () => {
        // Taken inside the lock: the request that was in flight may have landed them.
        const batch = new Map(keys.flatMap((key) => (pending.has(key) ? [[key, pending.get(key) ?? null] as const] : [])));
        if (batch.size === 0) return;
        await patchConfigMapData(core, ref, Object.fromEntries(batch), bound);
        for (const [key, value] of batch) if (pending.get(key) === value) pending.delete(key);
      });
    },
    async flushed() {
      while (draining !== undefined) await draining;
    },
    stop() {
      stopping.abort();
    },
  };
}
