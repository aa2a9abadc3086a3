// The floors a Refresh is judged against: the same reads (GET of each plug's relay, JSON parsed, the same
// timeout) made by a few lines of client code, in a process of their own, at the same cadence as plugpool's
// Refreshes. With plain node:http and a keep-alive Agent, its CPU per Refresh is the least any Node.js client can
// spend; with ky over plugpool's own undici Agent, the least plugpool's HTTP client can.
import { join } from "node:path";
import { forkChild } from "./child.ts";

/** Parent → child at start. */
export interface FloorRequest {
  readonly urls: readonly string[];
  readonly path: string;
  readonly timeoutMs: number;
  readonly client: "node:http" | "ky";
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
