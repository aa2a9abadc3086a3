// The README's install path followed in the sandbox as a new user would: "Install at home" steps 3–5 and the
// upgrade, through "Deploying with cluster-autoscaler" (kustomize). Each command is printed with the part of its
// output that matters, so the run's output reads as the walkthrough; each step's outcome is asserted, so a README
// command that stops working fails this test. kubectl is the real one (tests/harness/control-plane/build.sh).
// No kubelet runs containers here: the Deployment's pod stays Pending, and its two containers are run as
// processes with the ServiceAccount's own token, the files the pod would mount and the args the Deployment holds.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { closeSync, cpSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { CoreV1Api } from "@kubernetes/client-node";
import { SPEED_OVERRIDES, startAutoscaler, type AutoscalerProcess } from "../../harness/autoscaler/process.ts";
import { autoscalerMissing } from "../../harness/autoscaler/autoscaler.ts";
import { kubectlPath, startControlPlane, type ControlPlane } from "../../harness/control-plane/index.ts";
import { tokenKubeConfig, writeKubeconfig } from "../../harness/control-plane/credentials.ts";
import { createOwnedTempDir, onAbruptExit } from "../../harness/control-plane/process.ts";
import { freePorts } from "../../harness/control-plane/readiness.ts";
import { eventually } from "../../harness/eventually.ts";
import { startMachineSimulator, type MachineSimulator } from "../../harness/machine-simulator.ts";
import { startPlugEmulator, type EmulatedPlug } from "../../harness/plug-emulator/index.ts";
import { scenario, turnOffRequests } from "./scenario.ts";

const repo = join(import.meta.dirname, "..", "..", "..");
const examples = join(repo, "deploy", "examples");
const main = join(repo, "src", "app", "main.ts");
const USERNAME = "admin";
const PASSWORD = randomBytes(12).toString("base64url");

/** Prints what the user sees; the plugs' password never shows. */
function show(text: string): void {
  console.log(text.replaceAll(PASSWORD, "********").trimEnd());
}

