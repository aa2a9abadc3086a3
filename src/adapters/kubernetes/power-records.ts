// plugpool's records of its own power actions, kept in ConfigMap plugpool-records in the power-off namespace so
// that they survive a restart: `power-on.<machine>` holds a power-on plugpool made, `{"at":<ms>,"why":"..."}`;
// `quarantine.<machine>` a machine's quarantine, `{"until":<ms>,"failures":<n>}`; `device.<machine>` the identity
// learned of its power device, `{"id":"<identity>"}`. Read once at start, then answered from memory; each change
// is written as a merge patch of its one key at the resourceVersion memory is based on, so a record another
// plugpool wrote meanwhile is taken in, never overwritten (see createVersionedConfigMapWriter).
import { createHash } from "node:crypto";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { PlugpoolError } from "../../domain/errors.ts";
import type { Machine, PowerOnRecord, QuarantineRecord } from "../../domain/model.ts";
import type { CallOptions, PowerRecords } from "../../domain/ports.ts";
import { callBound, DEFAULT_WRITE_TIMEOUT_MS } from "./api-errors.ts";
import { createVersionedConfigMapWriter, type ConfigMapRef, type ConfigMapUpdate, type VersionedConfigMapWriter } from "./configmap.ts";
import { defaultRetry, type RetrySettings } from "./reflector.ts";
import { record } from "./wire.ts";

export const POWER_RECORDS_CONFIGMAP = "plugpool-records";

export interface KubernetesPowerRecordsOptions {
  /** The power-off namespace, where the ConfigMap lives. */
  readonly namespace: string;
  /** Only these machines' records are read and written. */
  readonly machines: readonly Machine[];
  /** Longest one request may take (default DEFAULT_WRITE_TIMEOUT_MS). */
  readonly writeTimeoutMs?: number;
  /** Backoff between attempts of a background write (default 0.5 s doubling to 30 s). */
  readonly retry?: RetrySettings;
  /** Each ignored key at load and each failed background write (which is retried). */
  readonly onError?: (error: unknown) => void;
  /**
   * Another writer changed these keys since this store last read or wrote the ConfigMap: another plugpool acted,
   * which a working Lease never lets happen. Their values were taken into memory.
   */
  readonly onConflict?: (keys: readonly string[]) => void;
}

export interface KubernetesPowerRecords extends PowerRecords {
  /** Reads the stored records into memory (a missing ConfigMap holds none). Called once, before any other call. */
  load(signal?: AbortSignal): Promise<void>;
  /** Resolves once every background write so far has landed (or the store is stopped). */
  flushed(): Promise<void>;
  /** Ends the background writes; what has not landed yet is not written. */
  stop(): void;
}

type Kind = "power-on" | "quarantine" | "device";

/** Longest ConfigMap key the apiserver accepts. */
const maxKeyLength = 253;

/**
 * `<kind>.<machine>`. A machine name leaves too little room only near Kubernetes' own limit of 253 characters;
 * such a name is shortened and a hash of the whole added, so distinct machines never share a key.
 */
export function recordKey(kind: Kind, machine: string): string {
  const key = `${kind}.${machine}`;
  if (key.length <= maxKeyLength) return key;
  const hash = createHash("sha256").update(machine).digest("hex").slice(0, 10);
  return `${key.slice(0, maxKeyLength - hash.length - 1)}-${hash}`;
}

/** What a key holds: which record of which machine. */
interface Owner {
  readonly kind: Kind;
  readonly machine: string;
}

/** The records in memory, by machine, and the keys of the configured machines' records. */
interface Memory {
  /** Each configured machine's keys, with the record each holds. */
  readonly keys: ReadonlyMap<string, Owner>;
  readonly powerOns: Map<string, PowerOnRecord>;
  readonly quarantines: Map<string, QuarantineRecord>;
  readonly identities: Map<string, string>;
  /** The ConfigMap, as messages name it. */
  readonly where: string;
  readonly onError: (error: unknown) => void;
}

