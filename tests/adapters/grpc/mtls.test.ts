// mTLS as cluster-autoscaler's cloud-config sets it up (cert, key, cacert): the server requires a client
// certificate signed by the configured CA.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { credentials, status } from "@grpc/grpc-js";
import { cloudProviderRoutes, errorMapping } from "../../../src/adapters/grpc/routes.ts";
import { startGrpcServer, type GrpcServer } from "../../../src/adapters/grpc/server.ts";
import { createCloudProviderClient } from "../../harness/grpc-client.ts";
import { createPki, type Pki } from "../../harness/test-pki.ts";
import { World } from "../../harness/fakes/world.ts";
import { stubPool } from "./stub-pool.ts";

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

describe("the gRPC server with mTLS and tls.clientNames", () => {
  const allowed = ["cluster-autoscaler.plugpool.svc", "spiffe://cluster.local/ns/plugpool/sa/cluster-autoscaler"];
  let pki: Pki;
  let server: GrpcServer;

  /** A nodeGroups call with a client certificate from the configured CA carrying `subjectAltName`. */
  const callAs = async (name: string, subjectAltName: string) => {
    const { cert, key } = pki.issueClient(name, subjectAltName);
    const client = createCloudProviderClient(
      `127.0.0.1:${server.port}`,
      credentials.createSsl(pki.read(pki.ca), pki.read(key), pki.read(cert)),
    );
    try {
      return await client.call("nodeGroups", {}, { deadlineMs: 3000 });
    } finally {
      client.close();
    }
  };

  before(async () => {
    pki = createPki();
    server = await startGrpcServer({
      host: "127.0.0.1",
      port: 0,
      tls: { cert: pki.read(pki.serverCert), key: pki.read(pki.serverKey), ca: pki.read(pki.ca), clientNames: allowed },
      routes: cloudProviderRoutes({ pool: stubPool(), clock: { now: () => Date.now() }, cleanup: () => Promise.resolve() }),
      interceptors: [errorMapping],
    });
  });
  after(() => server.close(100));

  it("serves a certificate that carries an allowed DNS name, in any letter case", async () => {
    const { response, error } = await callAs("ca-dns", "DNS:other.example,DNS:Cluster-Autoscaler.plugpool.svc");
    assert.equal(error, undefined);
    assert.equal(response?.nodeGroups[0]?.id, "workers");
  });

  it("serves a certificate that carries an allowed URI name", async () => {
    const { error } = await callAs("ca-uri", "URI:spiffe://cluster.local/ns/plugpool/sa/cluster-autoscaler");
    assert.equal(error, undefined);
  });

  it("answers PermissionDenied, naming the certificate's names, to a certificate from the CA with another name", async () => {
    const { error } = await callAs("intruder", "DNS:intruder.example,URI:spiffe://cluster.local/ns/default/sa/intruder,IP:127.0.0.1");
    assert.equal(error?.code, status.PERMISSION_DENIED);
    assert.match(decodeURIComponent(error.details), /\(DNS:intruder\.example, URI:spiffe:\/\/cluster\.local\/ns\/default\/sa\/intruder\)/);
  });

  it("answers PermissionDenied to a certificate from the CA that carries the name only as its common name", async () => {
    const { error } = await callAs("cluster-autoscaler.plugpool.svc", "IP:127.0.0.2");
    assert.equal(error?.code, status.PERMISSION_DENIED);
    assert.match(decodeURIComponent(error.details), /no DNS or URI name/);
  });
});
