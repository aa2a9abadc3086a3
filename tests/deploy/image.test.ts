// The Containerfile without a container engine: its runtime layout is rebuilt in a temp dir (the build stage's
// bundle, the final stage's COPY lines) and its ENTRYPOINT runs there, with no node_modules anywhere above it, so
// a dependency left out of the bundle, a file read beside it or a wrong entrypoint fails here rather than in a
// cluster.
import { isAscii } from "node:buffer";
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, relative } from "node:path";
import { promisify } from "node:util";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");

interface Copy {
  readonly from?: string;
  readonly sources: readonly string[];
  readonly dest: string;
}

interface Stage {
  readonly name: string;
  workdir: string;
  readonly runs: string[];
  readonly copies: Copy[];
  entrypoint?: string[];
  cmd?: string[];
  /** ENV variables (KEY=value, value optionally double-quoted). */
  readonly env: Record<string, string>;
}

/** The instructions this test needs, by stage; continuation lines joined, comments dropped. */
function parseContainerfile(text: string): Stage[] {
  const lines = text.replace(/\\\n\s*/g, " ").split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));
  const stages: Stage[] = [];
  for (const line of lines) {
    const [instruction = "", ...rest] = line.split(/\s+/);
    const args = rest.join(" ");
    const stage = stages.at(-1);
    if (instruction === "FROM") {
      stages.push({ name: /\bAS\s+(\S+)/i.exec(args)?.[1] ?? "", workdir: "/", runs: [], copies: [], env: {} });
    } else if (stage === undefined) {
      continue; // ARG before the first FROM
    } else if (instruction === "WORKDIR") {
      stage.workdir = args;
    } else if (instruction === "RUN") {
      stage.runs.push(args);
    } else if (instruction === "COPY") {
      const from = /^--from=(\S+)\s+/.exec(args);
      const paths = args.slice(from?.[0].length ?? 0).split(/\s+/);
      stage.copies.push({ ...(from?.[1] === undefined ? {} : { from: from[1] }), sources: paths.slice(0, -1), dest: paths.at(-1) ?? "" });
    } else if (instruction === "ENTRYPOINT") {
      stage.entrypoint = JSON.parse(args) as string[];
    } else if (instruction === "CMD") {
      stage.cmd = JSON.parse(args) as string[];
    } else if (instruction === "ENV") {
      for (const [, key = "", quoted, bare] of args.matchAll(/(\w+)=(?:"([^"]*)"|(\S*))/g)) stage.env[key] = quoted ?? bare ?? "";
    }
  }
  return stages;
}

const stages = parseContainerfile(readFileSync(join(root, "Containerfile"), "utf8"));
const stage = (name: string): Stage => {
  const found = stages.find((s) => s.name === name);
  assert.ok(found, `stage ${name}`);
  return found;
};
const runtime = stages.at(-1);

