// The relays (switch entities) of one emulated device, their power sensors and what they power.
// Behaviour follows ESPHome's switch and gpio switch components: restore modes, deferred actions, reboots.

/** ESPHome `switch: restore_mode:` values. The ESPHome default is ALWAYS_OFF. */
export type RestoreMode =
  | "ALWAYS_OFF"
  | "ALWAYS_ON"
  | "RESTORE_DEFAULT_OFF"
  | "RESTORE_DEFAULT_ON"
  | "RESTORE_INVERTED_DEFAULT_OFF"
  | "RESTORE_INVERTED_DEFAULT_ON"
  | "DISABLED";

export interface SwitchConfig {
  /** The entity name as configured (`name:`), e.g. "Relay" or "Outlet 2". */
  readonly name: string;
  readonly restoreMode?: RestoreMode;
  /** Name of a power sensor entity measuring this relay's outlet. */
  readonly powerSensor?: string;
  /** Draw in watts while on and no machine is attached (default 25). */
  readonly watts?: number;
}

/** Something plugged into a relay's outlet; the e2e machine simulator implements this. */
export interface AttachedMachine {
  /** Called on every change of the relay output (after the switch delay), with the new state. */
  powerChanged?(on: boolean): void;
  /** Present draw in watts; asked only while the relay is on. */
  watts(): number;
}

export interface Relay {
  readonly config: SwitchConfig;
  on: boolean;
  /** The state a restore mode restores from (RTC RAM or flash); undefined when nothing was saved. */
  saved: boolean | undefined;
  machine: AttachedMachine | undefined;
}

/** What `restore_mode` gives at boot, from the saved state (DISABLED counts as OFF on a GPIO switch). */
export function bootState(mode: RestoreMode, saved: boolean | undefined): boolean {
  switch (mode) {
    case "ALWAYS_OFF":
    case "DISABLED":
      return false;
    case "ALWAYS_ON":
      return true;
    case "RESTORE_DEFAULT_OFF":
      return saved ?? false;
    case "RESTORE_DEFAULT_ON":
      return saved ?? true;
    case "RESTORE_INVERTED_DEFAULT_OFF":
      return saved === undefined ? false : !saved;
    case "RESTORE_INVERTED_DEFAULT_ON":
      return saved === undefined ? true : !saved;
  }
}

export interface RelayBank {
  readonly relays: readonly Relay[];
  get(name: string): Relay;
  /** Publishes a new relay state: output, saved state and the attached machine follow. */
  set(relay: Relay, on: boolean): void;
  /** Queues an action the way web_server defers it to the main loop: applied `delayMs` later. */
  defer(relay: Relay, action: "turn_on" | "turn_off" | "toggle", delayMs: number): void;
  /** Present draw of a relay's outlet in watts (0 while off). */
  watts(relay: Relay): number;
  /** Flaps: every `everyMs`, or (undefined) straight after each applied action. Undefined `relays` stops it. */
  flap(relays: readonly Relay[] | undefined, everyMs?: number): void;
  /** A reboot: pending actions are lost, outputs drop (GPIO reset), then restore_mode applies. */
  reboot(loseSavedState: boolean): void;
  stop(): void;
}

export function createRelayBank(configs: readonly SwitchConfig[]): RelayBank {
  const relays: Relay[] = configs.map((config) => ({ config, on: false, saved: undefined, machine: undefined }));
  const pending = new Set<NodeJS.Timeout>();
  let flapTimer: NodeJS.Timeout | undefined;
  let revertAfterAction = new Set<Relay>();

  function output(relay: Relay, on: boolean): void {
    if (relay.on === on) return; // publish_state deduplicates
    relay.on = on;
    relay.machine?.powerChanged?.(on);
  }

  function set(relay: Relay, on: boolean): void {
    output(relay, on);
    relay.saved = on;
  }

  for (const relay of relays) set(relay, bootState(relay.config.restoreMode ?? "ALWAYS_OFF", undefined));

  return {
    relays,
    get(name) {
      const relay = relays.find((r) => r.config.name === name);
      if (!relay) throw new Error(`emulated plug has no switch named "${name}"`);
      return relay;
    },
    set,
    defer(relay, action, delayMs) {
      const timer = setTimeout(() => {
        pending.delete(timer);
        const target = action === "toggle" ? !relay.on : action === "turn_on";
        set(relay, target);
        if (revertAfterAction.has(relay)) set(relay, !target);
      }, delayMs);
      pending.add(timer);
    },
    watts(relay) {
      if (!relay.on) return 0;
      return relay.machine ? relay.machine.watts() : (relay.config.watts ?? 25);
    },
    flap(targets, everyMs) {
      clearInterval(flapTimer);
      flapTimer = undefined;
      revertAfterAction = new Set();
      if (!targets) return;
      if (everyMs === undefined) {
        revertAfterAction = new Set(targets);
        return;
      }
      flapTimer = setInterval(() => {
        for (const relay of targets) set(relay, !relay.on);
      }, everyMs);
    },
    reboot(loseSavedState) {
      for (const timer of pending) clearTimeout(timer);
      pending.clear();
      for (const relay of relays) {
        if (loseSavedState) relay.saved = undefined;
        output(relay, false);
        set(relay, bootState(relay.config.restoreMode ?? "ALWAYS_OFF", relay.saved));
      }
    },
    stop() {
      for (const timer of pending) clearTimeout(timer);
      pending.clear();
      clearInterval(flapTimer);
    },
  };
}
