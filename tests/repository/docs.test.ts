// The README and docs/ stay true as the code moves: every relative link and #anchor resolves, every shell command
// they show is run by a test named here (which must still hold the words that run it), the README stays short
// enough to read, and every metric, alert and Event reason plugpool has is named in it.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { POWER_OFF_STEP_NAMES } from "../../src/domain/events.ts";

const root = join(import.meta.dirname, "..", "..");
const README_MAX_LINES = 460;

const documents = ["README.md", ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
const read = (file: string): string => readFileSync(join(root, file), "utf8");

interface Fence {
  readonly lang: string;
  readonly body: string;
  readonly line: number;
}

/** The fenced code blocks of a Markdown text, and the text with them blanked (so links inside them are not links). */
function fences(text: string): { readonly blocks: readonly Fence[]; readonly prose: string } {
  const blocks: Fence[] = [];
  const lines = text.split("\n");
  let open: { lang: string; start: number; body: string[] } | undefined;
  const prose = lines.map((line, i) => {
    const marker = /^\s*```(\S*)/.exec(line);
    if (marker !== null) {
      if (open === undefined) open = { lang: marker[1] ?? "", start: i + 1, body: [] };
      else {
        blocks.push({ lang: open.lang, body: open.body.join("\n"), line: open.start });
        open = undefined;
      }
      return "";
    }
    if (open !== undefined) {
      open.body.push(line);
      return "";
    }
    return line;
  });
  return { blocks, prose: prose.join("\n") };
}

/** GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
}

function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of fences(read(file)).prose.split("\n")) {
    const heading = /^#{1,6}\s+(.*)$/.exec(line);
    if (heading === null) continue;
    const base = slug(heading[1] ?? "");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Every link target of a document outside code, with its line. */
function linksOf(file: string): { readonly target: string; readonly line: number }[] {
  const prose = fences(read(file)).prose.replace(/`[^`\n]*`/g, (code) => " ".repeat(code.length));
  const links: { target: string; line: number }[] = [];
  prose.split("\n").forEach((line, i) => {
    for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) links.push({ target: m[1] ?? "", line: i + 1 });
  });
  return links;
}

/** The commands a document shows: each line of a sh/bash block (continuations joined, comments cut), `$ ` lines of a console block. */
function commandsOf(file: string): { readonly command: string; readonly line: number }[] {
  const commands: { command: string; line: number }[] = [];
  for (const block of fences(read(file)).blocks) {
    if (block.lang === "console") {
      block.body.split("\n").forEach((l, i) => {
        if (l.startsWith("$ ")) commands.push({ command: l.slice(2).trim(), line: block.line + i + 1 });
      });
    } else if (["sh", "bash", "shell"].includes(block.lang)) {
      const joined = block.body.replace(/\\\n\s*/g, "");
      joined.split("\n").forEach((l, i) => {
        const command = l.replace(/\s+#.*$/, "").trim();
        if (command !== "" && !command.startsWith("#")) commands.push({ command, line: block.line + i + 1 });
      });
    }
  }
  return commands;
}

/**
 * Each command shown, and the test that runs it. `evidence` must appear in that test file, so a test that stops
 * running the command fails this one. Commands no test runs (long measurements, builds of the image) are listed
 * with `checked` instead: what this test checks of them (the script or file they name, and its options).
 */
const COVERED: readonly { readonly command: RegExp; readonly test: string; readonly evidence: string }[] = [
  { command: /^bash scripts\/dev\.sh sandbox$/, test: "tests/e2e/sandbox.test.ts", evidence: `"scripts/sandbox.ts"` },
  { command: /^bash scripts\/dev\.sh test$/, test: ".ci/run", evidence: "bash scripts/dev.sh test" },
  { command: /^bash scripts\/dev\.sh setup$/, test: ".ci/run", evidence: "bash scripts/dev.sh setup" },
  { command: /^\. \.ci\/node-env\.sh$/, test: ".ci/run", evidence: ". .ci/node-env.sh" },
  { command: /^bash \.ci\/run$/, test: ".ci/run", evidence: "CI: a fresh clone" },
  { command: /^npm test$/, test: "scripts/dev.sh", evidence: "npm test --" },
  { command: /^npm run lint$/, test: ".ci/run", evidence: "npm run lint" },
  { command: /^npm run bundle$/, test: "package.json", evidence: "npm run build && npm run bundle && node --test" },
  { command: /^npm run proto$/, test: ".ci/check-proto.sh", evidence: "gen/ is stale: run npm run proto" },
  { command: /^npm run planted$/, test: "tests/repository/planted/planted.test.ts", evidence: "runPlant" },
  { command: /^npm run soak -- --minutes \d+$/, test: "tests/soak/soak.test.ts", evidence: "runSoak" },
  { command: /^helm repo add autoscaler https:\/\/kubernetes\.github\.io\/autoscaler$/, test: "tests/harness/helm/helm.ts", evidence: "helm repo add autoscaler https://kubernetes.github.io/autoscaler" },
  { command: /^helm install cluster-autoscaler autoscaler\/cluster-autoscaler --version 9\.59\.0 --namespace plugpool --create-namespace -f deploy\/helm\/values\.yaml$/, test: "tests/deploy/helm.test.ts", evidence: `helm(["install", release, chart, "--namespace", namespace, "--values", valuesFile` },
  { command: /^plugpool report --metrics-url \S+$/, test: "tests/app/report.test.ts", evidence: `[main, "report", "--metrics-url"` },
];

/** Commands no test runs: each names the script or file it runs, which this test checks exists with its options. */
const CHECKED_ONLY: readonly RegExp[] = [
  /^npm run image$/,
  /^npm run mutation$/,
  /^npm run bench$/,
  /^npm run bench:promotion\b/,
  /^node bench\/run\.ts\b/,
];

describe("the README and docs/", () => {
  it("finds the documents", () => {
    assert.ok(documents.includes("README.md") && documents.includes("docs/architecture.md"), documents.join(", "));
  });

  it(`keep the README within ${README_MAX_LINES} lines`, () => {
    const lines = read("README.md").split("\n").length - 1;
    assert.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines`);
  });

  for (const file of documents) {
    it(`${file}: every relative link and #anchor resolves`, () => {
      const broken: string[] = [];
      for (const { target, line } of linksOf(file)) {
        if (/^[a-z][a-z+.-]*:/i.test(target)) continue;
        const [path = "", anchor] = target.split("#");
        const resolved = path === "" ? file : relative(root, join(root, dirname(file), decodeURIComponent(path)));
        if (!existsSync(join(root, resolved))) broken.push(`${file}:${line}: ${target} (no ${resolved})`);
        else if (anchor !== undefined && (!resolved.endsWith(".md") || !anchorsOf(resolved).has(anchor))) {
          broken.push(`${file}:${line}: ${target} (no heading #${anchor} in ${resolved})`);
        }
      }
      assert.deepEqual(broken, []);
    });
  }

  it("show only commands a named test runs, or that are checked here", () => {
    const unknown: string[] = [];
    const used = new Set<number>();
    for (const file of documents) {
      for (const { command, line } of commandsOf(file)) {
        const covered = COVERED.findIndex((c) => c.command.test(command));
        if (covered >= 0) used.add(covered);
        else if (!CHECKED_ONLY.some((p) => p.test(command))) unknown.push(`${file}:${line}: ${command}`);
      }
    }
    assert.deepEqual(unknown, [], "add each to COVERED with the test that runs it");
    const stale = COVERED.filter((_, i) => !used.has(i)).map((c) => String(c.command));
    assert.deepEqual(stale, [], "entries of COVERED that no document shows any more");
  });

  it("name tests that exist and still run what they cover", () => {
    for (const { test, evidence } of COVERED) {
      assert.ok(existsSync(join(root, test)), `${test} exists`);
      assert.ok(read(test).includes(evidence), `${test} still holds ${JSON.stringify(evidence)}`);
    }
  });

  it("show commands whose npm scripts and files exist, with options those files take", () => {
    const scripts = (JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts;
    const problems: string[] = [];
    for (const file of documents) {
      for (const { command, line } of commandsOf(file)) {
        const npm = /^npm (?:run ([\w:-]+)|(test))/.exec(command);
        const name = npm?.[1] ?? npm?.[2];
        if (name !== undefined && scripts[name] === undefined) problems.push(`${file}:${line}: no npm script ${name}`);
        const runs = /^(?:node|bash) (\S+\.(?:ts|sh))(.*)$/.exec(command) ?? (name === undefined ? null : /(?:node|bash) (\S+\.(?:ts|sh))/.exec(scripts[name] ?? ""));
        const script = runs?.[1];
        if (script === undefined) continue;
        if (!existsSync(join(root, script))) {
          problems.push(`${file}:${line}: no ${script}`);
          continue;
        }
        const source = read(script);
        for (const [, option = ""] of command.matchAll(/\s(--[a-z][\w-]*)/g)) {
          if (!source.includes(option)) problems.push(`${file}:${line}: ${script} takes no ${option}`);
        }
      }
    }
    assert.deepEqual(problems, []);
  });

  it("name every metric plugpool exports, every alert of its rules and every Event reason it records", () => {
    const readme = read("README.md");
    const metrics = [...read("src/app/metrics.ts").matchAll(/name: "(plugpool_\w+)"/g)].map((m) => m[1] ?? "");
    const alerts = [...read("deploy/monitoring/prometheusrule.yaml").matchAll(/- alert: (\w+)/g)].map((m) => m[1] ?? "");
    const reasons = [
      ...read("src/domain/event-catalogue.ts").matchAll(/"([A-Z][a-z]+[A-Z]\w*|Booted|Revived|Stranded|Quarantined)"/g),
      ...read("src/app/observe-only.ts").matchAll(/reason: "(\w+)"/g),
    ].map((m) => m[1] ?? "");
    assert.ok(metrics.length > 15 && alerts.length > 10 && reasons.length > 20, "found what to look for");
    const missing = [...new Set([...metrics, ...alerts, ...reasons])].filter((name) => !readme.includes(`\`${name}\``));
    assert.deepEqual(missing, [], "named in README.md");
  });

  it("draw the power-off saga with the steps the code runs, in its order", () => {
    const text = read("docs/architecture.md");
    const saga = fences(text.slice(text.indexOf("### The power-off saga"))).blocks.find((b) => b.lang === "mermaid");
    assert.ok(saga !== undefined, "a mermaid diagram under 'The power-off saga'");
    const drawn = [...saga.body.matchAll(/\["([a-z-]+)<br\/>/g)].map((m) => m[1]);
    assert.deepEqual(drawn, [...POWER_OFF_STEP_NAMES]);
  });

  it("say what every folder of src/ owns", () => {
    const text = read("docs/architecture.md");
    const folders = (dir: string): string[] =>
      readdirSync(join(root, dir), { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .flatMap((d) => [`${dir}/${d.name}`, ...folders(`${dir}/${d.name}`)]);
    const missing = folders("src").filter((f) => !text.includes(`${f.replace(/^src\//, "")}/`));
    assert.deepEqual(missing, [], "named in docs/architecture.md");
  });
});