/** The store: its memory, and the writer that keeps the ConfigMap in step with it. */
interface Store {
  readonly memory: Memory;
  readonly writer: VersionedConfigMapWriter;
  readonly writeTimeoutMs: number;
}

export function createKubernetesPowerRecords(kc: KubeConfig, options: KubernetesPowerRecordsOptions): KubernetesPowerRecords {
  const core = kc.makeApiClient(CoreV1Api);
  const ref: ConfigMapRef = { namespace: options.namespace, name: POWER_RECORDS_CONFIGMAP };
  const writeTimeoutMs = options.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS;
  const onError = options.onError ?? (() => undefined);
  const memory: Memory = {
    keys: recordKeys(options.machines),
    powerOns: new Map(),
    quarantines: new Map(),
    identities: new Map(),
    where: `ConfigMap ${ref.namespace}/${ref.name}`,
    onError,
  };
  const writer = createVersionedConfigMapWriter(core, ref, {
    writeTimeoutMs,
    retry: options.retry ?? defaultRetry,
    onError,
    onConflict: (theirs) => {
      takeTheirs(memory, theirs);
      options.onConflict?.(Object.keys(theirs));
    },
  });
  const store: Store = { memory, writer, writeTimeoutMs };
  return {
    async load(signal) {
      const data = await writer.load(callBound(writeTimeoutMs, signal));
      for (const [key, json] of Object.entries(data)) take(memory, key, json);
    },
    powerOn: (machine) => memory.powerOns.get(machine),
    recordPowerOn: (machine, value, call) => recordPowerOn(store, machine, value, call),
    endPowerOn: (machine) => {
      endPowerOn(store, machine);
    },
    quarantine: (machine) => memory.quarantines.get(machine),
    setQuarantine: (machine, value) => {
      setQuarantine(store, machine, value);
    },
    deviceIdentity: (machine) => memory.identities.get(machine),
    recordDeviceIdentity: (machine, id, call) => recordDeviceIdentity(store, machine, id, call),
    stored: (machine, call) => stored(store, machine, call),
    flushed: () => writer.flushed(),
    stop: () => { writer.stop(); },
  };
}

/** The keys of the machines' records, with the record each holds. */
function recordKeys(machines: readonly Machine[]): Map<string, Owner> {
  const keys = new Map<string, Owner>();
  for (const { name } of machines) {
    for (const kind of ["power-on", "quarantine", "device"] as const) keys.set(recordKey(kind, name), { kind, machine: name });
  }
  return keys;
}

const configured = (memory: Memory, machine: string): boolean => memory.keys.has(recordKey("power-on", machine));

const ignoreUnconfigured = (memory: Memory, machine: string, what: string): void => {
  memory.onError(new PlugpoolError("internal", `not ${what} of machine "${machine}": it is not configured`));
};

const storedValue = (value: PowerOnRecord | QuarantineRecord | undefined): string | null => (value === undefined ? null : JSON.stringify(value));

/** Takes a stored key into memory; a key that is no configured machine's record, or unreadable, is told and ignored. */
function take(memory: Memory, key: string, json: string): void {
  const { where, onError } = memory;
  const owner = memory.keys.get(key);
  if (owner === undefined) {
    onError(new Error(`ignoring key "${key}" of ${where}: not a record of a configured machine`));
    return;
  }
  const value = parse(json);
  if (owner.kind === "device") {
    const id = value?.id;
    if (typeof id === "string" && id !== "") memory.identities.set(owner.machine, id);
    else onError(new Error(`ignoring unreadable key "${key}" of ${where}`));
  } else if (owner.kind === "power-on") {
    const at = value?.at;
    const why = value?.why;
    if (isTime(at) && typeof why === "string") memory.powerOns.set(owner.machine, { at, why });
    else onError(new Error(`ignoring unreadable key "${key}" of ${where}`));
  } else {
    const until = value?.until;
    const failures = value?.failures;
    if (isTime(until) && Number.isSafeInteger(failures) && (failures as number) >= 0) {
      memory.quarantines.set(owner.machine, { until, failures: failures as number });
    } else {
      onError(new Error(`ignoring unreadable key "${key}" of ${where}`));
    }
  }
}

