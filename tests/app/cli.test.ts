import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { config } from "./fixtures/config-builders.ts";

const main = new URL("../../src/app/main.ts", import.meta.url).pathname;

/** A file holding `text` in a fresh temp dir. */
function tempFile(name: string, text: string): string {
  const file = join(mkdtempSync(join(tmpdir(), "plugpool-cli-")), name);
  writeFileSync(file, text);
  return file;
}

/** A valid configuration file in a fresh temp dir. */
function validConfigFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), "plugpool-cli-")), "config.yaml");
  writeFileSync(file, stringify(config()));
  return file;
}

function plugpool(args: readonly string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [main, ...args], {
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "", ...env },
    timeout: 20_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("plugpool (command line)", () => {
  it("prints its version from package.json", () => {
    const { code, stdout } = plugpool(["--version"]);
    assert.equal(code, 0);
    assert.match(stdout, /^plugpool \d+\.\d+\.\d+\n$/);
  });

  it("names every power backend on the first line of its help, as package.json's description does", () => {
    const backends = ["ESPHome", "Shelly", "Home Assistant", "Redfish"];
    const firstLine = plugpool(["--help"]).stdout.split("\n")[0] ?? "";
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { description: string };
    for (const backend of backends) {
      assert.ok(firstLine.includes(backend), `--help's first line names ${backend}: ${firstLine}`);
      assert.ok(pkg.description.includes(backend), `package.json's description names ${backend}: ${pkg.description}`);
    }
  });

  it("prints help naming its commands and every credential variable", () => {
    const { code, stdout } = plugpool(["--help"]);
    assert.equal(code, 0);
    const variables = ["PLUGPOOL_PLUG_USERNAME", "PLUGPOOL_PLUG_PASSWORD", "PLUGPOOL_SHELLY_PASSWORD", "PLUGPOOL_HOME_ASSISTANT_TOKEN", "PLUGPOOL_REDFISH_USERNAME", "PLUGPOOL_REDFISH_PASSWORD"];
    for (const word of ["serve", "doctor", "--config", ...variables]) {
      assert.ok(stdout.includes(word), word);
    }
  });

  it("takes --dry-run for serve only, and explains it in --help", () => {
    assert.match(plugpool(["--help"]).stdout, /--dry-run +serve: observe only\. .* switch no\n +plug, create no pod, delete no Node and write no record/);
    const doctor = plugpool(["doctor", "--dry-run", "--config", validConfigFile()]);
    assert.equal(doctor.code, 2);
    assert.equal(doctor.stderr, "plugpool: --dry-run is for serve; doctor changes nothing anyway\n");
    // Past the option checks, serve stops at the missing kubeconfig: the flag was taken.
    const serve = plugpool(["serve", "--dry-run", "--config", validConfigFile(), "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert.equal(serve.code, 1);
    assert.doesNotMatch(serve.stderr, /dry-run|Unknown option/);
  });

  it("refuses an unknown command with usage and exit code 2", () => {
    const { code, stderr } = plugpool(["frobnicate"]);
    assert.equal(code, 2);
    assert.match(stderr, /unknown command "frobnicate"/);
  });

  it("stops on an invalid configuration with every problem by path, no stack trace, exit code 2", () => {
    const dir = mkdtempSync(join(tmpdir(), "plugpool-cli-"));
    const file = join(dir, "config.yaml");
    writeFileSync(
      file,
      [
        'providerIDPrefix: "k3s://"',
        "nodeGroups:",
        "  - id: workers",
        "    maxSize: 3",
        "    template: { cpu: '4', memory: 8Gi }",
        "    nodes:",
        "      - name: worker-1",
        "        plug: { url: 'http://admin:hunter2@plug-1.lan', switch: Relay }",
      ].join("\n"),
    );
    const { code, stderr } = plugpool(["serve", "--config", file]);
    assert.equal(code, 2);
    assert.match(stderr, /nodeGroups\[0\]\.maxSize: /);
    assert.match(stderr, /nodeGroups\[0\]\.nodes\[0\]\.plug\.url: /);
    assert.doesNotMatch(stderr, /hunter2/);
    assert.doesNotMatch(stderr, /\n\s+at /);
  });

  it("names a missing configuration file", () => {
    const { code, stderr } = plugpool(["doctor", "--config", "/nonexistent/plugpool.yaml"]);
    assert.equal(code, 2);
    assert.match(stderr, /\/nonexistent\/plugpool\.yaml/);
  });

  it("refuses an invalid --log-level like a configuration problem: listed, exit code 2, no stack trace", () => {
    const { code, stderr } = plugpool(["serve", "--config", validConfigFile(), "--log-level", "bogus"]);
    assert.equal(code, 2);
    assert.equal(stderr, 'plugpool: invalid configuration:\n  --log-level: must be one of error, warn, info, debug (found "bogus")\n');
  });

  it("lists an invalid --log-level together with the configuration file's problems", () => {
    const { code, stderr } = plugpool(["doctor", "--config", "/nonexistent/plugpool.yaml", "--log-level", "verbose"]);
    assert.equal(code, 2);
    assert.match(stderr, /^ {2}--log-level: .*"verbose"/m);
    assert.match(stderr, /^ {2}\/nonexistent\/plugpool\.yaml: /m);
    assert.doesNotMatch(stderr, /\n\s+at /);
  });

  it("accepts a log level in any letter case, and says so in --help", () => {
    assert.match(plugpool(["--help"]).stdout, /--log-level LEVEL +error, warn, info or debug, in any letter case/);
    // Past the option checks, serve stops at the missing kubeconfig: the level was taken.
    const { code, stderr } = plugpool(["serve", "--config", validConfigFile(), "--log-level", "INFO", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert.equal(code, 1);
    assert.doesNotMatch(stderr, /log-level|invalid configuration/);
  });

  it("refuses at start a kubeconfig whose server URL carries a password, naming the file and the cluster, not the password", () => {
    const kubeconfig = tempFile(
      "kubeconfig",
      [
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        "- name: lab",
        "  cluster: { server: 'https://kubeadmin:S3cretPw@10.0.0.1:6443' }",
        "users:",
        "- name: admin",
        "  user: { token: never-shown-0123 }",
        "contexts:",
        "- name: lab",
        "  context: { cluster: lab, user: admin }",
        "current-context: lab",
      ].join("\n"),
    );
    for (const command of ["serve", "doctor"]) {
      const { code, stdout, stderr } = plugpool([command, "--config", validConfigFile(), "--kubeconfig", kubeconfig]);
      assert.equal(code, 1);
      assert.equal(
        stderr,
        `plugpool: kubeconfig ${kubeconfig}: the server URL of cluster "lab" (https://[redacted]@10.0.0.1:6443) carries credentials; ` +
          "remove them and authenticate through the context's user instead (a token, client certificate or exec plugin)\n",
      );
      assert.doesNotMatch(stdout + stderr, /S3cretPw|kubeadmin|never-shown/);
    }
  });

  it("names the line and column of a kubeconfig that is not valid YAML, and never quotes its lines", () => {
    const user = ["apiVersion: v1", "kind: Config", "users:", "- name: admin", "  user:", "    username: admin"];
    const badIndent = tempFile("kubeconfig", [...user, "    password: Hunter2-kube-PW", "   token: x"].join("\n"));
    const badAlias = tempFile("kubeconfig", [...user, "    password: *Hunter2-kube-PW"].join("\n"));
    for (const [kubeconfig, fault] of [
      [badIndent, "line 8, column 4 (bad indentation of a mapping entry)"],
      [badAlias, "line 7, column 16 (unidentified alias)"],
    ] as const) {
      const { code, stdout, stderr } = plugpool(["doctor", "--config", validConfigFile(), "--kubeconfig", kubeconfig]);
      assert.equal(code, 1);
      assert.equal(stderr, `plugpool: kubeconfig ${kubeconfig}: not valid YAML at ${fault}\n`);
      assert.doesNotMatch(stdout + stderr, /Hunter2/);
    }
  });
});
