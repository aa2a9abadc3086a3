import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { certificateNames, clientNameRefusal } from "../../../src/adapters/grpc/client-names.ts";

describe("certificateNames()", () => {
  it("reads the DNS and URI names of a subjectAltName as Node writes it, quoted values included", () => {
    assert.deepEqual(
      certificateNames('DNS:a.example, IP Address:127.0.0.1, URI:"spiffe://x/a,b", email:me@example.com, URI:spiffe://y'),
      [
        { type: "DNS", value: "a.example" },
        { type: "URI", value: "spiffe://x/a,b" },
        { type: "URI", value: "spiffe://y" },
      ],
    );
    assert.deepEqual(certificateNames(undefined), []);
  });
});

describe("clientNameRefusal()", () => {
  const allowed = ["ca.plugpool.svc", "spiffe://cluster.local/ns/plugpool/sa/cluster-autoscaler"];

  it("allows a certificate with one of the names, DNS without letter case, URIs exactly", () => {
    assert.equal(clientNameRefusal({ subjectaltname: "DNS:x.example, DNS:CA.Plugpool.svc" }, allowed), undefined);
    assert.equal(clientNameRefusal({ subjectaltname: "URI:spiffe://cluster.local/ns/plugpool/sa/cluster-autoscaler" }, allowed), undefined);
    assert.notEqual(clientNameRefusal({ subjectaltname: "URI:SPIFFE://cluster.local/ns/plugpool/sa/Cluster-Autoscaler" }, allowed), undefined);
  });

  it("refuses any other, saying what it carries", () => {
    assert.equal(
      clientNameRefusal({ subjectaltname: "DNS:intruder.example, IP Address:127.0.0.1" }, allowed),
      "the client certificate (DNS:intruder.example) carries none of the names tls.clientNames allows",
    );
    assert.match(clientNameRefusal({ subjectaltname: "" }, allowed) ?? "", /no DNS or URI name/);
    // A name only in an IP or email entry does not count.
    assert.notEqual(clientNameRefusal({ subjectaltname: "email:ca.plugpool.svc" }, allowed), undefined);
  });
});
