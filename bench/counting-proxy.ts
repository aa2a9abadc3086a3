// Counts the requests plugpool sends to the kube-apiserver.
//
// Why a proxy: the apiserver's own /metrics (apiserver_request_total) has no user or user-agent label, so it
// mixes plugpool's requests with the apiserver's internal loopback clients and the bench's own admin calls;
// plugpool runs as a child process, so its KubeConfig cannot be wrapped either; and the audit log would need
// apiserver flags the test control plane does not take. So plugpool's kubeconfig points at this plain-HTTP
// forwarder on loopback, which sees every request in clear (method, path, query), forwards it unchanged
// (plugpool's own bearer token included) to the real apiserver over TLS, and streams the answer back, watch
// streams included. It counts exactly what plugpool sends and adds one loopback hop to each request.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import { Agent, request as httpsRequest } from "node:https";
import type { AddressInfo } from "node:net";

export interface RequestCounts {
  /** GETs with watch=true: watch starts (renewals of quiet watches included). */
  readonly watches: number;
  /** Other GETs: lists and single reads. */
  readonly reads: number;
  /** POST, PUT, PATCH, DELETE. */
  readonly writes: number;
  /**
   * Reads and writes of Leases, counted apart from the others: holding plugpool's own Lease and following
   * cluster-autoscaler's take a few requests every renewal period, whatever CA does.
   */
  readonly leases: number;
  /** "METHOD path" of every request that was not a watch, in order (for the report when it is not zero). */
  readonly others: readonly string[];
}

export interface CountingProxy {
  /** http://127.0.0.1:<port>, to be used as the kubeconfig's server (with insecure-skip-tls-verify). */
  readonly url: string;
  counts(): RequestCounts;
  close(): Promise<void>;
}

const HOP_BY_HOP = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"];

function forwardable(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out = { ...headers };
  for (const name of HOP_BY_HOP) Reflect.deleteProperty(out, name);
  return out;
}

/** Forwards to `upstream` (https://host:port), trusting only `caPem`. */
export async function startCountingProxy(upstream: string, caPem: string): Promise<CountingProxy> {
  const target = new URL(upstream);
  const agent = new Agent({ keepAlive: true, ca: caPem });
  let watches = 0;
  let reads = 0;
  let writes = 0;
  let leases = 0;
  const others: string[] = [];

  function count(req: IncomingMessage): void {
    const url = new URL(req.url ?? "/", "http://proxy");
    const watch = url.searchParams.get("watch");
    if (req.method === "GET" && (watch === "true" || watch === "1")) {
      watches += 1;
      return;
    }
    if (/^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/[^/]+\/leases\//.test(url.pathname)) {
      leases += 1;
      return;
    }
    if (req.method === "GET") reads += 1;
    else writes += 1;
    others.push(`${req.method ?? "?"} ${url.pathname}`);
  }

  function forward(req: IncomingMessage, res: ServerResponse): void {
    count(req);
    const upstreamReq = httpsRequest(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: forwardable(req.headers),
        agent,
      },
      (upstreamRes) => {
        res.writeHead(upstreamRes.statusCode ?? 502, forwardable(upstreamRes.headers));
        // Node sends headers with the first body byte; the apiserver sends a watch's at once, before any event.
        res.flushHeaders();
        upstreamRes.pipe(res);
      },
    );
    upstreamReq.once("error", () => {
      if (!res.headersSent) res.writeHead(502);
      res.destroy();
    });
    // A closed watch on plugpool's side ends the upstream watch too.
    res.once("close", () => {
      if (!res.writableFinished) upstreamReq.destroy();
    });
    req.pipe(upstreamReq);
  }

  const server = createServer(forward);
  // Watches are long-lived requests; the forwarder itself must never end them.
  server.requestTimeout = 0;
  server.timeout = 0;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    counts: () => ({ watches, reads, writes, leases, others: [...others] }),
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => { resolve(); }));
      server.closeAllConnections();
      await closed;
      agent.destroy();
    },
  };
}
