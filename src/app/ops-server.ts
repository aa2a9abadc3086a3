import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import { listen } from "../adapters/listen.ts";

/** 200 "ok" (followed by the notes, if any) without problems, else 503 naming them. */
function answer(res: http.ServerResponse, problems: readonly string[], what: string, notes: readonly string[] = []): void {
  const ok = ["ok", ...notes].join("; ");
  res
    .writeHead(problems.length === 0 ? 200 : 503, { "content-type": "text/plain" })
    .end(problems.length === 0 ? `${ok}\n` : `${what}: ${problems.join(", ")}\n`);
}

export interface OpsServer {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * /healthz: the process answers and `liveness` names no problem (else 503 naming them, and the kubelet
 * restarts the container). /readyz: `readiness` names nothing missing (else 503 naming it; when ready, the
 * body is "ok" and `readyNotes`). /metrics:
 * Prometheus text format.
 */
export async function startOpsServer(options: {
  host: string;
  port: number;
  registry: Registry;
  readiness: () => readonly string[];
  liveness: () => readonly string[];
  /** Said by a ready /readyz after "ok" (e.g. that plugpool only observes). */
  readyNotes?: readonly string[];
}): Promise<OpsServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD" }).end();
      return;
    }
    if (path === "/healthz") {
      answer(res, options.liveness(), "unhealthy");
    } else if (path === "/readyz") {
      answer(res, options.readiness(), "not ready", options.readyNotes);
    } else if (path === "/metrics") {
      options.registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": options.registry.contentType }).end(text),
        () => res.writeHead(500).end("metrics unavailable\n"),
      );
    } else {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
    }
  });
  await listen(server, options.port, options.host);
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
