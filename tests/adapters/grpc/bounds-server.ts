// The gRPC server over a stub pool in a process of its own, so that a test can read the server's memory
// apart from its client's. Sends {port} once listening; answers "rss" with {rss, maxRss} in bytes.
import { cloudProviderRoutes, errorMapping } from "../../../src/adapters/grpc/routes.ts";
import { startGrpcServer } from "../../../src/adapters/grpc/server.ts";
import { stubPool } from "./stub-pool.ts";

const server = await startGrpcServer({
  host: "127.0.0.1",
  port: 0,
  routes: cloudProviderRoutes({ pool: stubPool(), clock: { now: () => Date.now() }, cleanup: () => Promise.resolve() }),
  interceptors: [errorMapping],
});
process.on("message", (message) => {
  if (message === "rss") {
    process.send?.({ rss: process.memoryUsage().rss, maxRss: process.resourceUsage().maxRSS * 1024 });
  } else if (message === "stop") {
    void server.close(100).then(() => {
      process.disconnect();
    });
  }
});
process.send?.({ port: server.port });
