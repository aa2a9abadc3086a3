// Child process of bench/floor.ts: one Refresh of every plug per "refresh" message, with node:http and one
// keep-alive Agent (one socket per device, kept open across the idle gaps between Refreshes), or with ky over
// plugpool's undici Agent (src/adapters/http-device/http-client.ts), as ESPHome plugs are described to it.
import { Agent, get } from "node:http";
import { MAX_ANSWER_BYTES } from "../src/adapters/esphome/plug-http.ts";
import { createHttpClient, describeOrigin } from "../src/adapters/http-device/http-client.ts";
import type { FloorRefresh, FloorRequest } from "./floor.ts";

const agent = new Agent({ keepAlive: true, maxSockets: 1 });
const ky = createHttpClient();

function readHttp(url: string, timeoutMs: number): Promise<boolean> {
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

async function readKy(url: string, timeoutMs: number): Promise<boolean> {
  try {
    const data = JSON.parse(await ky.get(url, { signal: AbortSignal.timeout(timeoutMs) }).text()) as { value?: unknown };
    return typeof data.value === "boolean";
  } catch {
    return false;
  }
}

let request: FloorRequest | undefined;

process.on("message", (message) => {
  if (request === undefined) {
    request = message as FloorRequest;
    for (const url of request.urls) describeOrigin(url, { maxBytes: MAX_ANSWER_BYTES });
    process.send?.({ ready: true });
    return;
  }
  const { urls, path, timeoutMs } = request;
  const read = request.client === "ky" ? readKy : readHttp;
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
