// Loaded into a plugpool process with `node --import` by the test site (plugpools.ts): its wall clock (Date) runs
// off by the number of milliseconds written in the file PLUGPOOL_TEST_CLOCK_FILE names, re-read every 100 ms, as a
// host's clock is when NTP steps it or someone sets it by hand. The monotonic clock (performance.now) is untouched,
// as a step leaves CLOCK_MONOTONIC. Only this process sees the step: the apiserver's clock, the Node conditions it
// stamps and the TLS checks made by OpenSSL keep the true time, as they would on another host.
import { readFileSync } from "node:fs";

const file = process.env.PLUGPOOL_TEST_CLOCK_FILE;
const RealDate = Date;
let offset = 0;

function readOffset(): void {
  if (file === undefined) return;
  try {
    const value = Number(readFileSync(file, "utf8").trim());
    if (Number.isFinite(value)) offset = value;
  } catch {
    // No file yet: no step.
  }
}

function steppedNow(): number {
  return RealDate.now() + offset;
}

class SteppedDate extends RealDate {
  constructor(...args: ConstructorParameters<DateConstructor> | []) {
    if (args.length === 0) super(steppedNow());
    else super(...args);
  }

  static override now(): number {
    return steppedNow();
  }
}

readOffset();
setInterval(readOffset, 100).unref();
globalThis.Date = SteppedDate as DateConstructor;
