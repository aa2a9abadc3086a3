// What a test does to a Home Assistant, the real one or the emulator, besides what plugpool does through its
// REST API: the entities it has, and changes made behind plugpool's back.

/** Names are object ids ([a-z0-9_]). */
export interface HomeAssistantSetup {
  /** Each name `n` gives `input_boolean.n` (off) and `switch.n`, which follows it. */
  readonly switches: readonly string[];
  /**
   * Each name `n` gives `input_boolean.n` (off) and `switch.n`, an optimistic switch that switches it: its state is
   * what it was last asked (`assumed_state`), whatever the helper does afterwards.
   */
  readonly assumed?: readonly string[];
  /** Each name `s` gives `input_number.s` and `sensor.s` (in W), starting at the value given. */
  readonly sensors?: Readonly<Record<string, number>>;
}

export interface HomeAssistantBackstage {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  /** A long-lived access token for plugpool's user. */
  readonly token: string;
  /** Switches `input_boolean.name`, and so `switch.name`, as a person or an automation would. */
  setSwitch(name: string, on: boolean): Promise<void>;
  /** Sets `input_number.name`, and so `sensor.name`. */
  setWatts(name: string, watts: number): Promise<void>;
  /** Makes `switch.name` or `sensor.name` unavailable (its device unreachable), or available again. */
  setAvailable(name: string, available: boolean): Promise<void>;
  stop(): Promise<void>;
}
