import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter, type ConnectNodeAdapterOptions } from "@connectrpc/connect-node";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { boundedMessage } from "./errors.ts";

/**
 * Largest request message accepted: gRPC's usual server default (grpc-go's defaultServerMaxReceiveMessageSize).
 * cluster-autoscaler's requests are a few KiB; without a bound, Connect would buffer up to 4 GiB for one.
 */
export const READ_MAX_BYTES = 4 * 1024 * 1024;

export interface GrpcServerOptions {
  readonly host: string;
  readonly port: number;
  /** mTLS: server certificate and key, and the CA that client certificates must chain to. */
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer; readonly ca: Buffer };
  readonly routes: (router: ConnectRouter) => void;
  readonly interceptors: readonly Interceptor[];
}

export interface GrpcServer {
  readonly port: number;
  /** Stops accepting, lets in-flight calls finish (up to `graceMs`), then closes every connection. */
  close(graceMs?: number): Promise<void>;
}

/**
 * Answers a call to a method this server does not have as gRPC servers do: a trailers-only response with
 * status Unimplemented (Connect's default is a bare HTTP 404, which clients only guess to mean that).
 * Anything that is not a gRPC call still gets the 404.
 */
const unknownMethod: NonNullable<ConnectNodeAdapterOptions["fallback"]> = (req, res) => {
  if (!(res instanceof http2.Http2ServerResponse) || !/^application\/grpc(\+|;|$)/.test(req.headers["content-type"] ?? "")) {
    res.writeHead(404);
    res.end();
    return;
  }
  const status = new Headers({ "content-type": "application/grpc" });
  setTrailerStatus(status, new ConnectError(boundedMessage(`unknown method ${req.url}`), Code.Unimplemented));
  // Trailers-only: the status must arrive on the HEADERS frame that ends the stream.
  res.stream.respond({ ":status": 200, ...Object.fromEntries(status) }, { endStream: true });
};

/**
 * Serves the gRPC protocol over HTTP/2: h2c (prior knowledge) without TLS, which is what CA's client
 * speaks when its cloud-config has no `cert`; with TLS, client certificates are required (CA's mTLS).
 */
export async function startGrpcServer(options: GrpcServerOptions): Promise<GrpcServer> {
  const shutdown = new AbortController();
  const handler = connectNodeAdapter({
    routes: options.routes,
    interceptors: [...options.interceptors],
    shutdownSignal: shutdown.signal,
    grpc: true,
    grpcWeb: false,
    connect: false,
    readMaxBytes: READ_MAX_BYTES,
    fallback: unknownMethod,
    // Answers travel over loopback: compressing them (as Connect does above 1 KiB when the client accepts
    // gzip) only costs CPU.
    acceptCompression: [],
  });
  const server = options.tls
    ? http2.createSecureServer(
        { ...options.tls, requestCert: true, rejectUnauthorized: true, allowHTTP1: false, ALPNProtocols: ["h2"] },
        handler,
      )
    : http2.createServer(handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session: http2.ServerHttp2Session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    port,
    close: async (graceMs = 5000) => {
      const closed = new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
      // GOAWAY: clients stop opening streams; streams in flight may finish.
      for (const session of sessions) session.close();
      const timer = setTimeout(() => {
        shutdown.abort();
        for (const session of sessions) session.destroy();
      }, graceMs);
      await closed;
      clearTimeout(timer);
      shutdown.abort();
    },
  };
}
