import type { PowerOnRecord, PowerRecords, QuarantineRecord } from "../../src/domain/index.ts";
import { PlugpoolError } from "../../src/domain/index.ts";

/**
 * plugpool's records with real state that outlives a pool (a restart builds a new pool over the same records).
 * `recordPowerOn` can be made to fail; every write is passed to `onWrite` at the moment it is made.
 */
export class FakeRecords implements PowerRecords {
  readonly #powerOns = new Map<string, PowerOnRecord>();
  readonly #quarantines = new Map<string, QuarantineRecord>();
  readonly #identities = new Map<string, string>();
  #failNext = 0;
  #failIdentities = 0;
  onWrite: ((op: "recordPowerOn" | "endPowerOn", machine: string) => void) | undefined;

  powerOn(machine: string): PowerOnRecord | undefined {
    return this.#powerOns.get(machine);
  }

  async recordPowerOn(machine: string, record: PowerOnRecord): Promise<void> {
    this.onWrite?.("recordPowerOn", machine);
    await Promise.resolve();
    if (this.#failNext > 0) {
      this.#failNext -= 1;
      throw new PlugpoolError("cluster-refused", `recording the power-on of ${machine}: the apiserver said no`);
    }
    this.#powerOns.set(machine, record);
  }

  /** A record left by an earlier run of plugpool. */
  seed(machine: string, record: PowerOnRecord): void {
    this.#powerOns.set(machine, record);
  }

  endPowerOn(machine: string): void {
    this.onWrite?.("endPowerOn", machine);
    this.#powerOns.delete(machine);
  }

  quarantine(machine: string): QuarantineRecord | undefined {
    return this.#quarantines.get(machine);
  }

  setQuarantine(machine: string, record: QuarantineRecord | undefined): void {
    if (record === undefined) this.#quarantines.delete(machine);
    else this.#quarantines.set(machine, record);
  }

  deviceIdentity(machine: string): string | undefined {
    return this.#identities.get(machine);
  }

  async recordDeviceIdentity(machine: string, id: string): Promise<void> {
    await Promise.resolve();
    if (this.#failIdentities > 0) {
      this.#failIdentities -= 1;
      throw new PlugpoolError("cluster-refused", `recording the device identity of ${machine}: the apiserver said no`);
    }
    this.#identities.set(machine, id);
  }

  /** A device identity learned by an earlier run of plugpool. */
  seedDeviceIdentity(machine: string, id: string): void {
    this.#identities.set(machine, id);
  }

  /** The next `n` device identities fail to be stored. */
  failNextIdentities(n = 1): void {
    this.#failIdentities += n;
  }

  /** The next `n` power-on records fail. */
  failNext(n = 1): void {
    this.#failNext += n;
  }

  clearFaults(): void {
    this.#failNext = 0;
    this.#failIdentities = 0;
  }
}
