// Ports and readiness probes for the test control plane's processes.
import { get as httpGet, type IncomingMessage } from "node:http";
import { get as httpsGet } from "node:https";
import { createServer } from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import type { ManagedProcess } from "./process.ts";

/** Distinct loopback ports, one per name, that are free right now (the kernel picks them). */
export async function freePorts<Name extends string>(names: readonly Name[]): Promise<Record<Name, number>> {
  // All listeners stay open until every port is known, so the kernel cannot hand one out twice.
  const servers = names.map(() => createServer());
  const ports = await Promise.all(servers.map(async (server) => {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", resolve);
    });
    const address = server.address();
    if (address === null || typeof address === "string") throw new Error("no TCP port was assigned");
    return address.port;
  }));
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return Object.fromEntries(names.map((name, i) => [name, ports[i]])) as Record<Name, number>;
}

/**
 * Polls `probe` until it answers true. Fails at once if `child` exits, and after `timeoutMs`
 * otherwise, either way with the tail of that process's log.
 */
export async function waitUntilReady(
  child: ManagedProcess,
  what: string,
  probe: () => Promise<boolean>,
  timeoutMs = 90_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!child.running()) throw startFailure(child, `${child.name} exited before ${what}`);
    if (await probe()) return;
    if (Date.now() > deadline) throw startFailure(child, `${child.name}: no ${what} after ${timeoutMs} ms`);
    await delay(250);
  }
}

function startFailure(child: ManagedProcess, message: string): Error {
  return new Error(`${message}; last lines of ${child.logPath}:\n${child.logTail()}`);
}

/** True when GET `url` answers 200; `ca` (PEM) is the only trust root for https. */
export function answersOk(url: string, ca?: string): Promise<boolean> {
  return new Promise((resolve) => {
    const onResponse = (response: IncomingMessage): void => {
      response.resume();
      resolve(response.statusCode === 200);
    };
    const request = url.startsWith("https:") ? httpsGet(url, { ca, timeout: 2000 }, onResponse) : httpGet(url, { timeout: 2000 }, onResponse);
    request.once("timeout", () => request.destroy());
    request.once("error", () => { resolve(false); });
  });
}
