// Both servers (gRPC and the ops endpoints) start the same way: listen, and fail start-up on a bind error
// (a port in use) instead of emitting it later.
import type { Server } from "node:net";

/** Resolves once `server` listens on `port` at `host`; rejects with the bind error. */
export function listen(server: Server, port: number, host: string | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}
