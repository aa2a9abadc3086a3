// What a machine's plug readings add up to: time powered on and off, and energy drawn. Plain arithmetic over
// timestamped readings; the caller passes the time (from the injected clock).

/**
 * Two readings further apart than this bound nothing in between: the span is not counted at all (neither on
 * nor off, no energy), since no reading says what happened in it. Closer readings are interpolated: missed
 * reads of a few Refresh loops (cluster-autoscaler's loop is 10 s) are spanned, never counted as zero draw.
 */
export const MAX_READING_GAP_MS = 600_000;

/** Running totals of one machine, from the readings plugpool itself made since it started. */
export interface EnergyMeter {
  /** The last relay state read and when; undefined until the first reading, or after an unconfirmed switch. */
  relay: { readonly at: number; readonly on: boolean } | undefined;
  /** The last draw known and when, in watts (a relay read off draws 0 W through it, whatever the sensor says). */
  draw: { readonly at: number; readonly watts: number } | undefined;
  onMs: number;
  offMs: number;
  /** Energy drawn, in watt-milliseconds (divide by 3.6e9 for kWh). */
  usedWattMs: number;
}

export function newMeter(): EnergyMeter {
  return { relay: undefined, draw: undefined, onMs: 0, offMs: 0, usedWattMs: 0 };
}

/** Watt-milliseconds per kilowatt-hour. */
export const WATT_MS_PER_KWH = 3_600_000_000;

/**
 * A reading at `at`. The span since the previous reading counts as on when both read on, as off when both read
 * off, and half each when they differ (the change happened at an unknown moment in between). Energy is the
 * trapezoid between the two draws. A relay on whose sensor gave no value adds no draw point: the next one that
 * does closes the span from the last known draw.
 */
export function observe(meter: EnergyMeter, at: number, reading: { readonly on: boolean; readonly watts?: number | undefined }): void {
  const last = meter.relay;
  const span = last === undefined ? 0 : at - last.at;
  if (last !== undefined && span > 0 && span <= MAX_READING_GAP_MS) {
    const onShare = (Number(last.on) + Number(reading.on)) / 2;
    meter.onMs += span * onShare;
    meter.offMs += span * (1 - onShare);
  }
  // A clock that stepped back keeps the older point: nothing is counted twice.
  if (last === undefined || span >= 0) meter.relay = { at, on: reading.on };
  const watts = reading.on ? reading.watts : 0;
  if (watts === undefined || !Number.isFinite(watts)) return;
  const before = meter.draw;
  const drawSpan = before === undefined ? 0 : at - before.at;
  if (before !== undefined && drawSpan > 0 && drawSpan <= MAX_READING_GAP_MS) {
    meter.usedWattMs += (drawSpan * (before.watts + Math.max(0, watts))) / 2;
  }
  if (before === undefined || drawSpan >= 0) meter.draw = { at, watts: Math.max(0, watts) };
}

/**
 * plugpool switched the relay and the plug answered with `reading` at `at`: the state before held until then
 * (the answer is the moment of the change, give or take one request), the new one starts there.
 */
export function switched(meter: EnergyMeter, at: number, reading: { readonly on: boolean; readonly watts?: number | undefined }): void {
  const last = meter.relay;
  if (last !== undefined) observe(meter, at, { on: last.on, ...(meter.draw && { watts: meter.draw.watts }) });
  observe(meter, at, reading);
}

/**
 * A switch command whose outcome is unknown was sent at `at`: what was known holds until then, and nothing is
 * counted until the next reading.
 */
export function interrupted(meter: EnergyMeter, at: number): void {
  const last = meter.relay;
  if (last !== undefined) observe(meter, at, { on: last.on, ...(meter.draw && { watts: meter.draw.watts }) });
  meter.relay = undefined;
  meter.draw = undefined;
}
