// The floor a Refresh is judged against: the same reads (GET of each plug's relay, JSON parsed, the same
// timeout) made by a few lines of plain node:http with a keep-alive Agent, in a process of its own, at the
// same cadence as plugpool's Refreshes. Its CPU per Refresh is the least any Node.js client can spend.
import { join } from "node:path";
import { forkChild } from "./child.ts";

/** Parent → child at start. */
export interface FloorRequest {
  readonly urls: readonly string[];
  readonly path: string;
  readonly timeoutMs: number;
}

/** Child → parent, once per Refresh. */
export interface FloorRefresh {
  readonly ms: number;
  readonly cpuMs: number;
  readonly answered: number;
}

export interface Floor {
  refresh(): Promise<FloorRefresh>;
  close(): Promise<void>;
}

export async function startFloor(request: FloorRequest): Promise<Floor> {
  const child = await forkChild<{ ready: true }>(join(import.meta.dirname, "floor-process.ts"), request);
  return {
    refresh: () =>
      new Promise((resolve) => {
        child.process.once("message", (reply) => { resolve(reply as FloorRefresh); });
        child.process.send("refresh");
      }),
    close: child.close,
  };
}
