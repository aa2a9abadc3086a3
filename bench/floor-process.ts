// Child process of bench/floor.ts: one Refresh of every plug per "refresh" message, with node:http and one
// keep-alive Agent (one socket per device, kept open across the idle gaps between Refreshes).
import { Agent, get } from "node:http";
import type { FloorRefresh, FloorRequest } from "./floor.ts";

const agent = new Agent({ keepAlive: true, maxSockets: 1 });

function read(url: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = get(url, { agent, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => {
        try {
          const data = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { value?: unknown };
          resolve(typeof data.value === "boolean");
        } catch {
          resolve(false);
        }
      });
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => { resolve(false); });
  });
}

let request: FloorRequest | undefined;

process.on("message", (message) => {
  if (request === undefined) {
    request = message as FloorRequest;
    process.send?.({ ready: true });
    return;
  }
  const { urls, path, timeoutMs } = request;
  const started = performance.now();
  const cpu = process.cpuUsage();
  void Promise.all(urls.map((url) => read(url + path, timeoutMs))).then((results) => {
    const used = process.cpuUsage(cpu);
    const reply: FloorRefresh = {
      ms: performance.now() - started,
      cpuMs: (used.user + used.system) / 1000,
      answered: results.filter(Boolean).length,
    };
    process.send?.(reply);
  });
});

process.once("disconnect", () => {
  agent.destroy();
  process.exit(0);
});
