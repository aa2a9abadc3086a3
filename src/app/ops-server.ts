import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";

export interface OpsServer {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * /healthz: the process answers. /readyz: the cluster view is synced and gRPC is serving (names what is
 * missing otherwise). /metrics: Prometheus text format.
 */
export async function startOpsServer(options: {
  host: string;
  port: number;
  registry: Registry;
  readiness: () => readonly string[];
}): Promise<OpsServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD" }).end();
      return;
    }
    if (path === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
    } else if (path === "/readyz") {
      const missing = options.readiness();
      res
        .writeHead(missing.length === 0 ? 200 : 503, { "content-type": "text/plain" })
        .end(missing.length === 0 ? "ok\n" : `not ready: ${missing.join(", ")}\n`);
    } else if (path === "/metrics") {
      options.registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": options.registry.contentType }).end(text),
        () => res.writeHead(500).end("metrics unavailable\n"),
      );
    } else {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
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
