import type { PowerOnRecord, PowerRecords, QuarantineRecord } from "../../../src/domain/index.ts";
import { PlugpoolError } from "../../../src/domain/index.ts";

/**
 * plugpool's records with real state that outlives a pool (a restart builds a new pool over the same records).
 * `recordPowerOn` can be made to fail; every write is passed to `onWrite` at the moment it is made. Ends and
 * quarantines are background writes: they land at once unless `stallWrites` holds them back, and `crash` loses
 * those still out, leaving what a restart reads from the cluster.
 */
export class FakeRecords implements PowerRecords {
  readonly #powerOns = new Map<string, PowerOnRecord>();
  readonly #quarantines = new Map<string, QuarantineRecord>();
  readonly #identities = new Map<string, string>();
  /** As stored on the cluster. */
  readonly #storedPowerOns = new Map<string, PowerOnRecord>();
  readonly #storedQuarantines = new Map<string, QuarantineRecord>();
  /** Background writes not landed yet, by machine: each lands its value when called. */
  readonly #pending = new Map<string, Map<"power-on" | "quarantine", () => void>>();
  #stalled = false;
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
    // Written now, it replaces an end still out.
    this.#pending.get(machine)?.delete("power-on");
    if (this.#pending.get(machine)?.size === 0) this.#pending.delete(machine);
    this.#powerOns.set(machine, record);
    this.#storedPowerOns.set(machine, record);
  }

  /** A record left by an earlier run of plugpool. */
  seed(machine: string, record: PowerOnRecord): void {
    this.#powerOns.set(machine, record);
    this.#storedPowerOns.set(machine, record);
  }

  endPowerOn(machine: string): void {
    this.onWrite?.("endPowerOn", machine);
    this.#powerOns.delete(machine);
    this.#later(machine, "power-on", () => this.#storedPowerOns.delete(machine));
  }

  quarantine(machine: string): QuarantineRecord | undefined {
    return this.#quarantines.get(machine);
  }

  setQuarantine(machine: string, record: QuarantineRecord | undefined): void {
    if (record === undefined) this.#quarantines.delete(machine);
    else this.#quarantines.set(machine, record);
    this.#later(machine, "quarantine", () => {
      if (record === undefined) this.#storedQuarantines.delete(machine);
      else this.#storedQuarantines.set(machine, record);
    });
  }

  async stored(machine: string): Promise<void> {
    await Promise.resolve();
    if (!this.#pending.has(machine)) return;
    if (this.#stalled) throw new PlugpoolError("cluster-refused", `storing the records of ${machine}: the apiserver said no`);
    this.#land(machine);
  }

  /** Background writes stay out until `resumeWrites` (the apiserver refuses them). */
  stallWrites(): void {
    this.#stalled = true;
  }

  /** Background writes land again, those held back first. */
  resumeWrites(): void {
    this.#stalled = false;
    for (const machine of [...this.#pending.keys()]) this.#land(machine);
  }

  /** plugpool is killed: background writes still out are lost, and what it held is what the cluster stores. */
  crash(): void {
    this.#pending.clear();
    this.#powerOns.clear();
    for (const [machine, record] of this.#storedPowerOns) this.#powerOns.set(machine, record);
    this.#quarantines.clear();
    for (const [machine, record] of this.#storedQuarantines) this.#quarantines.set(machine, record);
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

  #later(machine: string, key: "power-on" | "quarantine", write: () => void): void {
    if (!this.#stalled) {
      write();
      return;
    }
    const writes = this.#pending.get(machine) ?? new Map<"power-on" | "quarantine", () => void>();
    writes.set(key, write);
    this.#pending.set(machine, writes);
  }

  #land(machine: string): void {
    for (const write of this.#pending.get(machine)?.values() ?? []) write();
    this.#pending.delete(machine);
  }
}
