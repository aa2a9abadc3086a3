import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter, type ConnectNodeAdapterOptions } from "@connectrpc/connect-node";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { clientNameRefusal } from "./client-names.ts";
import { boundedMessage } from "./errors.ts";
import { listen } from "../listen.ts";

/**
 * Largest request message accepted: gRPC's usual server default (grpc-go's defaultServerMaxReceiveMessageSize).
 * cluster-autoscaler's requests are a few KiB; without a bound, Connect would buffer up to 4 GiB for one.
 */
export const READ_MAX_BYTES = 4 * 1024 * 1024;

export interface GrpcServerOptions {
  readonly host: string;
  readonly port: number;
  /**
   * mTLS: server certificate and key, and the CA that client certificates must chain to. With
   * `clientNames`, a client certificate must also carry one of these names in its subjectAltName (DNS or
   * URI), else every call on its connection answers PermissionDenied.
   */
  readonly tls?: {
    readonly cert: Buffer;
    readonly key: Buffer;
    readonly ca: Buffer;
    readonly clientNames?: readonly string[];
  };
  readonly routes: (router: ConnectRouter) => void;
  readonly interceptors: readonly Interceptor[];
}

export interface GrpcServer {
  readonly port: number;
  /** Stops accepting, lets in-flight calls finish (up to `graceMs`), then closes every connection. */
  close(graceMs?: number): Promise<void>;
}

/** Ends a gRPC call with `error`'s status and no response message, before any handler ran. */
function respondStatus(stream: http2.ServerHttp2Stream, error: ConnectError): void {
  const status = new Headers({ "content-type": "application/grpc" });
  setTrailerStatus(status, error);
  // Trailers-only: the status must arrive on the HEADERS frame that ends the stream.
  stream.respond({ ":status": 200, ...Object.fromEntries(status) }, { endStream: true });
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
  respondStatus(res.stream, new ConnectError(boundedMessage(`unknown method ${req.url}`), Code.Unimplemented));
};

/**
 * Serves the gRPC protocol over HTTP/2: h2c (prior knowledge) without TLS, which is what CA's client
 * speaks when its cloud-config has no `cert`; with TLS, client certificates are required (CA's mTLS), and
 * with `tls.clientNames` they must name an allowed client.
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
  // Why a session's client certificate may not call (tls.clientNames), decided once per connection.
  const refusals = new WeakMap<http2.Http2Session, string>();
  const listener = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void => {
    const refusal = req.stream.session && refusals.get(req.stream.session);
    // PermissionDenied rather than a dropped connection: the certificate is valid, and CA logs the status's
    // message, which names what the certificate carries.
    if (refusal !== undefined) respondStatus(res.stream, new ConnectError(boundedMessage(refusal), Code.PermissionDenied));
    else handler(req, res);
  };
  const { tls } = options;
  const server = tls
    ? http2.createSecureServer(
        { cert: tls.cert, key: tls.key, ca: tls.ca, requestCert: true, rejectUnauthorized: true, allowHTTP1: false, ALPNProtocols: ["h2"] },
        listener,
      )
    : http2.createServer(listener);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session: http2.ServerHttp2Session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    if (tls?.clientNames !== undefined) {
      const refusal = clientNameRefusal((session.socket as TLSSocket).getPeerCertificate(), tls.clientNames);
      if (refusal !== undefined) refusals.set(session, refusal);
    }
  });
  await listen(server, options.port, options.host);
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