/** Another writer's values of these keys replace memory's: its view is newer. */
function takeTheirs(memory: Memory, theirs: ConfigMapUpdate): void {
  for (const [key, json] of Object.entries(theirs)) {
    const owner = memory.keys.get(key);
    if (owner !== undefined) {
      if (owner.kind === "device") memory.identities.delete(owner.machine);
      else if (owner.kind === "power-on") memory.powerOns.delete(owner.machine);
      else memory.quarantines.delete(owner.machine);
    }
    if (json !== null) take(memory, key, json);
  }
}

async function recordPowerOn(store: Store, machine: string, value: PowerOnRecord, call: CallOptions | undefined): Promise<void> {
  const { memory, writer } = store;
  if (!configured(memory, machine)) throw new PlugpoolError("internal", `not recording a power-on of machine "${machine}": it is not configured`);
  const key = recordKey("power-on", machine);
  const limits = callBound(store.writeTimeoutMs, call?.signal);
  const record: PowerOnRecord = { at: value.at, why: value.why };
  try {
    await writer.now({ [key]: JSON.stringify(record) }, limits);
  } catch (error) {
    // It may have landed all the same (a timeout, a cancel): the stored key goes back to what memory holds.
    writer.later({ [key]: storedValue(memory.powerOns.get(machine)) });
    throw error;
  }
  memory.powerOns.set(machine, record);
}

function endPowerOn(store: Store, machine: string): void {
  const { memory } = store;
  if (!configured(memory, machine)) {
    ignoreUnconfigured(memory, machine, "ending a power-on");
    return;
  }
  memory.powerOns.delete(machine);
  store.writer.later({ [recordKey("power-on", machine)]: null });
}

function setQuarantine(store: Store, machine: string, value: QuarantineRecord | undefined): void {
  const { memory } = store;
  if (!configured(memory, machine)) {
    ignoreUnconfigured(memory, machine, "quarantining");
    return;
  }
  const record = value === undefined ? undefined : { until: value.until, failures: value.failures };
  if (record === undefined) memory.quarantines.delete(machine);
  else memory.quarantines.set(machine, record);
  store.writer.later({ [recordKey("quarantine", machine)]: storedValue(record) });
}

async function recordDeviceIdentity(store: Store, machine: string, id: string, call: CallOptions | undefined): Promise<void> {
  const { memory, writer } = store;
  if (!configured(memory, machine)) throw new PlugpoolError("internal", `not recording the device of machine "${machine}": it is not configured`);
  const key = recordKey("device", machine);
  const limits = callBound(store.writeTimeoutMs, call?.signal);
  try {
    await writer.now({ [key]: JSON.stringify({ id }) }, limits);
  } catch (error) {
    // It may have landed all the same: the stored key goes back to what memory holds.
    const known = memory.identities.get(machine);
    writer.later({ [key]: known === undefined ? null : JSON.stringify({ id: known }) });
    throw error;
  }
  memory.identities.set(machine, id);
}

function stored(store: Store, machine: string, call: CallOptions | undefined): Promise<void> {
  // Nothing of a machine that is not configured is ever written.
  if (!configured(store.memory, machine)) return Promise.resolve();
  const keys = [recordKey("power-on", machine), recordKey("quarantine", machine), recordKey("device", machine)];
  return store.writer.land(keys, callBound(store.writeTimeoutMs, call?.signal));
}

function parse(json: string): Readonly<Record<string, unknown>> | undefined {
  try {
    return record(JSON.parse(json));
  } catch {
    return undefined;
  }
}

function isTime(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}
