// A node's `redfish` section as the configuration loader reads it: what it accepts, and each problem reported
// with its path and never with a secret.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RedfishSystem } from "../../../src/adapters/redfish/redfish-system.ts";
import type { AppConfig } from "../../../src/app/config/index.ts";
import { config, group, issuesOf, load } from "../../app/fixtures/config-builders.ts";
import { createPki, type Pki } from "../../harness/test-pki.ts";

const ENV = { PLUGPOOL_REDFISH_USERNAME: "root", PLUGPOOL_REDFISH_PASSWORD: "env-secret-pw" };

function withSections(...sections: Record<string, unknown>[]): Record<string, unknown> {
  return config([group("servers", sections.map((redfish, i) => ({ name: `server-${i + 1}`, redfish })))]);
}

function systemsOf(loaded: AppConfig): RedfishSystem[] {
  return loaded.pool.groups.flatMap((g) => g.machines.map((m) => {
    const resolved = loaded.powerControls.get(m.power.key);
    assert.equal(resolved?.backend, "redfish");
    return resolved.address as RedfishSystem;
  }));
}

describe("the redfish section", () => {
  let pki: Pki;
  let dir: string;
  let files: { username: string; password: string; notPem: string };
  before(() => {
    pki = createPki();
    dir = mkdtempSync(join(tmpdir(), "plugpool-redfish-config-"));
    files = { username: join(dir, "username"), password: join(dir, "password"), notPem: join(dir, "not.pem") };
    writeFileSync(files.username, "admin\n");
    writeFileSync(files.password, "file-secret-pw\n");
    writeFileSync(files.notPem, "file-secret-pw\n");
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(pki.dir, { recursive: true, force: true });
  });

  it("loads a BMC with its CA and credentials files, basic auth by default", () => {
    const loaded = load(withSections({ url: "HTTPS://BMC-1.example:443/", system: "System.Embedded.1", caFile: pki.ca, usernameFile: files.username, passwordFile: files.password }));
    const [system] = systemsOf(loaded);
    assert.ok(system);
    assert.equal(system.url, "https://bmc-1.example");
    assert.equal(system.device, "bmc-1.example");
    assert.equal(system.system, "System.Embedded.1");
    assert.equal(system.auth, "basic");
    assert.equal(system.ca?.file, pki.ca);
    assert.match(system.ca.pem, /^-----BEGIN CERTIFICATE-----/u);
    assert.equal(system.credentials.username.reveal(), "admin");
    assert.equal(system.credentials.password.reveal(), "file-secret-pw");
    const machine = loaded.pool.groups[0]?.machines[0];
    assert.deepEqual(machine?.power, { backend: "redfish", key: 'redfish bmc-1.example "System.Embedded.1"', label: 'BMC https://bmc-1.example system "System.Embedded.1"', measuresWatts: false });
  });

  it("marks the control as one that shuts the OS down itself only when gracefulShutdown is true", () => {
    const loaded = load(withSections({ url: "https://bmc.example", system: "1", gracefulShutdown: true }, { url: "https://bmc.example", system: "2" }), ENV);
    assert.deepEqual(loaded.pool.groups[0]?.machines.map((m) => m.power.shutsDown), [true, undefined]);
  });

  it("takes the credentials from PLUGPOOL_REDFISH_USERNAME and PLUGPOOL_REDFISH_PASSWORD when no files are named", () => {
    const [system] = systemsOf(load(withSections({ url: "https://10.0.0.5", system: "1", auth: "session" }), ENV));
    assert.ok(system);
    assert.equal(system.credentials.username.reveal(), "root");
    assert.equal(system.credentials.from, "environment");
    assert.equal(system.auth, "session");
  });

  it("accepts plain http to a loopback address only", () => {
    assert.equal(systemsOf(load(withSections({ url: "http://127.0.0.1:8000", system: "1" }), ENV))[0]?.url, "http://127.0.0.1:8000");
    assert.deepEqual(issuesOf(withSections({ url: "http://10.0.0.5", system: "1" }), ENV), [
      "nodeGroups[0].nodes[0].redfish.url: must be an https:// URL: Redfish requests carry the BMC's credentials (http:// only to a loopback address, e.g. a local tunnel)",
    ]);
  });

  it("refuses credentials in the URL without repeating them", () => {
    const issues = issuesOf(withSections({ url: "https://admin:url-secret-pw@10.0.0.5", system: "1" }), ENV);
    assert.equal(issues.length, 1);
    assert.match(issues[0] ?? "", /^nodeGroups\[0\]\.nodes\[0\]\.redfish\.url: must be an http:\/\/ or https:\/\/ URL without credentials: use usernameFile and passwordFile/u);
    assert.ok(!issues.join("\n").includes("url-secret-pw"));
  });

  it("reports a node without credentials, and one variable without the other", () => {
    assert.deepEqual(issuesOf(withSections({ url: "https://10.0.0.5", system: "1" })), [
      "nodeGroups[0].nodes[0].redfish: has no credentials: a BMC needs a login; set usernameFile and passwordFile, or PLUGPOOL_REDFISH_USERNAME and PLUGPOOL_REDFISH_PASSWORD",
    ]);
    assert.deepEqual(issuesOf(withSections({ url: "https://10.0.0.5", system: "1" }), { PLUGPOOL_REDFISH_PASSWORD: "env-secret-pw" }), [
      "PLUGPOOL_REDFISH_USERNAME: is not set but PLUGPOOL_REDFISH_PASSWORD is; Redfish credentials need both variables, or neither",
    ]);
  });

  it("reports a usernameFile without a passwordFile, and unreadable files at their path", () => {
    assert.deepEqual(issuesOf(withSections({ url: "https://10.0.0.5", system: "1", usernameFile: files.username }), ENV), [
      "nodeGroups[0].nodes[0].redfish.passwordFile: is missing: usernameFile is set, and a BMC login needs both files (or neither, for PLUGPOOL_REDFISH_USERNAME and PLUGPOOL_REDFISH_PASSWORD)",
    ]);
    const [noPassword, noCa] = [join(dir, "absent-password"), join(dir, "absent-ca.pem")];
    assert.deepEqual(issuesOf(withSections({ url: "https://10.0.0.5", system: "1", usernameFile: files.username, passwordFile: noPassword, caFile: noCa }), ENV), [
      "nodeGroups[0].nodes[0].redfish.passwordFile: must be the path of a readable file (no such file)",
      "nodeGroups[0].nodes[0].redfish.caFile: must be the path of a readable file (no such file)",
    ]);
  });

  it("reports a caFile that holds no certificate without showing what it holds, and one given with http", () => {
    const issues = issuesOf(withSections({ url: "https://10.0.0.5", system: "1", caFile: files.notPem }, { url: "http://localhost:8000", system: "1", caFile: pki.ca }), ENV);
    assert.deepEqual(issues, [
      `nodeGroups[0].nodes[0].redfish.caFile: ${files.notPem} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`,
      "nodeGroups[0].nodes[1].redfish.caFile: has no use with an http:// URL; use https://",
    ]);
    assert.ok(!issues.join("\n").includes("file-secret-pw"));
  });

  it("refuses two nodes on one system of one BMC, however its URL is spelled", () => {
    const issues = issuesOf(withSections({ url: "https://bmc.example", system: "1" }, { url: "https://BMC.example.:443", system: "1" }), ENV);
    assert.deepEqual(issues, [
      'nodeGroups[0].nodes[1].redfish: is the same power control as nodeGroups[0].nodes[0].redfish (BMC https://bmc.example. system "1", on device bmc.example); each machine needs its own',
    ]);
  });

  it("accepts several systems of one BMC reached one way, and refuses two ways to one BMC", () => {
    assert.equal(systemsOf(load(withSections({ url: "https://bmc.example", system: "1" }, { url: "https://bmc.example", system: "2" }), ENV)).length, 2);
    assert.deepEqual(issuesOf(withSections({ url: "https://bmc.example", system: "1" }, { url: "https://bmc.example", system: "2", caFile: pki.ca }), ENV), [
      "nodeGroups[0].nodes[1].redfish: reaches BMC bmc.example differently from nodeGroups[0].nodes[0].redfish (auth, caFile or credentials files); a BMC is reached one way, so name the same for both",
    ]);
  });

  it("reports unknown keys and a wrong auth through the schema", () => {
    const issues = issuesOf(withSections({ url: "https://10.0.0.5", system: "1", auth: "digest", password: "inline" }), ENV);
    assert.equal(issues.length, 2, issues.join("\n"));
    assert.ok(issues.some((i) => i.startsWith("nodeGroups[0].nodes[0].redfish.auth: ")), issues.join("\n"));
    assert.ok(issues.some((i) => i.includes("password")), issues.join("\n"));
  });
});
