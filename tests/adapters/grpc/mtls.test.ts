// mTLS as cluster-autoscaler's cloud-config sets it up (cert, key, cacert): the server requires a client
// certificate signed by the configured CA.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { credentials, status } from "@grpc/grpc-js";
import { cloudProviderRoutes, errorMapping } from "../../../src/adapters/grpc/routes.ts";
import { startGrpcServer, type GrpcServer } from "../../../src/adapters/grpc/server.ts";
import { createCloudProviderClient } from "../../support/grpc-client.ts";
import { createPki, type Pki } from "../../support/test-pki.ts";
import { World } from "../../fakes/world.ts";

describe("the gRPC server with mTLS", () => {
  let pki: Pki;
  let server: GrpcServer;
  let address: string;

  before(async () => {
    pki = createPki();
    const world = new World();
    server = await startGrpcServer({
      host: "127.0.0.1",
      port: 0,
      tls: { cert: pki.read(pki.serverCert), key: pki.read(pki.serverKey), ca: pki.read(pki.ca) },
      routes: cloudProviderRoutes({ pool: world.pool, clock: world.clock, cleanup: () => Promise.resolve() }),
      interceptors: [errorMapping],
    });
    address = `127.0.0.1:${server.port}`;
  });
  after(() => server.close(100));

  it("serves a client presenting a certificate from the configured CA", async () => {
    const client = createCloudProviderClient(
      address,
      credentials.createSsl(pki.read(pki.ca), pki.read(pki.clientKey), pki.read(pki.clientCert)),
    );
    const { response, error } = await client.call("nodeGroups", {});
    client.close();
    assert.equal(error, undefined);
    assert.equal(response?.nodeGroups[0]?.id, "workers");
  });

  it("refuses a client without a certificate", async () => {
    const client = createCloudProviderClient(address, credentials.createSsl(pki.read(pki.ca)));
    const { error } = await client.call("nodeGroups", {}, { deadlineMs: 3000 });
    client.close();
    assert.equal(error?.code, status.UNAVAILABLE);
  });

  it("refuses a client whose certificate another CA signed", async () => {
    const client = createCloudProviderClient(
      address,
      credentials.createSsl(pki.read(pki.ca), pki.read(pki.strangerKey), pki.read(pki.strangerCert)),
    );
    const { error } = await client.call("nodeGroups", {}, { deadlineMs: 3000 });
    client.close();
    assert.equal(error?.code, status.UNAVAILABLE);
  });

  it("refuses a plaintext (h2c) client", async () => {
    const client = createCloudProviderClient(address);
    const { error } = await client.call("nodeGroups", {}, { deadlineMs: 3000 });
    client.close();
    assert.notEqual(error, undefined);
  });
});
