import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

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
