// The domain's PowerSwitch over every configured backend: a call goes to the backend of the machine's power
// control, with the address that backend parsed from the configuration.
import type { BackendProbe, BackendSwitch, PowerBackend } from "../../adapters/power-backend.ts";
import type { PlugReading, PowerControl } from "../../domain/model.ts";
import type { CallOptions, CutGuard, PowerSwitch, ReadOptions, SwitchOptions } from "../../domain/ports.ts";
import { BACKENDS } from "./backends.ts";

/** A control as the configuration resolved it: its backend's name and that backend's own address. */
export interface ResolvedControl {
  readonly backend: string;
  readonly address: unknown;
}

export interface RoutedPowerSwitch extends Required<PowerSwitch> {
  /** What `doctor` shows of the control. */
  probe(control: PowerControl, options?: CallOptions): Promise<BackendProbe>;
}

/**
 * One switch per backend in use, shared by all its controls, so that calls to one device wait for each other.
 * `controls` by PowerControl.key; a control not in it is a programming error. `timeoutsMs` by backend name; a
 * backend not in it has its own default.
 */
export function createPowerSwitch(
  controls: ReadonlyMap<string, ResolvedControl>,
  timeoutsMs: ReadonlyMap<string, number>,
  backends: readonly PowerBackend<unknown>[] = BACKENDS,
): RoutedPowerSwitch {
  const switches = new Map<string, BackendSwitch<unknown>>();
  const route = (control: PowerControl): { readonly to: BackendSwitch<unknown>; readonly address: unknown } => {
    const resolved = controls.get(control.key);
    const backend = backends.find((b) => b.name === resolved?.backend);
    if (resolved === undefined || backend === undefined) throw new Error(`no configured power control ${control.label}`);
    let to = switches.get(backend.name);
    if (to === undefined) {
      to = backend.create({ timeoutMs: timeoutsMs.get(backend.name) ?? backend.defaultTimeoutMs });
      switches.set(backend.name, to);
    }
    return { to, address: resolved.address };
  };
  return {
    read(control: PowerControl, options?: ReadOptions): Promise<PlugReading> {
      const { to, address } = route(control);
      return to.read(address, options);
    },
    turnOn(control: PowerControl, options: SwitchOptions): Promise<PlugReading> {
      const { to, address } = route(control);
      return to.turnOn(address, options);
    },
    turnOff(control: PowerControl, mayCut: CutGuard, options: SwitchOptions): Promise<PlugReading> {
      const { to, address } = route(control);
      return to.turnOff(address, mayCut, options);
    },
    shutdown(control: PowerControl, mayShutDown: CutGuard, options: SwitchOptions): Promise<void> {
      const { to, address } = route(control);
      if (to.shutdown === undefined) throw new Error(`${control.label} cannot shut the OS down`);
      return to.shutdown(address, mayShutDown, options);
    },
    probe(control: PowerControl, options?: CallOptions): Promise<BackendProbe> {
      const { to, address } = route(control);
      return to.probe(address, options);
    },
  };
}
