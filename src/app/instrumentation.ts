import type { Interceptor } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Machine, PlugReading, PowerControl, PowerSwitch } from "../domain/index.ts";
import { isPlugpoolError } from "../domain/index.ts";
import { toConnectError } from "../adapters/grpc/errors.ts";
import { started } from "../adapters/http-device/started.ts";
import type { Logger } from "./logger.ts";
import type { Metrics } from "./metrics.ts";

/** Counts every plug request by machine, operation and result; passes everything else through unchanged. */
export function instrumentPowerSwitch<P extends PowerSwitch>(power: P, metrics: Metrics, machines: readonly Machine[]): P {
  const machineOf = new Map(machines.map((m) => [m.power.key, m.name]));
  // Chained, not awaited: see started.ts.
  const counted = (operation: "read" | "turnOn" | "turnOff", control: PowerControl, call: () => Promise<PlugReading>): Promise<PlugReading> => {
    const machine = machineOf.get(control.key) ?? "";
    return started(call).then(
      (reading) => {
        metrics.plugRequests.inc({ machine, operation, result: "ok" });
        return reading;
      },
      (e: unknown) => {
        metrics.plugRequests.inc({ machine, operation, result: isPlugpoolError(e) ? e.code : "error" });
        throw e;
      },
    );
  };
  return {
    ...power,
    read: (plug, options) => counted("read", plug, () => power.read(plug, options)),
    turnOn: (plug, options) => counted("turnOn", plug, () => power.turnOn(plug, options)),
    turnOff: (plug, mayCut, options) => counted("turnOff", plug, () => power.turnOff(plug, mayCut, options)),
  };
}

/** Latency by method and status code; logs calls that failed with anything but the expected Unimplemented. */
export function rpcMetrics(metrics: Metrics, logger: Logger): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    const method = req.method.name;
    let code = "ok";
    try {
      return await next(req);
    } catch (e) {
      const error = toConnectError(e);
      code = Code[error.code];
      if (error.code !== Code.Unimplemented) {
        // The answer to CA is capped; plugpool's own log keeps the domain's whole message (it names plugs and
        // Nodes, never credentials).
        const whole = isPlugpoolError(error.cause) ? error.cause.message : error.rawMessage;
        logger.warn("rpc failed", { method, code, error: whole, cause: causeOf(error) });
      }
      throw error;
    } finally {
      metrics.rpcDuration.observe({ method, code }, (performance.now() - started) / 1000);
    }
  };
}

function causeOf(error: ConnectError): string | undefined {
  const cause = error.cause;
  if (cause === undefined || cause === error || isPlugpoolError(cause)) return undefined;
  return cause instanceof Error ? cause.message : undefined;
}
