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
import type { PowerRecords } from "../../domain/ports.ts";
import { callBound, DEFAULT_WRITE_TIMEOUT_MS } from "./api-errors.ts";
import { createVersionedConfigMapWriter, type ConfigMapRef, type ConfigMapUpdate } from "./configmap.ts";
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

export function createKubernetesPowerRecords(kc: KubeConfig, options: KubernetesPowerRecordsOptions): KubernetesPowerRecords {
  const core = kc.makeApiClient(CoreV1Api);
  const ref: ConfigMapRef = { namespace: options.namespace, name: POWER_RECORDS_CONFIGMAP };
  const writeTimeoutMs = options.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS;
  const onError = options.onError ?? (() => undefined);
  const keys = new Map<string, { readonly kind: Kind; readonly machine: string }>();
  for (const { name } of options.machines) {
    for (const kind of ["power-on", "quarantine", "device"] as const) keys.set(recordKey(kind, name), { kind, machine: name });
  }
  const powerOns = new Map<string, PowerOnRecord>();
  const quarantines = new Map<string, QuarantineRecord>();
  const identities = new Map<string, string>();
  const where = `ConfigMap ${ref.namespace}/${ref.name}`;
  const writer = createVersionedConfigMapWriter(core, ref, {
    writeTimeoutMs,
    retry: options.retry ?? defaultRetry,
    onError,
    onConflict: (theirs) => {
      takeTheirs(theirs);
      options.onConflict?.(Object.keys(theirs));
    },
  });

  const configured = (machine: string): boolean => keys.has(recordKey("power-on", machine));
  const ignoreUnconfigured = (machine: string, what: string): void => {
    onError(new PlugpoolError("internal", `not ${what} of machine "${machine}": it is not configured`));
  };
  const stored = (value: PowerOnRecord | QuarantineRecord | undefined): string | null =>
    value === undefined ? null : JSON.stringify(value);

  function take(key: string, json: string): void {
    const owner = keys.get(key);
    if (owner === undefined) {
      onError(new Error(`ignoring key "${key}" of ${where}: not a record of a configured machine`));
      return;
    }
    const value = parse(json);
    if (owner.kind === "device") {
      const id = value?.id;
      if (typeof id === "string" && id !== "") identities.set(owner.machine, id);
      else onError(new Error(`ignoring unreadable key "${key}" of ${where}`));
    } else if (owner.kind === "power-on") {
      const at = value?.at;
      const why = value?.why;
      if (isTime(at) && typeof why === "string") powerOns.set(owner.machine, { at, why });
      else onError(new Error(`ignoring unreadable key "${key}" of ${where}`));
    } else {
      const until = value?.until;
      const failures = value?.failures;
      if (isTime(until) && Number.isSafeInteger(failures) && (failures as number) >= 0) {
        quarantines.set(owner.machine, { until, failures: failures as number });
      } else {
        onError(new Error(`ignoring unreadable key "${key}" of ${where}`));
      }
    }
  }

  /** Another writer's values of these keys replace memory's: its view is newer. */
  function takeTheirs(theirs: ConfigMapUpdate): void {
    for (const [key, json] of Object.entries(theirs)) {
      const owner = keys.get(key);
      if (owner !== undefined) {
        if (owner.kind === "device") identities.delete(owner.machine);
        else if (owner.kind === "power-on") powerOns.delete(owner.machine);
        else quarantines.delete(owner.machine);
      }
      if (json !== null) take(key, json);
    }
  }

  return {
    async load(signal) {
      const data = await writer.load(callBound(writeTimeoutMs, signal));
      for (const [key, json] of Object.entries(data)) take(key, json);
    },

    powerOn: (machine) => powerOns.get(machine),

    async recordPowerOn(machine, value, call) {
      if (!configured(machine)) throw new PlugpoolError("internal", `not recording a power-on of machine "${machine}": it is not configured`);
      const key = recordKey("power-on", machine);
      const limits = callBound(writeTimeoutMs, call?.signal);
      const record: PowerOnRecord = { at: value.at, why: value.why };
      try {
        await writer.now({ [key]: JSON.stringify(record) }, limits);
      } catch (error) {
        // It may have landed all the same (a timeout, a cancel): the stored key goes back to what memory holds.
        writer.later({ [key]: stored(powerOns.get(machine)) });
        throw error;
      }
      powerOns.set(machine, record);
    },

    endPowerOn(machine) {
      if (!configured(machine)) {
        ignoreUnconfigured(machine, "ending a power-on");
        return;
      }
      powerOns.delete(machine);
      writer.later({ [recordKey("power-on", machine)]: null });
    },

    quarantine: (machine) => quarantines.get(machine),

    setQuarantine(machine, value) {
      if (!configured(machine)) {
        ignoreUnconfigured(machine, "quarantining");
        return;
      }
      const record = value === undefined ? undefined : { until: value.until, failures: value.failures };
      if (record === undefined) quarantines.delete(machine);
      else quarantines.set(machine, record);
      writer.later({ [recordKey("quarantine", machine)]: stored(record) });
    },

    deviceIdentity: (machine) => identities.get(machine),

    async recordDeviceIdentity(machine, id, call) {
      if (!configured(machine)) throw new PlugpoolError("internal", `not recording the device of machine "${machine}": it is not configured`);
      const key = recordKey("device", machine);
      const limits = callBound(writeTimeoutMs, call?.signal);
      try {
        await writer.now({ [key]: JSON.stringify({ id }) }, limits);
      } catch (error) {
        // It may have landed all the same: the stored key goes back to what memory holds.
        const known = identities.get(machine);
        writer.later({ [key]: known === undefined ? null : JSON.stringify({ id: known }) });
        throw error;
      }
      identities.set(machine, id);
    },

    stored(machine, call) {
      // Nothing of a machine that is not configured is ever written.
      if (!configured(machine)) return Promise.resolve();
      return writer.land([recordKey("power-on", machine), recordKey("quarantine", machine), recordKey("device", machine)], callBound(writeTimeoutMs, call?.signal));
    },

    flushed: () => writer.flushed(),
    stop: () => { writer.stop(); },
  };
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