describe("Containerfile (runtime layout rebuilt without an engine)", () => {
  let dir: string;
  /** Where each stage's WORKDIR is in the temp dir. */
  const stageRoots = new Map<string, string>();
  let app: string;

  const plugpool = async (args: readonly string[]) => {
    const [command, ...entry] = runtime?.entrypoint ?? [];
    assert.equal(command, "node");
    return run(process.execPath, [...entry, ...args], { cwd: app, env: { PATH: process.env.PATH ?? "", ...runtime?.env }, timeout: 20_000 })
      .then(({ stdout, stderr }) => ({ code: 0, stdout, stderr }))
      .catch((error: unknown) => {
        const { code, stdout, stderr } = error as { code?: number; stdout?: string; stderr?: string };
        return { code, stdout: stdout ?? "", stderr: stderr ?? "" };
      });
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "plugpool-image-"));
    // build: `npm run bundle` into the stage's dist/, with node_modules already here.
    const build = join(dir, "build");
    stageRoots.set("build", build);
    assert.ok(stage("build").runs.includes("npm run bundle"));
    await run(process.execPath, [join(root, "scripts", "bundle.ts"), join(build, "dist", "plugpool.mjs")], { cwd: root });
    // The final stage's COPY lines into its WORKDIR.
    app = join(dir, "app");
    for (const copy of runtime?.copies ?? []) {
      for (const source of copy.sources) {
        const from = copy.from === undefined ? join(root, source) : join(stageRoots.get(copy.from) ?? "", relative(stage(copy.from).workdir, source));
        // Into a directory (dest ends in /): under the source's own name, as the engines do.
        const target = join(app, copy.dest, copy.dest.endsWith("/") ? basename(source) : "");
        cpSync(from, target, { recursive: true });
      }
    }
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("prints its version from the image's package.json through the ENTRYPOINT", async () => {
    const { code, stdout } = await plugpool(["--version"]);
    assert.equal(code, 0);
    const { version } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
    assert.equal(stdout, `plugpool ${version}\n`);
  });

  it("runs the default CMD, serve with the config path the example Deployment mounts", async () => {
    const cmd = ["serve", "--config", "/etc/plugpool/config.yaml"];
    assert.deepEqual(runtime?.cmd, cmd);
    const { code, stderr } = await plugpool(cmd);
    // No config file outside a pod: the loader (schema included) names the path and stops.
    assert.equal(code, 2);
    assert.match(stderr, /\/etc\/plugpool\/config\.yaml: cannot read the configuration file/);
  });

  it("runs with heap limits in NODE_OPTIONS that Node accepts and applies", async () => {
    const options = runtime?.env.NODE_OPTIONS ?? "";
    const flag = (name: string): number => Number(new RegExp(`--${name}=(\\d+)`).exec(options)?.[1]);
    const oldSpaceMb = flag("max-old-space-size");
    assert.ok(oldSpaceMb > 0 && flag("max-semi-space-size") > 0, `NODE_OPTIONS: ${options}`);
    const { stdout } = await run(process.execPath, ["-p", "require('node:v8').getHeapStatistics().heap_size_limit"], { env: { NODE_OPTIONS: options } });
    const limitMb = Number(stdout) / 2 ** 20;
    // The limit is the old space plus the young generation's room.
    assert.ok(limitMb >= oldSpaceMb && limitMb < oldSpaceMb + 64, `heap limit ${limitMb} MB for ${options}`);
  });

  it("ships one module and no node_modules: config schema, YAML, Kubernetes client and plug clients are all in it", async () => {
    assert.equal(existsSync(join(app, "node_modules")), false);
    assert.equal(existsSync(join(dir, "node_modules")), false);
    const config = join(dir, "config.yaml");
    writeFileSync(
      config,
      [
        'providerIDPrefix: "plugpool://"',
        "nodeGroups:",
        "  - id: workers",
        "    maxSize: 1",
        "    template: { cpu: \"4\", memory: 8Gi }",
        "    nodes:",
        "      - name: worker-1",
        "        plug: { url: \"http://127.0.0.1:1\", switch: Relay }",
        "",
      ].join("\n"),
    );
    const kubeconfig = join(dir, "kubeconfig.yaml");
    writeFileSync(
      kubeconfig,
      'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n',
    );
    const { code, stdout, stderr } = await plugpool(["doctor", "--config", config, "--kubeconfig", kubeconfig]);
    // Nothing answers on port 1: the checks run through the bundled clients and fail on the network, not on a module.
    assert.equal(code, 1, stderr);
    assert.match(stdout, /^config\s+file\s+ok\s+1 group\(s\), 1 machine\(s\)/m);
    assert.match(stdout, /^plug\s+worker-1 .*FAIL/m);
    assert.match(stdout, /^cluster\s+https:\/\/127\.0\.0\.1:1\s+FAIL\s+cannot reach the apiserver/m);
  });

  it("ships an all-ASCII bundle, the bundled dependencies' license notices beside it", () => {
    // Node holds a module's source one byte per character only when the file is all ASCII.
    assert.ok(isAscii(readFileSync(join(app, "dist", "plugpool.mjs"))));
    assert.match(readFileSync(join(app, "dist", "plugpool.mjs.LEGAL.txt"), "utf8"), /MIT License/);
  });

  it("sends the engine exactly what it copies from the build context", () => {
    const allowed = readFileSync(join(root, ".dockerignore"), "utf8").split("\n").filter((l) => l.startsWith("!")).map((l) => l.slice(1).replace(/\/$/, ""));
    const copied = stages.flatMap((s) => s.copies.filter((c) => c.from === undefined).flatMap((c) => c.sources));
    assert.deepEqual([...new Set(copied)].sort(), [...allowed].sort());
  });

  it("runs as a numeric non-root user", () => {
    const user = /^USER\s+(\d+)(?::\d+)?$/m.exec(readFileSync(join(root, "Containerfile"), "utf8"))?.[1];
    assert.ok(user !== undefined && Number(user) > 0);
  });
});