/** A shell-like rendering of one argument. */
function quote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`;
}

interface Running {
  stop(): Promise<void>;
  tail(): string;
}

describe("the README's install steps, followed in the sandbox", { skip: autoscalerMissing() }, () => {
  let plane: ControlPlane;
  let core: CoreV1Api;
  let work: string;
  let unregister: () => void = () => undefined;
  let worker1: EmulatedPlug;
  let strip: EmulatedPlug;
  let machines: MachineSimulator;
  let ports: { grpc: number; ops: number };
  let plugpool: Running | undefined;
  let autoscaler: AutoscalerProcess | undefined;
  let plugEnv: Record<string, string> = {};
  const serviceAccountKubeconfig = "pod/serviceaccount.kubeconfig";
  let runs = 0;

  const plugOf = (machine: string): { plug: EmulatedPlug; relay: string } =>
    machine === "worker-1" ? { plug: worker1, relay: "Relay" } : { plug: strip, relay: machine === "worker-2" ? "Relay 1" : "Relay 2" };
  const plugStates = (): string =>
    ["worker-1", "worker-2", "worker-3"].map((m) => `${m} ${plugOf(m).plug.state(plugOf(m).relay) ? "on" : "off"}`).join(", ");
  const switchRequests = (): string[] =>
    [worker1, strip].flatMap((p) => p.calls).filter((c) => /\/(turn_on|turn_off|toggle)(\?|$)/.test(c.path)).map((c) => c.path);

  /** Runs kubectl (as the admin) in the work folder, printing the command line and its output (or `shown` of it). */
  async function kubectl(args: readonly string[], shown: (out: string) => string = (out) => out): Promise<string> {
    show(`$ kubectl ${args.map(quote).join(" ")}`);
    const out = await new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
      execFile(kubectlPath(), args, {
        cwd: work,
        env: { PATH: process.env.PATH ?? "", HOME: work, KUBECONFIG: plane.kubeconfigPath },
      }, (error, stdout, stderr) => {
        if (error) reject(new Error(`kubectl ${args.join(" ")} failed: ${stderr || error.message}`));
        else resolve({ stdout, stderr });
      });
    });
    // What kubectl says on stderr ("No resources found") is part of what the user sees.
    const text = shown(out.stdout) + out.stderr;
    if (text.trim() !== "") show(text);
    return out.stdout;
  }

  /**
   * Edits one file of the user's copy: every `from` must be there (the example changed otherwise). Prints the
   * edit as a diff from `before` (what the file was: the example's, or the copy as an earlier step left it).
   */
  async function edit(file: string, before: string, why: string, replacements: readonly (readonly [string, string])[]): Promise<void> {
    const path = join(work, "my-install", file);
    const previous = join(work, `${file}.before`);
    let text = readFileSync(path, "utf8");
    writeFileSync(previous, text);
    for (const [from, to] of replacements) {
      assert.ok(text.includes(from), `${before} no longer holds ${JSON.stringify(from)}`);
      text = text.replace(from, to);
    }
    writeFileSync(path, text);
    show(`# ${why}`);
    show(`$ diff -u ${before} my-install/${file}`);
    const diff = await new Promise<string>((resolve) => {
      execFile("diff", ["-u", "--label", before, "--label", `my-install/${file}`, previous, path], (_error, stdout) => { resolve(stdout); });
    });
    assert.notEqual(diff, "", `the edit of ${file} changed nothing`);
    show(diff);
  }

  /** The args the applied Deployment gives one container. */
  async function containerArgs(container: string): Promise<string[]> {
    const out = await kubectl(["-n", "plugpool", "get", "deployment", "cluster-autoscaler", "-o", `jsonpath={.spec.template.spec.containers[?(@.name=="${container}")].args}`]);
    return JSON.parse(out) as string[];
  }

  /** plugpool (src/app/main.ts, which the image runs compiled) with the pod's files and environment. */
  async function plugpoolCommand(args: readonly string[], wait: "exit" | "ready"): Promise<{ code: number; out: string; running?: Running }> {
    const podArgs = args.map((a) => a.replace(/^\/etc\/plugpool\//, "pod/etc/plugpool/"));
    const full = [...podArgs, "--kubeconfig", serviceAccountKubeconfig];
    show(`$ plugpool ${full.map(quote).join(" ")}`);
    runs += 1;
    const logPath = join(work, `plugpool-${runs}.log`);
    const fd = openSync(logPath, "a");
    // The Deployment gives the container its pod's name and namespace through the downward API.
    const podEnv = { POD_NAME: "cluster-autoscaler-0", POD_NAMESPACE: "plugpool" };
    const child = spawn(process.execPath, [main, ...full], { cwd: work, env: { PATH: process.env.PATH ?? "", ...podEnv, ...plugEnv }, stdio: ["ignore", fd, fd] });
    closeSync(fd);
    const exited = once(child, "exit");
    const kill = onAbruptExit(() => child.kill("SIGKILL"));
    const tail = (): string => readFileSync(logPath, "utf8").split("\n").slice(-40).join("\n");
    if (wait === "exit") {
      const [code] = (await exited) as [number | null];
      kill();
      return { code: code ?? -1, out: readFileSync(logPath, "utf8") };
    }
    const running: Running = {
      stop: async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGTERM");
          const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
          await exited;
          clearTimeout(timer);
        }
        kill();
      },
      tail,
    };
    try {
      await eventually("plugpool ready", async () => {
        assert.equal(child.exitCode, null, `plugpool exited:\n${tail()}`);
        const ready = await fetch(`http://127.0.0.1:${ports.ops}/readyz`);
        assert.equal(ready.status, 200);
        show(`(/readyz: ${(await ready.text()).trim()})`);
      }, 30_000, 250);
    } catch (error) {
      await running.stop();
      throw error;
    }
    return { code: 0, out: "", running };
  }

  /** What the pod's two containers do when it starts: plugpool first, then cluster-autoscaler beside it. */
  async function startPod(): Promise<void> {
    const args = await containerArgs("plugpool");
    ({ running: plugpool } = await plugpoolCommand(args, "ready"));
    // The mounted cloud-config: the ConfigMap's content, which startAutoscaler writes into CA's own folder.
    const cloudConfig = await kubectl(["-n", "plugpool", "get", "configmap", "cluster-autoscaler-cloud-config", "-o", "jsonpath={.data.cloud-config}"],
      (out) => out.split("\n").filter((l) => /^\w/.test(l)).join("\n"));
    const address = /^address:\s*(\S+)/m.exec(cloudConfig)?.[1];
    const grpcTimeout = /^grpc_timeout:\s*(\S+)/m.exec(cloudConfig)?.[1];
    assert.equal(address, `127.0.0.1:${ports.grpc}`, "the cloud-config points at plugpool's listen");
    assert.ok(grpcTimeout !== undefined);
    const flags: Record<string, string> = {};
    for (const arg of await containerArgs("cluster-autoscaler")) {
      const match = /^--([^=]+)=(.*)$/.exec(arg);
      assert.ok(match?.[1] !== undefined && match[2] !== undefined, `unexpected cluster-autoscaler arg ${arg}`);
      flags[match[1]] = match[2];
    }
    delete flags["cloud-config"];
    show(`$ cluster-autoscaler <these args, --cloud-config with the ConfigMap's content> --kubeconfig=${serviceAccountKubeconfig}`);
    autoscaler = await startAutoscaler({ kubeconfigPath: join(work, serviceAccountKubeconfig), grpcAddress: address, grpcTimeout, flags });
  }

  /** The pod stops: CA first (it sends plugpool Cleanup on its way out), then plugpool. */
  async function stopPod(): Promise<void> {
    await autoscaler?.stop();
    autoscaler = undefined;
    await plugpool?.stop();
    plugpool = undefined;
  }

  const diagnostics = (): string =>
    [`--- cluster-autoscaler ---`, autoscaler?.logTail(60) ?? "(not running)", `--- plugpool ---`, plugpool?.tail() ?? "(not running)",
      `--- simulator failures ---`, machines.failures().map(String).join("\n") || "(none)"].join("\n");
  const step = (title: string, body: () => Promise<void>) => scenario(title, diagnostics, async () => {
    show(`\n===== ${title} =====`);
    await body();
  });

  const pendingPod = [
    "# A pod that needs a worker: no running machine has the pool's label.",
    "apiVersion: v1",
    "kind: Pod",
    "metadata: { name: demo, namespace: default }",
    "spec:",
    "  nodeSelector: { example.com/pool: workers }",
    "  terminationGracePeriodSeconds: 0",
    "  containers:",
    "    - name: app",
    "      image: registry.k8s.io/pause:3.10",
    "      resources: { requests: { cpu: '2', memory: 1Gi } }",
    "",
  ].join("\n");
  const demoNode = async (): Promise<string> => (await core.readNamespacedPod({ namespace: "default", name: "demo" })).spec?.nodeName ?? "";
  const nodes = async (): Promise<string[]> => (await core.listNode()).items.map((n) => n.metadata?.name ?? "").sort();
  const plugpoolReasons = async (object: string): Promise<string[]> =>
    (await core.listNamespacedEvent({ namespace: "default", fieldSelector: `source=plugpool,involvedObject.name=${object}` })).items.map((e) => e.reason ?? "");

  before(async () => {
    work = createOwnedTempDir("plugpool-walkthrough-");
    unregister = onAbruptExit(() => { rmSync(work, { recursive: true, force: true }); });
    plane = await startControlPlane({ controllerManager: true, scheduler: true });
    core = plane.admin().makeApiClient(CoreV1Api);
    // deploy/examples' workers: worker-1 on a plug with a power sensor, worker-2 and worker-3 on two relays of one strip.
    const auth = { type: "basic", username: USERNAME, password: PASSWORD } as const;
    worker1 = await startPlugEmulator({ auth, switches: [{ name: "Relay", powerSensor: "Power" }] });
    strip = await startPlugEmulator({ auth, switches: [{ name: "Relay 1" }, { name: "Relay 2" }] });
    // Three mini PCs that join k3s as `k3s agent --node-label example.com/pool=workers` does (providerID k3s://<name>).
    machines = startMachineSimulator({
      kubeConfig: plane.admin(),
      providerIDPrefix: "k3s://",
      machines: ["worker-1", "worker-2", "worker-3"].map((name) => ({ name, plug: plugOf(name).plug, switchName: plugOf(name).relay })),
      capacity: { cpu: "8", memory: "31Gi", pods: "110" },
      labels: { "example.com/pool": "workers" },
      bootDelayMs: 1000,
      shutdownDelayMs: 500,
      heartbeatMs: 1000,
    });
    ports = await freePorts(["grpc", "ops"]);
    show(`The site: a control plane (kube-apiserver, controller-manager, scheduler; no kubelet), three simulated mini PCs ` +
      `worker-1..3 that boot when their plug switches on, an ESPHome plug at ${worker1.url} (worker-1, with a power ` +
      `sensor) and a two-relay strip at ${strip.url} (worker-2, worker-3), both with web_server auth.`);
  });

  after(async () => {
    await stopPod();
    await machines.stop();
    await worker1.close();
    await strip.close();
    await plane.stop();
    rmSync(work, { recursive: true, force: true });
    unregister();
  });

  it("installs the kustomize example edited for this site, observing only (step 3)", step("3. Install, observing only", async () => {
    await kubectl(["version", "--client"], (out) => out.split("\n")[0] ?? "");
    show(`$ cp -r deploy/examples my-install`);
    cpSync(examples, join(work, "my-install"), { recursive: true });
    const exampleConfig = readFileSync(join(examples, "plugpool-config.yaml"), "utf8");
    const [gpuStart, gpuEnd] = [exampleConfig.indexOf("      # Two GPU machines."), exampleConfig.indexOf("      # Three general-purpose machines.")];
    assert.ok(gpuStart > 0 && gpuEnd > gpuStart, "deploy/examples/plugpool-config.yaml has the GPU group, then the workers");
    const gpuGroup = exampleConfig.slice(gpuStart, gpuEnd);
    await edit("plugpool-config.yaml", "deploy/examples/plugpool-config.yaml", "Three mini PCs: the GPU group goes, the plugs get this site's addresses; " +
      "one host runs everything here, so plugpool listens on free ports; and the machines halt in half a second, so a short grace.", [
      ["listen: 127.0.0.1:8086", `listen: 127.0.0.1:${ports.grpc}`],
      ["opsListen: 0.0.0.0:8087", `opsListen: 127.0.0.1:${ports.ops}`],
      ["grace: 2m", "grace: 2s"],
      [gpuGroup, ""],
      ["http://192.168.10.31", worker1.url],
      ["http://192.168.10.32", strip.url],
      ["http://192.168.10.32", strip.url],
    ]);
    await edit("cloud-config.yaml", "deploy/examples/cloud-config.yaml", "cluster-autoscaler calls plugpool where it listens.", [
      ["address: 127.0.0.1:8086", `address: 127.0.0.1:${ports.grpc}`],
    ]);
    await edit("plug-credentials.yaml", "deploy/examples/plug-credentials.yaml", "The plugs' web_server auth (the password is not shown here).", [
      [`PLUGPOOL_PLUG_USERNAME: "replace-me"`, `PLUGPOOL_PLUG_USERNAME: "${USERNAME}"`],
      [`PLUGPOOL_PLUG_PASSWORD: "replace-me"`, `PLUGPOOL_PLUG_PASSWORD: "${PASSWORD}"`],
    ]);
    const deployment = readFileSync(join(examples, "deployment.yaml"), "utf8");
    const timings = Object.entries(SPEED_OVERRIDES).filter(([name]) => !deployment.includes(`- --${name}=`));
    await edit("deployment.yaml", "deploy/examples/deployment.yaml", "serve --dry-run first (README step 3); cluster-autoscaler's timings shortened for machines that boot in a second.", [
      ["args: [serve, --config, /etc/plugpool/config.yaml]", "args: [serve, --dry-run, --config, /etc/plugpool/config.yaml]"],
      ...Object.entries(SPEED_OVERRIDES)
        .filter(([name]) => deployment.includes(`- --${name}=`))
        .map(([name, value]) => [new RegExp(`- --${name}=\\S+`).exec(deployment)?.[0] ?? "", `- --${name}=${value}`] as const),
      ["            - --v=2\n", `            - --v=2\n            # Sandbox timings.\n${timings.map(([n, v]) => `            - --${n}=${v}\n`).join("")}`],
    ]);

    const applied = await kubectl(["apply", "-k", "my-install"]);
    for (const object of ["namespace/plugpool", "serviceaccount/cluster-autoscaler", "configmap/plugpool-config", "secret/plug-credentials",
      "deployment.apps/cluster-autoscaler", "validatingadmissionpolicy.admissionregistration.k8s.io/plugpool-power-off-pods"]) {
      assert.match(applied, new RegExp(`^${object.replaceAll(".", "\\.")} created$`, "m"));
    }
    await eventually("the Deployment's pod", async () => {
      assert.equal((await core.listNamespacedPod({ namespace: "plugpool" })).items.length, 1);
    }, 20_000, 250);
    const pods = await kubectl(["-n", "plugpool", "get", "pods"]);
    assert.match(pods, /cluster-autoscaler-\S+\s+0\/2\s+Pending/);
    show("# No kubelet runs containers in the sandbox (and no node has the control-plane role the pod is pinned to), so the pod stays Pending.\n" +
      "# Its two containers run as processes instead, as the pod would run them: with the ServiceAccount's token, the\n" +
      "# ConfigMaps and Secret it mounts, and the args the Deployment holds.");
    const token = (await kubectl(["-n", "plugpool", "create", "token", "cluster-autoscaler", "--duration=1h"], () => "(the token, not shown)")).trim();
    mkdirSync(join(work, "pod", "etc", "plugpool"), { recursive: true });
    const ca = Buffer.from(plane.admin().getCurrentCluster()?.caData ?? "", "base64").toString("utf8");
    writeKubeconfig(join(work, serviceAccountKubeconfig), tokenKubeConfig(plane.server, ca, "system:serviceaccount:plugpool:cluster-autoscaler", token));
    show(`(written to ${serviceAccountKubeconfig} with the apiserver's address and CA)`);
    const whoami = await kubectl(["--kubeconfig", serviceAccountKubeconfig, "auth", "whoami"], (out) => out.split("\n").filter((l) => /^Username/.test(l)).join("\n"));
    assert.match(whoami, /system:serviceaccount:plugpool:cluster-autoscaler/);
    const config = await kubectl(["-n", "plugpool", "get", "configmap", "plugpool-config", "-o", "jsonpath={.data.config\\.yaml}"], () => "(written to pod/etc/plugpool/config.yaml)");
    writeFileSync(join(work, "pod", "etc", "plugpool", "config.yaml"), config);
    const secret = async (key: string): Promise<string> =>
      Buffer.from(await kubectl(["-n", "plugpool", "get", "secret", "plug-credentials", "-o", `jsonpath={.data.${key}}`], () => `(${key} for plugpool's environment, not shown)`), "base64").toString("utf8");
    plugEnv = { PLUGPOOL_PLUG_USERNAME: await secret("PLUGPOOL_PLUG_USERNAME"), PLUGPOOL_PLUG_PASSWORD: await secret("PLUGPOOL_PLUG_PASSWORD") };
    assert.deepEqual(plugEnv, { PLUGPOOL_PLUG_USERNAME: USERNAME, PLUGPOOL_PLUG_PASSWORD: PASSWORD });

    show("# `plugpool` below is `node src/app/main.ts` of this checkout; the image runs it bundled, as `node dist/plugpool.mjs`.");
    await startPod();
    assert.match(await (await fetch(`http://127.0.0.1:${ports.ops}/readyz`)).text(), /dry run/);
  }));

  it("verifies: doctor passes, a pending pod gives DryRunPowerOn and no plug switches, CA sees the group (step 4)", step("4. Verify", async () => {
    show("$ kubectl -n plugpool exec deploy/cluster-autoscaler -c plugpool -- node dist/plugpool.mjs doctor --config /etc/plugpool/config.yaml");
    show("# (no container runs: the same in the plugpool container's place)");
    const doctor = await plugpoolCommand(["doctor", "--config", "/etc/plugpool/config.yaml"], "exit");
    show(doctor.out);
    assert.equal(doctor.code, 0, "doctor passes");
    assert.match(doctor.out, /all checks passed/);
    for (const machine of ["worker-1", "worker-2", "worker-3"]) assert.match(doctor.out, new RegExp(`^plug\\s+${machine} \\(.*\\)\\s+ok\\s+off`, "m"));
    assert.match(doctor.out, /all \d+ needed permissions granted/);
    assert.match(doctor.out, /admits the privileged power-off pod/);
    assert.match(doctor.out, /warn.*dry.run/i, "doctor says the running plugpool observes only");

    show(`$ cat demo-pod.yaml\n${pendingPod}`);
    writeFileSync(join(work, "demo-pod.yaml"), pendingPod);
    await kubectl(["apply", "-f", "demo-pod.yaml"]);
    await eventually("DryRunPowerOn on worker-1", async () => {
      assert.ok((await plugpoolReasons("worker-1")).includes("DryRunPowerOn"));
    }, 60_000, 500);
    const events = await kubectl(["-n", "default", "get", "events", "--field-selector", "source=plugpool"]);
    assert.match(events, /DryRunPowerOn\s+node\/worker-1\s+dry run: would switch the plug of worker-1 on now; nothing was sent/);
    assert.match(events, /Warning\s+PowerOnFailed\s+node\/worker-1\s+.*dry run/);
    show(`(the plugs, as the emulated devices see them: ${plugStates()}; switch requests received: ${switchRequests().length})`);
    assert.equal(plugStates(), "worker-1 off, worker-2 off, worker-3 off");
    assert.deepEqual(switchRequests(), []);
    assert.deepEqual(await nodes(), []);

    let status = "";
    await eventually("the group in CA's status", async () => {
      const cm = await core.readNamespacedConfigMap({ namespace: "plugpool", name: "cluster-autoscaler-status" });
      status = cm.data?.status ?? "";
      assert.match(status, /name: workers/);
    }, 30_000, 500);
    const shown = await kubectl(["-n", "plugpool", "get", "cm", "cluster-autoscaler-status", "-o", "yaml"],
      (out) => out.split("\n").filter((l) => /nodeGroups:|name: workers|health:|status:|minSize|maxSize|cloudProviderTarget|scaleUp:|scaleDown:|backoff/i.test(l)).join("\n"));
    assert.match(shown, /name: workers/);
    assert.match(shown, /minSize: 0/);
    assert.match(shown, /maxSize: 3/);
  }));

  it("goes live: the pending pod runs on a machine, and deleting it powers the machine off (step 5)", step("5. Go live", async () => {
    await edit("deployment.yaml", "my-install/deployment.yaml@step-3", "Go live: --dry-run removed (the sandbox timings stay).", [
      ["args: [serve, --dry-run, --config, /etc/plugpool/config.yaml]", "args: [serve, --config, /etc/plugpool/config.yaml]"],
    ]);
    const applied = await kubectl(["apply", "-k", "my-install"], (out) => out.split("\n").filter((l) => !/unchanged$/.test(l)).join("\n"));
    assert.match(applied, /^deployment\.apps\/cluster-autoscaler configured$/m);
    show("# The Deployment is Recreate: the old pod stops, the new one starts.");
    await stopPod();
    await startPod();
    await eventually("pod demo Running", async () => {
      assert.equal((await core.readNamespacedPod({ namespace: "default", name: "demo" })).status?.phase, "Running");
    }, 60_000, 250);
    const podWide = await kubectl(["get", "pod", "demo", "-o", "wide"]);
    assert.match(podWide, /^demo\s+\d\/1\s+Running\s+.*\sworker-1\s/m);
    const nodeList = await kubectl(["get", "nodes"]);
    assert.match(nodeList, /^worker-1\s+Ready/m);
    assert.equal(plugOf("worker-1").plug.state("Relay"), true);

    await kubectl(["delete", "pod", "demo"]);
    await eventually("worker-1 powered off and its Node deleted", async () => {
      assert.deepEqual(await nodes(), []);
      assert.equal(worker1.state("Relay"), false);
    }, 90_000, 500);
    show(`(the plugs: ${plugStates()})`);
    const events = await kubectl(["-n", "default", "get", "events", "--field-selector", "source=plugpool"],
      (out) => out.split("\n").filter((l) => !/dry run/.test(l)).join("\n"));
    for (const reason of ["PoweredOn", "Booted", "PowerOffStarted", "PlugOff", "NodeDeleted"]) assert.match(events, new RegExp(`\\s${reason}\\s+node/worker-1`));
    const none = await kubectl(["get", "nodes"], (out) => out);
    assert.equal(none.trim(), "", "no Node is left");
  }));

  it("upgrades with the machines held: nothing is powered off while plugpool restarts (Upgrade)", step("Upgrade", async () => {
    show("# A running worker first: the pod again.");
    await kubectl(["apply", "-f", "demo-pod.yaml"]);
    await eventually("pod demo Running", async () => {
      assert.equal(await demoNode(), "worker-1");
      assert.equal((await core.readNamespacedPod({ namespace: "default", name: "demo" })).status?.phase, "Running");
    }, 60_000, 250);
    await kubectl(["get", "nodes"]);
    await kubectl(["annotate", "node", "worker-1", "plugpool.io/hold=upgrade"]);
    const turnOffsBefore = turnOffRequests(worker1).length;
    // Its pod gone, worker-1 would be unneeded within seconds: only the hold keeps it.
    await kubectl(["delete", "pod", "demo"]);
    const heldSince = performance.now();
    await kubectl(["-n", "plugpool", "rollout", "restart", "deployment/cluster-autoscaler"]);
    await stopPod();
    await startPod();
    show("$ kubectl -n plugpool exec deploy/cluster-autoscaler -c plugpool -- node dist/plugpool.mjs doctor --config /etc/plugpool/config.yaml");
    const doctor = await plugpoolCommand(["doctor", "--config", "/etc/plugpool/config.yaml"], "exit");
    show(doctor.out.split("\n").filter((l) => /worker-1|checks/.test(l)).join("\n"));
    assert.equal(doctor.code, 0);
    // Three times what CA needs to find it unneeded and delete it (unneeded 5 s, taint delay 1 s, a 2 s loop).
    await sleep(Math.max(0, 24_000 - (performance.now() - heldSince)));
    show(`(held for ${((performance.now() - heldSince) / 1000).toFixed(0)} s with no pod on it: the plugs ${plugStates()})`);
    assert.equal(worker1.state("Relay"), true, "the held machine keeps its power");
    assert.equal(turnOffRequests(worker1).length, turnOffsBefore);
    assert.deepEqual(await nodes(), ["worker-1"]);
    const node = await core.readNode({ name: "worker-1" });
    assert.ok(!(node.spec?.taints ?? []).some((t) => t.key === "ToBeDeletedByClusterAutoscaler"), "CA never drained it");

    await kubectl(["annotate", "node", "worker-1", "plugpool.io/hold-"]);
    await eventually("worker-1 powered off once the hold is gone", async () => {
      assert.deepEqual(await nodes(), []);
      assert.equal(worker1.state("Relay"), false);
    }, 90_000, 500);
    show(`(the plugs: ${plugStates()})`);
    const nodeList = await kubectl(["get", "nodes"]);
    assert.equal(nodeList.trim(), "");
  }));
});
