// Bugs planted one at a time in the safety checks: each must make the domain's safety tests fail (or, for a plant
// outside the domain, the tests it names). A plant is a list of exact replacements in src/; `run.ts` applies each
// to a copy of the repository.

export interface Plant {
  readonly name: string;
  readonly edits: readonly { readonly file: string; readonly find: string; readonly replace: string }[];
  /** The test files that must catch it, when not the domain's safety tests. */
  readonly suite?: readonly string[];
}

export const PLANTS: readonly Plant[] = [
  {
    name: "send a switch command to a device that answers as another",
    edits: [{ file: "src/domain/device-identity.ts", find: "    if (expected !== undefined && seen.id !== expected) {", replace: "    if (expected !== undefined && seen.id !== expected && seen.id === \"\") {" }],
  },
  {
    name: "switch a device met for the first time before its identity is stored",
    edits: [
      {
        file: "src/domain/device-identity.ts",
        find: "        await ctx.deps.records.recordDeviceIdentity(machine.name, seen.id, options);",
        replace: "        void ctx.deps.records.recordDeviceIdentity(machine.name, seen.id, options).catch(() => undefined);",
      },
    ],
  },
  {
    name: "forget that a machine's device answered as another",
    edits: [{ file: "src/domain/lifecycle.ts", find: "  return isHeld(machine, nodes) || memoryOf(ctx, machine).device.mismatch !== undefined;", replace: "  return isHeld(machine, nodes);" }],
  },
  {
    name: "keep plugpool's power-on licence over a device that restarted",
    edits: [
      {
        file: "src/domain/device-identity.ts",
        find: "  if (ctx.deps.records.powerOn(machine.name) !== undefined) ctx.deps.records.endPowerOn(machine.name);",
        replace: "",
      },
    ],
  },
  {
    name: "skip the re-check on a plug-off retry",
    edits: [
      {
        file: "src/domain/switching.ts",
        find: "  plugCut,\n  poweredSeen,",
        replace: "  plugCut,\n  powerOffOf,\n  poweredSeen,",
      },
      {
        file: "src/domain/switching.ts",
        find: "    if (verdict.allowed) return true;",
        replace: '    if (verdict.allowed || (powerOffOf(ctx, machine)?.attempts["plug-off"] ?? 0) > 0) return true;',
      },
      {
        file: "src/domain/power-off-steps.ts",
        find: "    const verdict = mayCutPower(machine, pool.deps.cluster, pool.config.providerIDPrefix);\n    if (!verdict.allowed) return abort(verdict);\n    const ended =",
        replace:
          '    const verdict = mayCutPower(machine, pool.deps.cluster, pool.config.providerIDPrefix);\n    if (!verdict.allowed && (job.attempts["plug-off"] ?? 0) === 0) return abort(verdict);\n    const ended =',
      },
    ],
  },
  {
    name: "no check at the plug",
    edits: [{ file: "src/domain/switching.ts", find: "    if (verdict.allowed) return true;", replace: "    if (verdict.allowed || cut.reason === \"power-off\") return true;" }],
  },
  {
    name: "drop check-taint's verdict",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: "    const verdict = mayCutPower(machine, pool.deps.cluster, pool.config.providerIDPrefix);\n    if (!verdict.allowed) return abort(verdict);\n    const nodes = nodesOf(pool, machine);",
        replace: "    const nodes = nodesOf(pool, machine);",
      },
    ],
  },
  {
    name: "create the power-off pod without a verdict",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: "    const verdict = await shutdownVerdict(pool, machine, node, (n) => { asked = n; }, options);\n    if (!verdict.allowed) return abort(verdict);\n    await pool.deps.teardown.createPowerOffPod(",
        replace: "    await pool.deps.teardown.createPowerOffPod(",
      },
    ],
  },
  {
    name: "ask a BMC for an OS shutdown without a verdict",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: "        const verdict = await shutdownVerdict(pool, machine, node, (n) => { asked = n; }, o);\n        if (!verdict.allowed) refusal = verdict;\n        return verdict.allowed;",
        replace: "        return o !== null;",
      },
    ],
  },
  {
    name: "take a BMC shutdown's verdict before its wait at the BMC",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: "      let asked: NodeView | undefined;\n      const mayShutDown = async (o?: CallOptions): Promise<boolean> => {\n        const verdict = await shutdownVerdict(pool, machine, node, (n) => { asked = n; }, o);",
        replace: "      let asked: NodeView | undefined;\n      const early = await shutdownVerdict(pool, machine, node, (n) => { asked = n; }, options);\n      const mayShutDown = async (o?: CallOptions): Promise<boolean> => {\n        const verdict = o === null ? early : early;",
      },
    ],
  },
  {
    name: "count a name-matched Node as unregistered",
    edits: [
      {
        file: "src/domain/matching.ts",
        find: "  return byName === undefined || byID.some((n) => n.name === byName.name) ? byID : [...byID, byName];",
        replace: "  return byName === undefined || byName.providerID !== \"\" || byID.some((n) => n.name === byName.name) ? byID : [...byID, byName];",
      },
      {
        file: "src/domain/safety.ts",
        find: "  const nodes = [...fresh, ...nodesOf(ctx, machine).filter((v) => !fresh.some((f) => f.name === v.name))];",
        replace:
          "  const nodes = [...fresh, ...nodesOf(ctx, machine).filter((v) => !fresh.some((f) => f.name === v.name))].filter((n) => n.providerID === instanceId(ctx.config.providerIDPrefix, machine));",
      },
    ],
  },
  {
    name: "ignore the hold",
    edits: [
      { file: "src/domain/safety.ts", find: "  const held = nodes.find(hasHoldAnnotation);", replace: "  const held = nodes.find(() => false);" },
      { file: "src/domain/safety.ts", find: "  if (machine.hold) return { allowed: false, rule: \"held\", detail: `${machine.name} is held in the configuration` };\n  const held", replace: "  const held" },
    ],
  },
  {
    name: "resume a power-off whose DeleteNodes is still recording it",
    edits: [
      {
        file: "src/domain/power-off.ts",
        find: "  if (isPowerOffUnderWay(ctx, machine)) return;",
        replace: "  if (powerOffOf(ctx, machine) !== undefined) return;",
      },
    ],
  },
  {
    name: "forget, after a restart, the OS shutdown an earlier run's power-off pod asked for",
    edits: [
      {
        file: "src/domain/power-off-job.ts",
        find: "  establishOnce(job, \"shutdownRequested\", at);\n  state.shutdownNodeUid ??= uid;\n",
        replace: "",
      },
    ],
  },
  {
    name: "undo a failed DeleteNodes' record while its writes may still land",
    edits: [
      {
        file: "src/domain/power-off.ts",
        find: "  if (job.kind === \"undo\" && job.writesOut) return COMPENSATION_POLL_MS;\n",
        replace: "",
      },
    ],
  },
  {
    name: "undo a failed DeleteNodes' record only where the view shows it",
    edits: [
      {
        file: "src/domain/power-off.ts",
        find: "    ...(job.kind === \"undo\" ? job.nodes : []),\n    ...(job.node === \"\" ? [] : [job.node]),\n",
        replace: "",
      },
    ],
  },
  {
    name: "resume a pending power-off record",
    edits: [
      {
        file: "src/domain/power-off.ts",
        find: "  const committed = records.find((r) => !r.record.pending)?.record;",
        replace: "  const committed = records[0]?.record;",
      },
    ],
  },
  {
    name: "resume a power-off this process undid when a lagging view shows its record again",
    edits: [
      {
        file: "src/domain/power-off.ts",
        find: "  if (startedAt === undefined || replayed) {",
        replace: "  if (startedAt === undefined) {",
      },
    ],
  },
  {
    name: "keep a NotReady seen once for the whole power-off",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: '      if (ready === undefined) return done(facts.hardCut === undefined ? "node NotReady" : "hard cut");',
        replace: '      if (ready === undefined || ready !== undefined) return done(facts.hardCut === undefined ? "node NotReady" : "hard cut");',
      },
    ],
  },
  {
    name: "take a plug read off once for off for the rest of the power-off",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: "      const ready = facts.hardCut === undefined && !mayBeCut(job) ? nodes.find((n) => n.ready) : undefined;",
        replace: "      const ready = facts.hardCut === undefined && facts.powerSeenOff === undefined && !mayBeCut(job) ? nodes.find((n) => n.ready) : undefined;",
      },
      {
        file: "src/domain/safety.ts",
        find: "    if (ready !== undefined && job?.facts.hardCut === undefined) {",
        replace: "    if (ready !== undefined && job?.facts.hardCut === undefined && job?.facts.powerSeenOff === undefined) {",
      },
    ],
  },
  {
    name: "cut at the plug a machine whose Node is Ready again",
    edits: [
      {
        file: "src/domain/safety.ts",
        find: "    if (ready !== undefined && job?.facts.hardCut === undefined) {",
        replace: "    if (ready !== undefined && ready === undefined) {",
      },
    ],
  },
  {
    name: "cut an unregistered machine whose power sensor gave no draw",
    edits: [
      {
        file: "src/domain/safety.ts",
        find: "  if (machine.power.measuresWatts && (watts === undefined || watts > ctx.config.powerOff.standbyWatts)) {",
        replace: "  if (machine.power.measuresWatts && watts !== undefined && watts > ctx.config.powerOff.standbyWatts) {",
      },
    ],
  },
  {
    name: "take a faulty sensor's negative draw for standby",
    edits: [{ file: "src/domain/lifecycle.ts", find: "  if (watts === undefined || watts >= 0) return reading;", replace: "  if (watts !== null) return reading;" }],
  },
  {
    name: "begin a DeleteNodes' power-off on the Node the view shows when the call ends",
    edits: [
      {
        file: "src/domain/scale-down.ts",
        find: "  for (const { machine, node } of toPowerOff) startPowerOff(ctx, machine, node, startedAt, false);",
        replace: "  for (const { machine } of toPowerOff) startPowerOff(ctx, machine, nodesOf(ctx, machine)[0]?.name ?? \"\", startedAt, false);",
      },
    ],
  },
  {
    name: "let a lagging view's copy of a deleted Node stand in for it at the cut",
    edits: [
      {
        file: "src/domain/safety.ts",
        find: "    if (fresh.length === 0 && job !== undefined && job.node !== \"\"",
        replace: "    if (nodes.length === 0 && job !== undefined && job.node !== \"\"",
      },
    ],
  },
  {
    name: "cut an unregistered machine plugpool did not power on",
    edits: [
      {
        file: "src/domain/safety.ts",
        find: "  const licence = powerOnLicence(ctx, machine);",
        replace: "  const licence = powerOnLicence(ctx, machine) ?? { at: Number.NEGATIVE_INFINITY, why: \"planted\" };",
      },
      {
        file: "src/domain/lifecycle.ts",
        find: "    case \"powered-outside\":\n    case \"off\":\n    case \"unknown\":\n      return false;",
        replace: "    case \"powered-outside\":\n      return true;\n    case \"off\":\n    case \"unknown\":\n      return false;",
      },
    ],
  },
  {
    name: "delete a Node on the view's judgement after the cut",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: "    const live = fresh.find((n) => n.ready && !hasDeletionTaint(n));",
        replace: "    const live = nodesOf(pool, machine).find((n) => n.ready && !hasDeletionTaint(n));",
      },
    ],
  },
  {
    name: "an act without the leadership check: the cut asks only the safety verdict at the plug",
    edits: [
      {
        file: "src/domain/leadership.ts",
        find: "    if (allowed) ensureActing(leadership, what);\n",
        replace: "    if (allowed && what.length === 0) ensureActing(leadership, what);\n",
      },
    ],
  },
  {
    name: "cut a machine without a Node while a Node of no machine that registered after its power-on exists",
    edits: [{ file: "src/domain/safety.ts", find: "  if (stranger !== undefined) {", replace: "  if (stranger !== undefined && nodes.length > 0) {" }],
  },
  {
    name: "the unregistered guard skipping NotReady Nodes",
    edits: [
      {
        file: "src/domain/safety.ts",
        find: "  return candidates.find((n) => claimsNoMachine(",
        replace: "  return candidates.find((n) => n.ready && claimsNoMachine(",
      },
    ],
  },
  {
    name: "delete the Node of a registration before the end of its power-on record is stored",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: "    if (fresh.length > 0) await pool.deps.records.stored(machine.name, options);\n",
        replace: "",
      },
    ],
  },
  {
    name: "a record that ends only on a Ready Node",
    edits: [
      {
        file: "src/domain/lifecycle.ts",
        find: "    if (nodesOf(ctx, machine).length > 0) endPowerOnRecord(ctx, machine);",
        replace: "    if (nodesOf(ctx, machine).some((n) => n.ready)) endPowerOnRecord(ctx, machine);",
      },
      {
        file: "src/domain/refresh.ts",
        find: "  if (nodes.length > 0) {\n    endPowerOnRecord(ctx, machine);",
        replace: "  if (nodes.length > 0) {\n    if (nodes.some((n) => n.ready)) endPowerOnRecord(ctx, machine);",
      },
    ],
  },
  {
    name: "a power-on record that outlives its plug reading off",
    edits: [{ file: "src/domain/switching.ts", find: "  if (!reading.on) plugReadOffWhileBooting(ctx, machine);\n", replace: "" }],
  },
  {
    name: "count no instance for a plug-on whose record is being written",
    edits: [{ file: "src/domain/lifecycle.ts", find: " || switchingOn;", replace: ";" }],
  },
  {
    name: "a scale-up round that forgets queued machines",
    edits: [
      {
        file: "src/domain/scale-up.ts",
        find: "    while (switchedOn.size + queued.size < delta && signal?.aborted !== true) {",
        replace: "    while (switchedOn.size < delta && signal?.aborted !== true) {",
      },
      { file: "src/domain/scale-up.ts", find: ").slice(0, delta - switchedOn.size - queued.size);", replace: ").slice(0, delta - switchedOn.size);" },
    ],
  },
  {
    name: "the inrush limit counted on the wall clock",
    edits: [
      { file: "src/domain/switching.ts", find: "  ctx.memory.powerOnsSent.push(ctx.deps.clock.monotonic());", replace: "  ctx.memory.powerOnsSent.push(ctx.deps.clock.now());" },
      { file: "src/domain/switching.ts", find: "  if (max === 0) return 0;\n  const now = ctx.deps.clock.monotonic();", replace: "  if (max === 0) return 0;\n  const now = ctx.deps.clock.now();" },
      { file: "src/domain/context.ts", find: "createdAt: deps.clock.monotonic(),", replace: "createdAt: deps.clock.now()," },
    ],
  },
  {
    name: "leave a machine halted by a power-off that was called off",
    edits: [
      {
        file: "src/domain/power-off.ts",
        find: "  const revival = await revive(ctx, machine, job, options);",
        replace: "  const revival = await Promise.resolve(job.revival === null ? 0 : undefined);",
      },
    ],
  },
  {
    name: "power-cycle a machine whose Node is Ready again when the off reaches the plug",
    edits: [
      {
        file: "src/domain/safety.ts",
        find: "  const ready = nodes.find((n) => n.ready);\n  if (ready !== undefined) return { allowed: false, rule: \"node-ready\"",
        replace: "  const ready = nodes.find((n) => n.ready && n.name === \"\");\n  if (ready !== undefined) return { allowed: false, rule: \"node-ready\"",
      },
    ],
  },
  {
    name: "power-cycle a machine under a Node that is not the one shut down",
    edits: [
      { file: "src/domain/revival.ts", find: "  if (job.shutdownNodeUid === undefined || node.uid !== job.shutdownNodeUid) {", replace: "  if (job.shutdownNodeUid === null) {" },
      { file: "src/domain/safety.ts", find: "  const other = nodes.find((n) => n.uid !== job.shutdownNodeUid || ", replace: "  const other = nodes.find((n) => " },
    ],
  },
  {
    name: "power-cycle a held machine",
    edits: [{ file: "src/domain/revival.ts", find: "  if (isMachineHeld(ctx, machine, nodesOf(ctx, machine))) {", replace: "  if (isMachineHeld(ctx, machine, nodesOf(ctx, machine)) && machine.index < 0) {" }],
  },
  {
    name: "an act without the leadership check: cluster writes go out unasked",
    edits: [
      {
        file: "src/domain/leadership.ts",
        find: "  const act = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {\n    ensureActing(leadership, what);\n",
        replace: "  const act = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {\n    if (what === \"\") ensureActing(leadership, what);\n",
      },
    ],
  },
  {
    name: "a switch-on that asks the leadership only before it waits for the device, not in its slot",
    edits: [{ file: "src/domain/leadership.ts", find: "    if (accepted) ensureActing(leadership, what);\n", replace: "    if (accepted && what === \"\") ensureActing(leadership, what);\n" }],
  },
  {
    name: "power-cycle a machine whose Node was Ready again after the shutdown's NotReady",
    edits: [{ file: "src/domain/revival.ts", find: "  if (job.shutdownNodeSeen.readyAgain) {", replace: "  if (job.shutdownNodeSeen.readyAgain && job.node === \"\") {" }],
  },
  {
    name: "a missing compensating write: a switch-on that failed after its record landed leaves the record standing",
    edits: [{ file: "src/domain/switching.ts", find: "    commandFailed(ctx, machine);\n    records.endPowerOn(machine.name);\n", replace: "    commandFailed(ctx, machine);\n" }],
  },
  {
    name: "a relist that keeps deleted objects",
    edits: [{ file: "src/adapters/kubernetes/reflector.ts", find: "  const listed = new Map<string, V>();\n", replace: "  const listed = new Map<string, V>(state.items);\n" }],
    suite: ["tests/adapters/kubernetes/cluster-view.test.ts"],
  },
  {
    name: "judge a NotReady after the shutdown request by setting plugpool's clock against the Node's",
    edits: [{ file: "src/domain/safety.ts", find: "  const then = job.shutdownNodeReady;\n", replace: "  const then = undefined as PowerOffJob[\"shutdownNodeReady\"];\n" }],
  },
  {
    name: "take the Node's Ready condition at the shutdown request from a view that may lag",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: "    await pool.deps.teardown.createPowerOffPod(machine, node.name, job.startedAt, options);\n    shutdownAsked(job, now, node, asked);",
        replace: "    await pool.deps.teardown.createPowerOffPod(machine, node.name, job.startedAt, options);\n    shutdownAsked(job, now, node, node);",
      },
    ],
    suite: ["tests/domain/power-off-steps.test.ts"],
  },
  {
    name: "end the watch of a halted machine on a view that lags, without asking the apiserver",
    edits: [{ file: "src/domain/revival.ts", find: "      return (await runsNow(ctx, machine, options)) ? undefined : REVIVAL_POLL_MS;", replace: "      return undefined;" }],
  },
  {
    name: "time the watch of a halted machine on the wall clock, which a step forward cuts short",
    edits: [
      { file: "src/domain/power-off.ts", find: "    revivalStarted(job, ctx.deps.clock.monotonic());", replace: "    revivalStarted(job, ctx.deps.clock.now());" },
      {
        file: "src/domain/revival.ts",
        find: "      if (ctx.deps.clock.monotonic() < revival.since + ctx.config.powerOff.notReadyTimeoutMs) return REVIVAL_POLL_MS;",
        replace: "      if (ctx.deps.clock.now() < revival.since + ctx.config.powerOff.notReadyTimeoutMs) return REVIVAL_POLL_MS;",
      },
    ],
  },
];
